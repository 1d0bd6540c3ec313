"""The codec interface: what one protocol module in ``wire/`` gives the proxy.

A protocol the proxy serves (OpenAI Chat Completions, Anthropic Messages, OpenAI Responses)
is one module with one :class:`Codec` object, and one line in the server's route table
(:data:`toolshim.server.routes.PROTOCOLS`). The server does the HTTP (body, headers,
disconnects, metrics) and drives the engine; the codec only translates, without I/O::

    decoded = codec.decode(payload)                     # JSON object -> core request
    answer = engine.answer(decoded.request, warnings=decoded.warnings, **decoded.overrides)
    body = codec.encode(await answer.complete(), decoded.request)   # -> JSON object
    # streamed:
    encoder = codec.stream_encoder(decoded.request)
    for chunk in answer.stream():  send(encoder.feed(chunk))        # -> SSE bytes
    send(encoder.finish())               # or, when the stream broke after it began:
    send(encoder.fail(exc, answer.meta()))
    # any failure before an answer began:
    status, body = codec.error(exc, meta)

``decode`` raises :class:`toolshim.errors.InvalidRequestError` (or ``ConfigError``) for a
malformed request; the server answers it with ``codec.error``. Encoders hold the state of one
stream (ids, open blocks, the stop reason) and return whole SSE events as bytes (frame them
with :func:`toolshim.wire.sse.sse_event`), possibly none for a chunk.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from toolshim.errors import ConfigError
from toolshim.types import EMPTY, ChatRequest, Completion, Metadata, StreamChunk

__all__ = ["Codec", "Decoded", "StreamEncoder", "split_overrides"]


@dataclass(frozen=True, slots=True)
class Decoded:
    """A protocol's request in core types."""

    request: ChatRequest
    overrides: Mapping[str, Any] = EMPTY
    """Per-request engine options the body carried (``{"toolshim": {"mode": "force"}}``)."""
    warnings: tuple[str, ...] = field(default=())
    """What the decoder accepted but could not pass on (they join the metadata's warnings)."""


class StreamEncoder(Protocol):
    """One streamed answer, written in a protocol's server-sent events."""

    def feed(self, chunk: StreamChunk) -> list[bytes]:
        """The events for one core chunk (none, one or several)."""
        ...

    def finish(self) -> list[bytes]:
        """The events that end a stream that went well (after the last chunk)."""
        ...

    def fail(self, exc: BaseException, meta: Metadata | None) -> list[bytes]:
        """The events that end a stream broken after it began (an error event, never a
        made-up finish)."""
        ...


class Codec(Protocol):
    """One protocol: requests decoded into core types; answers and errors encoded back."""

    name: str
    """A short label for logs and metrics (``chat``, ``messages``)."""

    def decode(self, payload: dict[str, Any]) -> Decoded: ...

    def encode(self, completion: Completion, request: ChatRequest) -> dict[str, Any]: ...

    def stream_encoder(self, request: ChatRequest) -> StreamEncoder: ...

    def error(self, exc: BaseException, meta: Metadata | None = None) -> tuple[int, dict[str, Any]]:
        """The HTTP status and the protocol's error body for ``exc`` (with ``meta`` as the
        ``toolshim`` object beside it when given)."""
        ...


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
