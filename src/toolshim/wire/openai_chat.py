"""The OpenAI Chat Completions protocol: its codec for the proxy (requests decoded into core
types; completions, stream chunks and errors encoded as ``chat.completion``,
``chat.completion.chunk`` SSE and ``{"error": {...}}``), and the one import point of the
JSON readers and writers the engine and the upstreams use (:mod:`.requests`,
:mod:`.responses`, :mod:`.messages`)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from toolshim.errors import ConfigError, ToolshimError
from toolshim.types import ChatRequest, Completion, Metadata, StreamChunk
from toolshim.wire.base import Decoded
from toolshim.wire.messages import message_from_dict, message_to_dict
from toolshim.wire.requests import parse_request, request_to_body
from toolshim.wire.responses import (
    chunk_from_dict,
    chunk_to_dict,
    completion_from_dict,
    completion_to_dict,
    new_completion_id,
    usage_from_dict,
    usage_to_dict,
)
from toolshim.wire.sse import sse_event

__all__ = [
    "CODEC",
    "DONE",
    "ChatCodec",
    "ChatStreamEncoder",
    "chunk_from_dict",
    "chunk_to_dict",
    "completion_from_dict",
    "completion_to_dict",
    "error_body",
    "message_from_dict",
    "message_to_dict",
    "new_completion_id",
    "parse_request",
    "request_to_body",
    "usage_from_dict",
    "usage_to_dict",
]

DONE = b"data: [DONE]\n\n"
"""The event that ends every chat-completions stream, after an error event too."""


def error_body(exc: BaseException) -> tuple[int, dict[str, Any]]:
    """Map any exception onto an HTTP status and an OpenAI error body.

    Unknown exceptions become a 500 whose message names only the exception type, never a
    traceback.
    """
    if isinstance(exc, ToolshimError):
        return exc.status, {
            "error": {
                "message": exc.message,
                "type": exc.error_type,
                "param": exc.param,
                "code": exc.code,
            }
        }
    return 500, {
        "error": {
            "message": f"internal error ({type(exc).__name__}); see the toolshim log",
            "type": "internal_error",
            "param": None,
            "code": None,
        }
    }


def split_overrides(payload: dict[str, Any]) -> Mapping[str, Any]:
    """Take the ``toolshim`` object (per-request engine options) out of a request body."""
    per_request = payload.pop("toolshim", None)
    if per_request is None:
        return {}
    if not isinstance(per_request, Mapping):
        raise ConfigError(
            'the "toolshim" field must be an object such as {"mode": "force"}, not '
            f"{type(per_request).__name__}",
            param="toolshim",
        )
    return per_request


class ChatStreamEncoder:
    """One ``chat.completion.chunk`` stream: one id and time for all its chunks (an upstream
    chunk relayed as it came gets them too, and lends its model name to the chunks made
    here), ``data: [DONE]`` at the end."""

    __slots__ = ("ids",)

    def __init__(self, model: str) -> None:
        self.ids: dict[str, Any] = {
            "id": new_completion_id(),
            "model": model,
            "created": int(time.time()),
        }

    def feed(self, chunk: StreamChunk) -> list[bytes]:
        ids = self.ids
        out = chunk_to_dict(chunk, **ids)
        if chunk.raw is not None:
            out["id"], out["created"] = ids["id"], ids["created"]
            if isinstance(out.get("model"), str) and out["model"]:
                ids["model"] = out["model"]
        return [sse_event(out)]

    def finish(self) -> list[bytes]:
        return [DONE]

    def fail(self, exc: BaseException, meta: Metadata | None) -> list[bytes]:
        return [sse_event(CODEC.error(exc, meta)[1]), DONE]


class ChatCodec:
    """``POST /v1/chat/completions``."""

    name = "chat"

    def decode(self, payload: dict[str, Any]) -> Decoded:
        overrides = split_overrides(payload)
        return Decoded(parse_request(payload), overrides)

    def encode(self, completion: Completion, request: ChatRequest) -> dict[str, Any]:
        return completion_to_dict(completion)

    def stream_encoder(self, request: ChatRequest) -> ChatStreamEncoder:
        return ChatStreamEncoder(request.model)

    def error(self, exc: BaseException, meta: Metadata | None = None) -> tuple[int, dict[str, Any]]:
        status, body = error_body(exc)
        meta = meta or (exc.meta if isinstance(exc, ToolshimError) else None)
        if meta is not None:
            body["toolshim"] = meta.to_dict()
        return status, body


CODEC = ChatCodec()
