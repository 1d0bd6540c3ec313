"""The Chat Completions codec for the proxy: requests decoded into core types (by
:mod:`.requests`); completions, stream chunks and errors encoded as ``chat.completion``,
``chat.completion.chunk`` SSE and ``{"error": {...}}`` (by :mod:`.answers`)."""

from __future__ import annotations

import time
from typing import Any

from toolshim.errors import ToolshimError
from toolshim.types import ChatRequest, Completion, Metadata, StreamChunk
from toolshim.wire.base import Decoded, split_overrides
from toolshim.wire.openai_chat.answers import chunk_to_dict, completion_to_dict, new_completion_id
from toolshim.wire.openai_chat.requests import parse_request
from toolshim.wire.sse import sse_event

__all__ = ["CODEC", "DONE", "ChatCodec", "ChatStreamEncoder", "error_body", "split_overrides"]

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
        if chunk.event_extra:  # (the upstream's id and time, written over)
            out["id"], out["created"] = ids["id"], ids["created"]
        if chunk.model:
            ids["model"] = chunk.model
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
