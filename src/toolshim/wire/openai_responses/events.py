"""Core answers written as the OpenAI Responses API: the ``response`` object of a completion, the
server-sent events of a stream (a sans-IO encoder), and errors.

A stream's events, each with a ``sequence_number`` counting from 0::

    response.created, response.in_progress
    per output item, in order (an item stays open until the next text item or the end):
      reasoning   output_item.added, content_part.added, reasoning_text.delta…,
                  reasoning_text.done, content_part.done, output_item.done
      message     output_item.added, content_part.added, output_text.delta…,
                  output_text.done, content_part.done, output_item.done
      call        output_item.added, function_call_arguments.delta…,
                  function_call_arguments.done, output_item.done
                  (a freeform tool's call: custom_tool_call_input.delta / .done)
    response.completed (response.incomplete when the answer hit max_output_tokens),
    or response.failed when the answer broke after the stream began.

The ``response`` of the last event is the object the same answer gets unstreamed (ids aside),
with the ``toolshim`` metadata in it.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from toolshim.errors import ToolshimError
from toolshim.types import Completion, Message, Metadata, StreamChunk, ToolCall, Usage
from toolshim.wire.openai_chat import error_body
from toolshim.wire.openai_responses.input import ResponsesContext
from toolshim.wire.sse import sse_event

__all__ = [
    "ResponsesStreamEncoder",
    "encode_completion",
    "error_payload",
    "output_items",
    "response_object",
    "usage_object",
]

_REASONING_FIELD = "reasoning_content"
_ANSWER_ITEMS = frozenset({"message", "function_call", "custom_tool_call"})


def _new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


def usage_object(usage: Usage | None) -> dict[str, Any] | None:
    """Chat-completions usage in the Responses names (cached and reasoning counts kept)."""
    if usage is None:
        return None
    prompt_details = usage.extra.get("prompt_tokens_details")
    completion_details = usage.extra.get("completion_tokens_details")
    cached = prompt_details.get("cached_tokens") if isinstance(prompt_details, Mapping) else 0
    reasoning = (
        completion_details.get("reasoning_tokens") if isinstance(completion_details, Mapping) else 0
    )
    return {
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {"cached_tokens": int(cached or 0), "cache_write_tokens": 0},
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": int(reasoning or 0)},
        "total_tokens": usage.total_tokens or usage.prompt_tokens + usage.completion_tokens,
    }


def _message_item(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]
        if status == "completed"
        else [],
    }


def _reasoning_item(item_id: str, text: str) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "reasoning",
        "summary": [],
        "content": [{"type": "reasoning_text", "text": text}],
        "status": "completed",
    }


def _call_item(
    item_id: str, call_id: str, name: str, arguments: str, custom: bool, status: str = "completed"
) -> dict[str, Any]:
    if custom:
        return {
            "id": item_id,
            "type": "custom_tool_call",
            "status": status,
            "call_id": call_id,
            "name": name,
            "input": _custom_input(arguments) if status == "completed" else "",
        }
    return {
        "id": item_id,
        "type": "function_call",
        "status": status,
        "call_id": call_id,
        "name": name,
        "arguments": arguments if status == "completed" else "",
    }


def _custom_input(arguments: str) -> str:
    """A freeform tool's input from the one-string function's arguments."""
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return arguments
    if isinstance(value, Mapping) and isinstance(value.get("input"), str):
        return str(value["input"])
    return arguments


def output_items(message: Message, context: ResponsesContext) -> list[dict[str, Any]]:
    """A completion's message as output items: reasoning (when the upstream sent it), the text
    (also when empty and there is no call), then each call."""
    items: list[dict[str, Any]] = []
    reasoning = message.extra.get(_REASONING_FIELD)
    if isinstance(reasoning, str) and reasoning:
        items.append(_reasoning_item(_new_id("rs"), reasoning))
    if message.text or not message.tool_calls:
        items.append(_message_item(_new_id("msg"), message.text))
    for call in message.tool_calls:
        items.append(_function_call(call, context))
    return items


def _function_call(call: ToolCall, context: ResponsesContext) -> dict[str, Any]:
    custom = call.name in context.custom_tools
    return _call_item(
        _new_id("ctc" if custom else "fc"), call.id, call.name, call.arguments, custom
    )


def response_object(
    context: ResponsesContext,
    *,
    status: str,
    output: list[dict[str, Any]],
    usage: Usage | None = None,
    meta: Metadata | None = None,
    model: str | None = None,
    error: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``response`` object: the answer, and the request's settings echoed."""
    out: dict[str, Any] = {
        "id": context.id,
        "object": "response",
        "created_at": context.created_at,
        "status": status,
        "error": dict(error) if error is not None else None,
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "instructions": context.instructions,
        "max_output_tokens": context.max_output_tokens,
        "model": model or context.model,
        "output": output,
        "parallel_tool_calls": context.parallel_tool_calls,
        "previous_response_id": context.previous_response_id,
        "reasoning": context.reasoning or {"effort": None, "summary": None},
        "store": context.store,
        "temperature": context.temperature,
        "text": dict(context.text),
        "tool_choice": context.tool_choice,
        "tools": [dict(t) for t in context.tools],
        "top_p": context.top_p,
        "truncation": "disabled",
        "usage": usage_object(usage),
        "user": None,
        "metadata": dict(context.metadata),
    }
    if meta is not None:
        out["toolshim"] = meta.to_dict()
    return out


def _status(finish_reason: str | None) -> str:
    return "incomplete" if finish_reason == "length" else "completed"


def encode_completion(completion: Completion, context: ResponsesContext) -> dict[str, Any]:
    """A completion as the ``response`` object."""
    message = completion.message if completion.choices else Message("assistant", "")
    return response_object(
        context,
        status=_status(completion.finish_reason),
        output=output_items(message, context),
        usage=completion.usage,
        meta=completion.meta,
        model=completion.model or None,
    )


def error_payload(exc: BaseException) -> dict[str, Any]:
    """A ``response.error`` object. ``code`` is one of OpenAI's (``rate_limit_exceeded`` for a
    429, else ``server_error``); ``type`` is toolshim's error type (``tool_call_error`` …)."""
    status, body = error_body(exc)
    error = body["error"]
    return {
        "code": "rate_limit_exceeded" if status == 429 else "server_error",
        "message": error["message"],
        "type": error["type"],
        "param": error["param"],
    }


@dataclass
class _Item:
    output_index: int
    data: dict[str, Any]
    text: str = ""
    custom: bool = False
    open: bool = True


@dataclass
class ResponsesStreamEncoder:
    """One streamed answer as Responses events (sans-IO: feed core chunks, get SSE bytes)."""

    context: ResponsesContext
    on_complete: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    """Called with the final ``response`` once a stream ended well (the codec stores it); what
    it returns is sent (a response that could not be stored says so)."""
    sequence: int = 0
    usage: Usage | None = None
    meta: Metadata | None = None
    finish_reason: str | None = None
    model: str | None = None
    items: list[_Item] = field(default_factory=list)
    _text: _Item | None = None
    _reasoning: _Item | None = None
    _calls: dict[int, _Item] = field(default_factory=dict)
    _started: bool = False

    def _event(self, data: dict[str, Any]) -> bytes:
        data["sequence_number"] = self.sequence
        self.sequence += 1
        return sse_event(data, data["type"])

    def _response(self, status: str, error: Mapping[str, Any] | None = None) -> dict[str, Any]:
        output = [i.data for i in self.items if not i.open] if status != "in_progress" else []
        return response_object(
            self.context,
            status=status,
            output=output,
            usage=self.usage if status != "in_progress" else None,
            meta=self.meta if status != "in_progress" else None,
            model=self.model,
            error=error,
        )

    def start(self) -> list[bytes]:
        """``response.created`` and ``response.in_progress`` (sent once, before anything else)."""
        if self._started:
            return []
        self._started = True
        return [
            self._event({"type": "response.created", "response": self._response("in_progress")}),
            self._event(
                {"type": "response.in_progress", "response": self._response("in_progress")}
            ),
        ]

    def feed(self, chunk: StreamChunk) -> list[bytes]:
        out = self.start()
        if chunk.choice_index != 0:
            return out
        if chunk.meta is not None:
            self.meta = chunk.meta
        if chunk.usage is not None:
            self.usage = chunk.usage
        if chunk.finish_reason is not None:
            self.finish_reason = chunk.finish_reason
        if chunk.model:
            self.model = chunk.model
        reasoning = chunk.extra.get(_REASONING_FIELD)
        if isinstance(reasoning, str) and reasoning:
            out += self._reasoning_delta(reasoning)
        if chunk.content:
            out += self._text_delta(chunk.content)
        for delta in chunk.tool_calls:
            out += self._call_delta(delta.index, delta.id, delta.name, delta.arguments)
        return out

    # -- items --------------------------------------------------------------------------------

    def _open(self, data: dict[str, Any], *, custom: bool = False) -> tuple[_Item, bytes]:
        item = _Item(len(self.items), data, custom=custom)
        self.items.append(item)
        added = self._event(
            {"type": "response.output_item.added", "output_index": item.output_index, "item": data}
        )
        return item, added

    def _reasoning_delta(self, delta: str) -> list[bytes]:
        out: list[bytes] = []
        if self._reasoning is None:
            out += self._close_text()
            data = {**_reasoning_item(_new_id("rs"), ""), "status": "in_progress", "content": []}
            self._reasoning, added = self._open(data)
            out.append(added)
            out.append(self._part_event("added", self._reasoning, "reasoning_text", ""))
        out.append(self._grow(self._reasoning, "response.reasoning_text.delta", delta))
        return out

    def _grow(self, item: _Item, kind: str, delta: str, **more: Any) -> bytes:
        """``delta`` added to the text of ``item``, and the ``kind`` of event that says so."""
        item.text += delta
        return self._event(
            {
                "type": kind,
                "item_id": item.data["id"],
                "output_index": item.output_index,
                "content_index": 0,
                "delta": delta,
                **more,
            }
        )

    def _open_text(self) -> list[bytes]:
        if self._text is not None:
            return []
        out = self._close_reasoning()
        self._text, added = self._open(_message_item(_new_id("msg"), "", "in_progress"))
        out.append(added)
        out.append(self._part_event("added", self._text, "output_text", ""))
        return out

    def _text_delta(self, delta: str) -> list[bytes]:
        out = self._open_text()
        assert self._text is not None
        out.append(self._grow(self._text, "response.output_text.delta", delta, logprobs=[]))
        return out

    def _call_delta(
        self, index: int, call_id: str | None, name: str | None, arguments: str | None
    ) -> list[bytes]:
        out: list[bytes] = []
        item = self._calls.get(index)
        if item is None:
            out += self._close_reasoning()
            out += self._close_text()
            name = name or ""
            custom = name in self.context.custom_tools
            data = _call_item(
                _new_id("ctc" if custom else "fc"),
                call_id or _new_id("call"),
                name,
                "",
                custom,
                "in_progress",
            )
            item, added = self._open(data, custom=custom)
            self._calls[index] = item
            out.append(added)
        elif name and not item.data["name"]:
            item.data["name"] = name
        if arguments:
            item.text += arguments
            if not item.custom:  # a freeform input is sent whole when the call ends
                out.append(
                    self._event(
                        {
                            "type": "response.function_call_arguments.delta",
                            "item_id": item.data["id"],
                            "output_index": item.output_index,
                            "delta": arguments,
                        }
                    )
                )
        return out

    def _part_event(self, which: str, item: _Item, kind: str, text: str) -> bytes:
        part: dict[str, Any] = {"type": kind, "text": text}
        if kind == "output_text":
            part["annotations"] = []
            part["logprobs"] = []
        return self._event(
            {
                "type": f"response.content_part.{which}",
                "item_id": item.data["id"],
                "output_index": item.output_index,
                "content_index": 0,
                "part": part,
            }
        )

    def _done(self, item: _Item, data: dict[str, Any]) -> bytes:
        item.data = data
        item.open = False
        return self._event(
            {"type": "response.output_item.done", "output_index": item.output_index, "item": data}
        )

    def _close_text(self) -> list[bytes]:
        item, self._text = self._text, None
        if item is None:
            return []
        final = _message_item(item.data["id"], item.text)
        return self._close_content(item, "output_text", final, logprobs=[])

    def _close_reasoning(self) -> list[bytes]:
        item, self._reasoning = self._reasoning, None
        if item is None:
            return []
        return self._close_content(
            item, "reasoning_text", _reasoning_item(item.data["id"], item.text)
        )

    def _close_content(
        self, item: _Item, kind: str, final: dict[str, Any], **more: Any
    ) -> list[bytes]:
        """The events that close a text or reasoning ``item``: its ``kind`` of text done (with
        ``more``), its content part done, and the item done as ``final``."""
        common = {"item_id": item.data["id"], "output_index": item.output_index, "content_index": 0}
        return [
            self._event({"type": f"response.{kind}.done", **common, "text": item.text, **more}),
            self._part_event("done", item, kind, item.text),
            self._done(item, final),
        ]

    def _close_call(self, item: _Item) -> list[bytes]:
        data = item.data
        final = _call_item(data["id"], data["call_id"], data["name"], item.text, item.custom)
        common = {"item_id": data["id"], "output_index": item.output_index}
        if item.custom:
            text = final["input"]
            events = [
                self._event(
                    {"type": "response.custom_tool_call_input.delta", **common, "delta": text}
                ),
                self._event(
                    {"type": "response.custom_tool_call_input.done", **common, "input": text}
                ),
            ]
        else:
            events = [
                self._event(
                    {
                        "type": "response.function_call_arguments.done",
                        **common,
                        "name": data["name"],
                        "arguments": item.text,
                    }
                )
            ]
        return [*events, self._done(item, final)]

    def _close_all(self) -> list[bytes]:
        out = self._close_reasoning() + self._close_text()
        for item in sorted(self._calls.values(), key=lambda i: i.output_index):
            if item.open:
                out += self._close_call(item)
        return out

    # -- the end ------------------------------------------------------------------------------

    def finish(self) -> list[bytes]:
        """Close every open item and send the final ``response``."""
        out = self.start() + self._close_all()
        if not any(i.data["type"] in _ANSWER_ITEMS for i in self.items):
            out += self._open_text() + self._close_text()  # an empty answer: one empty message
        status = _status(self.finish_reason)
        kind = "response.completed" if status == "completed" else "response.incomplete"
        response = self._response(status)
        if self.on_complete is not None:
            response = self.on_complete(response)
        out.append(self._event({"type": kind, "response": response}))
        return out

    def fail(self, exc: BaseException, meta: Metadata | None) -> list[bytes]:
        """``response.failed`` with the error and the items finished so far (never a made-up
        finish)."""
        self.meta = meta or (exc.meta if isinstance(exc, ToolshimError) else None) or self.meta
        out = self.start()
        out.append(
            self._event(
                {
                    "type": "response.failed",
                    "response": self._response("failed", error_payload(exc)),
                }
            )
        )
        return out
