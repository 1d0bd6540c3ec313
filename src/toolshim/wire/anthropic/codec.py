"""The Anthropic Messages protocol (``POST /v1/messages``): its requests decoded into core
types, and completions, stream chunks and errors encoded as Anthropic's message object, SSE
events and ``{"type": "error", ...}`` body (see :mod:`toolshim.wire.base`).

==============================  =============================================================
Anthropic request               core request (what an OpenAI-compatible upstream is sent)
==============================  =============================================================
``system`` (text or blocks)     one ``system`` message first (``cache_control`` ignored)
``text`` / ``image`` blocks     text / ``image_url`` content parts (base64 as a data URL)
``tool_use`` (assistant)        ``tool_calls`` (ids kept as they are)
``tool_result`` (user)          one ``role=tool`` message each, before the user's other
                                blocks; ``is_error`` prefixes the text with ``Error: ``
``thinking`` blocks             accepted, not sent on (Chat Completions has no field for them)
``tools`` (``input_schema``)    function tools; server tools (``web_search_…``, ``bash_…``,
                                ``text_editor_…``: any ``type`` but ``custom``) are dropped
                                with a warning in the ``toolshim`` metadata
``tool_choice``                 ``auto`` → auto, ``any`` → required, ``tool`` → that function,
                                ``none`` → none; ``disable_parallel_tool_use`` → one call
``max_tokens``, ``temperature``, ``top_p``, ``top_k``: as they are; ``stop_sequences`` → ``stop``
``metadata``, ``thinking`` …    accepted, not sent on
==============================  =============================================================

Answers: ``msg_…`` ids; ``tool_use`` ids are the call ids with ``toolu_`` before them (an
emulated call's id reads ``toolu_emulated_…``); ``stop_reason`` ``tool_use``, ``max_tokens``,
``stop_sequence`` (when the upstream names the stop string that matched, as vLLM and SGLang
do) or ``end_turn``; the ``toolshim`` object beside the message (on ``message_delta`` when
streamed).
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from toolshim.errors import ToolshimError
from toolshim.types import (
    ChatRequest,
    Completion,
    Metadata,
    StreamChunk,
)
from toolshim.wire.anthropic.requests import decode_request, server_tool_warning
from toolshim.wire.base import Decoded
from toolshim.wire.sse import sse_event

__all__ = [
    "CODEC",
    "MessagesCodec",
    "MessagesStreamEncoder",
    "decode_request",
    "error_type",
    "new_message_id",
    "server_tool_warning",
    "stop_reason",
    "tool_use_id",
]


def new_message_id() -> str:
    return f"msg_{secrets.token_hex(12)}"


def tool_use_id(call_id: str) -> str:
    """A call's id as a ``tool_use`` block's: ``toolu_`` before it (unless it has it)."""
    return call_id if call_id.startswith("toolu_") else f"toolu_{call_id}"


# -- answers ----------------------------------------------------------------------------------


def stop_reason(finish_reason: str | None, matched: Any, request: ChatRequest) -> str:
    """Anthropic's ``stop_reason`` for a chat ``finish_reason`` (``matched``: the stop string
    the upstream says ended the reply, if it says)."""
    match finish_reason:
        case "tool_calls" | "function_call":
            return "tool_use"
        case "length":
            return "max_tokens"
        case "content_filter":
            return "refusal"
    if isinstance(matched, str) and matched in (request.params.get("stop") or ()):
        return "stop_sequence"
    return "end_turn"


def _input(arguments: str) -> Any:
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def encode_completion(completion: Completion, request: ChatRequest) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if completion.text:
        content.append({"type": "text", "text": completion.text})
    for call in completion.tool_calls:
        content.append(
            {
                "type": "tool_use",
                "id": tool_use_id(call.id),
                "name": call.name,
                "input": _input(call.arguments),
            }
        )
    matched = completion.choices[0].stop_sequence if completion.choices else None
    reason = stop_reason(completion.finish_reason, matched, request)
    usage = completion.usage
    out: dict[str, Any] = {
        "id": new_message_id(),
        "type": "message",
        "role": "assistant",
        "model": request.model or completion.model,
        "content": content,
        "stop_reason": reason,
        "stop_sequence": matched if reason == "stop_sequence" else None,
        "usage": {
            "input_tokens": usage.prompt_tokens if usage else 0,
            "output_tokens": usage.completion_tokens if usage else 0,
        },
    }
    if completion.meta is not None:
        out["toolshim"] = completion.meta.to_dict()
    return out


_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    529: "overloaded_error",
}


def error_type(status: int) -> str:
    """Anthropic's error ``type`` for an HTTP status."""
    return _TYPES.get(status) or ("api_error" if status >= 500 else "invalid_request_error")


def encode_error(exc: BaseException, meta: Metadata | None = None) -> tuple[int, dict[str, Any]]:
    if isinstance(exc, ToolshimError):
        status, message = exc.status, exc.message
        meta = meta or exc.meta
    else:
        status, message = 500, f"internal error ({type(exc).__name__}); see the toolshim log"
    body: dict[str, Any] = {
        "type": "error",
        "error": {"type": error_type(status), "message": message},
    }
    if meta is not None:
        body["toolshim"] = meta.to_dict()
    return status, body


# -- streams ----------------------------------------------------------------------------------


class MessagesStreamEncoder:
    """One streamed message as Anthropic's events, in their order: ``message_start``; for each
    block ``content_block_start``, its ``content_block_delta`` events (``text_delta``,
    ``input_json_delta``), ``content_block_stop``; then ``message_delta`` (stop reason,
    usage, the ``toolshim`` metadata) and ``message_stop``. A stream that breaks after it
    began ends with an ``error`` event instead."""

    def __init__(self, request: ChatRequest) -> None:
        self.request = request
        self.started = False
        self.block = -1
        """The index of the last block opened."""
        self.open: str | None = None
        """The open block's type (``text`` / ``tool_use``), None when none is open."""
        self.calls: dict[int, int] = {}
        """Each streamed call's block index, by the call's index."""
        self.finish_reason: str | None = None
        self.matched: Any = None
        self.input_tokens = 0
        self.output_tokens = 0
        self.meta: Metadata | None = None

    def _start(self) -> list[bytes]:
        self.started = True
        message: dict[str, Any] = {
            "id": new_message_id(),
            "type": "message",
            "role": "assistant",
            "model": self.request.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
        return [sse_event({"type": "message_start", "message": message}, "message_start")]

    def _close(self) -> list[bytes]:
        if self.open is None:
            return []
        self.open = None
        stop = {"type": "content_block_stop", "index": self.block}
        return [sse_event(stop, "content_block_stop")]

    def _open(self, block: dict[str, Any]) -> list[bytes]:
        events = self._close()
        self.block += 1
        self.open = block["type"]
        start = {"type": "content_block_start", "index": self.block, "content_block": block}
        events.append(sse_event(start, "content_block_start"))
        return events

    def _delta(self, index: int, delta: dict[str, Any]) -> bytes:
        data = {"type": "content_block_delta", "index": index, "delta": delta}
        return sse_event(data, "content_block_delta")

    def feed(self, chunk: StreamChunk) -> list[bytes]:
        events = [] if self.started else self._start()
        if chunk.usage is not None:
            self.input_tokens = chunk.usage.prompt_tokens
            self.output_tokens = chunk.usage.completion_tokens
        if chunk.meta is not None:
            self.meta = chunk.meta
        if chunk.choice_index != 0:
            return events
        if chunk.content:
            if self.open != "text":
                events += self._open({"type": "text", "text": ""})
            events.append(self._delta(self.block, {"type": "text_delta", "text": chunk.content}))
        for call in chunk.tool_calls:
            index = self.calls.get(call.index)
            if index is None:
                call_id = call.id or f"call_{secrets.token_hex(12)}"
                block = {"type": "tool_use", "id": tool_use_id(call_id), "name": call.name or ""}
                events += self._open({**block, "input": {}})
                index = self.calls[call.index] = self.block
            if call.arguments:
                delta = {"type": "input_json_delta", "partial_json": call.arguments}
                events.append(self._delta(index, delta))
        if chunk.finish_reason is not None:
            self.finish_reason = chunk.finish_reason
            if chunk.stop_sequence is not None:
                self.matched = chunk.stop_sequence
        return events

    def finish(self) -> list[bytes]:
        events = ([] if self.started else self._start()) + self._close()
        reason = stop_reason(self.finish_reason, self.matched, self.request)
        delta = {
            "type": "message_delta",
            "delta": {
                "stop_reason": reason,
                "stop_sequence": self.matched if reason == "stop_sequence" else None,
            },
            "usage": {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens},
        }
        if self.meta is not None:
            delta["toolshim"] = self.meta.to_dict()
        events.append(sse_event(delta, "message_delta"))
        events.append(sse_event({"type": "message_stop"}, "message_stop"))
        return events

    def fail(self, exc: BaseException, meta: Metadata | None) -> list[bytes]:
        return [sse_event(encode_error(exc, meta)[1], "error")]


class MessagesCodec:
    """``POST /v1/messages`` (and its ``count_tokens``)."""

    name = "messages"

    def decode(self, payload: dict[str, Any]) -> Decoded:
        return decode_request(payload)

    def encode(self, completion: Completion, request: ChatRequest) -> dict[str, Any]:
        return encode_completion(completion, request)

    def stream_encoder(self, request: ChatRequest) -> MessagesStreamEncoder:
        return MessagesStreamEncoder(request)

    def error(self, exc: BaseException, meta: Metadata | None = None) -> tuple[int, dict[str, Any]]:
        return encode_error(exc, meta)


CODEC = MessagesCodec()
