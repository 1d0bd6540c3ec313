"""``POST /v1/chat/completions``: one request through the engine, as JSON or as server-sent events."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

from starlette.types import Receive, Scope, Send

from toolshim.engine import Engine, streaming
from toolshim.engine.turn import Turn, describe_body
from toolshim.server.asgi import (
    EMULATED_HEADER,
    DisconnectGuard,
    decode_json_object,
    emulated_value,
    error_meta,
    error_status_body,
    forwarded_headers,
    header_overrides,
    read_body,
    request_headers,
    send_json,
)
from toolshim.server.metrics import Metrics
from toolshim.server.sse import DONE, SSEResponse, event
from toolshim.types import Completion, Metadata, Mode, StreamChunk
from toolshim.wire.openai import chunk_to_dict, new_completion_id

__all__ = ["ChatCompletions", "ServerSettings", "wants_stream"]

log = logging.getLogger("toolshim.server")
engine_log = logging.getLogger("toolshim.engine")

CLIENT_CLOSED = 499
"""The status logged for a request whose client went away (nginx's convention)."""

_MODES = frozenset(m.value for m in Mode)
_TRUE_TEXT = frozenset({"1", "true", "yes", "on", "t", "y"})


def wants_stream(value: Any) -> bool:
    """``stream`` read as pydantic reads a lax bool (a list or an object is left to validation)."""
    if value is None or isinstance(value, bool):
        return bool(value)
    if isinstance(value, int | str):
        return str(value).strip().lower() in _TRUE_TEXT
    return False


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """How the proxy treats requests, beyond the engine's own options."""

    upstream_api_key: str | None = None
    """Sent upstream as ``Authorization: Bearer …`` in place of the caller's header."""
    default_model: str | None = None
    """The model for requests that name none."""
    pin_model: bool = False
    """Send every request to ``default_model`` whatever it names (a one-model upstream)."""
    health_timeout: float = 2.0
    """Seconds ``/healthz`` waits for the upstream."""


def _wire_chunk(chunk: StreamChunk, ids: dict[str, Any]) -> dict[str, Any]:
    """A chunk as JSON with one id and time for the whole stream: an upstream chunk relayed as
    it came gets the stream's id and time, and lends its model name to the chunks made here."""
    out = chunk_to_dict(chunk, **ids)
    if chunk.raw is not None:
        out["id"], out["created"] = ids["id"], ids["created"]
        if isinstance(out.get("model"), str) and out["model"]:
            ids["model"] = out["model"]
    return out


class ChatCompletions:
    """The chat-completions endpoint as a lean ASGI handler: decode, serve, answer, count.

    It is the proxy's hot path, so it reads the body and writes the answer with plain ASGI
    messages rather than through a framework's request and response objects.
    """

    def __init__(self, engine: Engine, metrics: Metrics, settings: ServerSettings) -> None:
        self.engine = engine
        self.metrics = metrics
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        headers = request_headers(scope)
        payload: dict[str, Any] = {}
        overrides: dict[str, str] = {}
        stream = False
        try:
            body = await read_body(receive)
            if body is None:  # the client left before sending its request
                self._finish(payload, overrides, "client_closed", None, started, 499, False)
                return
            payload = decode_json_object(body)
            self._choose_model(payload)
            overrides = header_overrides(headers)
            upstream_headers = forwarded_headers(headers, self.settings.upstream_api_key)
            stream = wants_stream(payload.get("stream"))
            if engine_log.isEnabledFor(logging.DEBUG):
                engine_log.debug(
                    "← client request (stream=%s, overrides=%s)\n%s",
                    stream,
                    overrides or payload.get("toolshim") or {},
                    describe_body(payload),
                )
            if stream:
                await self._stream(receive, send, payload, upstream_headers, overrides, started)
                return
            async with DisconnectGuard(receive) as guard:
                completion = await self.engine.acomplete(
                    payload, headers=upstream_headers, **overrides
                )
        except Exception as exc:
            await self._failed(send, exc, payload, overrides, started, stream)
            return
        if guard.disconnected:
            self._finish(payload, overrides, "client_closed", None, started, CLIENT_CLOSED, False)
            return
        meta = completion.meta
        outcome = "tool_calls" if completion.tool_calls else "text"
        emulated = emulated_value(meta)
        await send_json(send, 200, completion.to_openai(), [(EMULATED_HEADER, emulated)])
        self._finish(payload, overrides, outcome, meta, started, 200, False, completion)

    # -- streaming ----------------------------------------------------------------------------

    async def _stream(
        self,
        receive: Receive,
        send: Send,
        payload: dict[str, Any],
        upstream_headers: dict[str, str],
        overrides: dict[str, str],
        started: float,
    ) -> None:
        turn = self.engine.turn(payload, headers=upstream_headers, **overrides)
        chunks = streaming.serve(self.engine, turn)
        # Wait for the first chunk before answering: an upstream that fails before streaming
        # anything gets a real HTTP error status, and the emulated header is known by then.
        guard = DisconnectGuard(receive, blocks=2)  # this wait, then the sending
        try:
            async with guard:
                first = await chunks.__anext__()
            if guard.disconnected:
                await _aclose(chunks)
                self._finish(payload, overrides, "client_closed", turn.meta(), started, 499, True)
                return
            emulated = b"true" if turn.emulated else b"false"
            events = self._events(turn, first, chunks, payload, overrides, started)
            response = SSEResponse(events, headers=[(EMULATED_HEADER, emulated)], guard=guard)
            await response(receive, send)
        finally:
            guard.stop()

    async def _events(
        self,
        turn: Turn,
        first: StreamChunk,
        chunks: AsyncIterator[StreamChunk],
        payload: dict[str, Any],
        overrides: dict[str, str],
        started: float,
    ) -> AsyncGenerator[bytes, None]:
        ids: dict[str, Any] = {
            "id": new_completion_id(),
            "model": turn.request.model,
            "created": int(time.time()),
        }
        outcome = "tool_calls" if first.tool_calls else "text"
        status = 200
        finished = False
        try:
            yield event(_wire_chunk(first, ids))
            async for chunk in chunks:
                if chunk.tool_calls:
                    outcome = "tool_calls"
                yield event(_wire_chunk(chunk, ids))
            finished = True
        except Exception as exc:
            # Headers are sent: the error travels as an event (with the turn's metadata beside
            # it, as on an error response), then the stream ends normally.
            status, body = error_status_body(exc, turn.meta())
            outcome = "error"
            finished = True
            yield event(body)
        finally:
            if not finished:
                outcome, status = "client_closed", CLIENT_CLOSED
            self._finish(payload, overrides, outcome, turn.meta(), started, status, True)
        yield DONE

    # -- bookkeeping --------------------------------------------------------------------------

    def _choose_model(self, payload: dict[str, Any]) -> None:
        model = self.settings.default_model
        if model and (self.settings.pin_model or not payload.get("model")):
            payload["model"] = model

    async def _failed(
        self,
        send: Send,
        exc: Exception,
        payload: Mapping[str, Any],
        overrides: Mapping[str, str],
        started: float,
        stream: bool,
    ) -> None:
        status, body = error_status_body(exc)
        retry_after = getattr(exc, "retry_after", None)
        headers = [(b"retry-after", retry_after.encode("latin-1"))] if retry_after else []
        meta = error_meta(exc)  # set once the engine had started serving the turn
        if meta is not None:
            headers.append((EMULATED_HEADER, emulated_value(meta)))
        await send_json(send, status, body, headers)
        self._finish(payload, overrides, "error", meta, started, status, stream)

    def _finish(
        self,
        payload: Mapping[str, Any],
        overrides: Mapping[str, str],
        outcome: str,
        meta: Metadata | None,
        started: float,
        status: int,
        stream: bool,
        completion: Completion | None = None,
    ) -> None:
        seconds = time.perf_counter() - started
        mode = meta.mode if meta is not None else self._mode_label(payload, overrides)
        self.metrics.observe_request(mode, outcome, meta, seconds, stream=stream)
        if not log.isEnabledFor(logging.INFO):
            return
        details = ""
        if meta is not None:
            details = (
                f" emulated={str(meta.emulated).lower()} llm_calls={meta.llm_calls}"
                f" reasks={meta.reasks}"
            )
        log.info(
            "chat model=%r stream=%s → %d %s mode=%s%s %.1f ms",
            payload.get("model", ""),
            str(stream).lower(),
            status,
            outcome,
            mode,
            details,
            seconds * 1000,
        )
        if meta is not None and meta.warnings and engine_log.isEnabledFor(logging.DEBUG):
            engine_log.debug("warnings: %s", "; ".join(meta.warnings))
        if completion is not None and engine_log.isEnabledFor(logging.DEBUG):
            calls = ", ".join(f"{c.name}({c.arguments})" for c in completion.tool_calls)
            engine_log.debug(
                "→ client: finish_reason=%s %s",
                completion.finish_reason,
                f"tool calls: {calls}" if calls else f"text: {len(completion.text)} chars",
            )

    def _mode_label(self, payload: Mapping[str, Any], overrides: Mapping[str, str]) -> str:
        per_request = payload.get("toolshim")
        mode = overrides.get("mode") or (
            per_request.get("mode") if isinstance(per_request, Mapping) else None
        )
        if mode is None:
            return self.engine.options.mode.value
        label = str(mode).strip().lower()
        return label if label in _MODES else "invalid"


async def _aclose(iterator: AsyncIterator[Any]) -> None:
    """Close an async generator early (runs its ``finally`` blocks, closing the upstream)."""
    aclose = getattr(iterator, "aclose", None)
    if aclose is not None:
        await aclose()
