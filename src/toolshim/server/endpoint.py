"""One protocol's serving endpoint (chat completions, messages …): read the body, decode it
with the route's codec, serve it on the engine, answer in JSON or server-sent events, count."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from starlette.types import Receive, Scope, Send

from toolshim.engine import Answer, Engine
from toolshim.errors import ToolCallError, ToolshimError, UpstreamStatusError
from toolshim.server.asgi import (
    EMULATED_HEADER,
    DisconnectGuard,
    decode_json_object,
    emulated_value,
    error_meta,
    forwarded_headers,
    header_overrides,
    log_failure,
    read_body,
    request_headers,
    send_json,
)
from toolshim.server.guard import KEY_NAME, cut_by_drain
from toolshim.server.hosted_mcp import PROTOCOLS as HOSTED
from toolshim.server.hosted_mcp import HostedTurn, run_hosted
from toolshim.server.limits import Limits
from toolshim.server.metrics import Metrics
from toolshim.server.model_aliases import ModelAlias, resolve_model
from toolshim.server.sse import SSEResponse
from toolshim.types import Completion, Metadata, Mode, StreamChunk
from toolshim.wire.base import Codec, StreamEncoder

__all__ = ["CLIENT_CLOSED", "ProtocolEndpoint", "ServerSettings", "wants_stream"]

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
    model_aliases: tuple[ModelAlias, ...] = ()
    """Requests naming a model that matches an alias go to its target (``--model-alias``)."""
    context_hint: str | None = None
    """Added to the error a request over the model's context gets: how to make room."""
    health_timeout: float = 2.0
    """Seconds ``/healthz`` waits for the upstream."""
    limits: Limits = field(default_factory=Limits)
    """Sizes, counts and deadlines every request is held to."""
    mcp_allow: tuple[str, ...] = ()
    """URL prefixes of the MCP servers a Responses request's ``mcp`` tools may reach (the
    proxy runs those itself; see :mod:`toolshim.server.hosted_mcp`)."""

    def choose_model(self, payload: dict[str, Any]) -> None:
        """Set the request's ``model`` to the one that serves it (pinned, alias, default)."""
        model = resolve_model(
            payload.get("model"), self.model_aliases, self.default_model, self.pin_model
        )
        if model is not None:
            payload["model"] = model

    def explain(self, exc: Exception) -> Exception:
        """``exc`` as the caller should get it: a request over the model's context window
        also says how to make room (:attr:`context_hint`)."""
        if isinstance(exc, UpstreamStatusError) and self.context_hint:
            return exc.with_context_hint(self.context_hint)
        return exc


class ProtocolEndpoint:
    """A protocol's serving route as a lean ASGI handler: decode, serve, answer, count.

    It is the proxy's hot path, so it reads the body and writes the answer with plain ASGI
    messages rather than through a framework's request and response objects.
    """

    def __init__(
        self, codec: Codec, engine: Engine, metrics: Metrics, settings: ServerSettings
    ) -> None:
        self.codec = codec
        self.engine = engine
        self.metrics = metrics
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        headers = request_headers(scope)
        payload: dict[str, Any] = {}
        overrides: Mapping[str, Any] = header_overrides(headers)
        stream = False
        try:
            body = await read_body(receive)
            if body is None:  # the client left before sending its request
                self._finish(payload, overrides, "client_closed", None, started, 499, False)
                return
            payload = decode_json_object(body)
            self.settings.limits.check_payload(payload)
            self.settings.choose_model(payload)
            stream = wants_stream(payload.get("stream"))  # (for the log of a bad request)
            protocol = HOSTED.get(self.codec.name) if self.settings.mcp_allow else None
            hosted = protocol.take(payload, self.settings.mcp_allow) if protocol else None
            decoded = self.codec.decode(payload)
            request, capped = self.settings.limits.bound_request(decoded.request)
            warnings = (*decoded.warnings, *capped, *(hosted.warnings if hosted else ()))
            overrides = {**decoded.overrides, **overrides}
            stream = request.stream
            upstream_headers = forwarded_headers(headers, self.settings.upstream_api_key)
            turn: HostedTurn | None = None
            if hosted is not None and hosted.servers:
                async with DisconnectGuard(receive) as guard:
                    turn = await run_hosted(
                        self.engine,
                        request,
                        hosted.servers,
                        approvals=hosted.approvals,
                        headers=upstream_headers,
                        warnings=warnings,
                        overrides=overrides,
                        max_tools=self.settings.limits.max_tools,
                    )
                    completion, request = turn.completion, turn.request
            else:
                answer = self.engine.answer(
                    request, headers=upstream_headers, warnings=warnings, **overrides
                )
                if stream:
                    await self._stream(receive, send, answer, payload, overrides, started)
                    return
                async with DisconnectGuard(receive) as guard:
                    completion = await answer.complete()
                request = answer.request
        except Exception as exc:
            await self._failed(send, exc, payload, overrides, started, stream)
            return
        if guard.disconnected:
            self._finish(payload, overrides, "client_closed", None, started, CLIENT_CLOSED, False)
            return
        meta = completion.meta
        outcome = "tool_calls" if completion.tool_calls else "text"
        data = self.codec.encode(completion, request)
        if turn is not None and protocol is not None:
            protocol.write(turn, data)
            if stream:  # the loop's finished answer, replayed as the protocol's events
                await self._replay(receive, send, protocol.replay(data), meta)
                self._finish(payload, overrides, outcome, meta, started, 200, True, completion)
                return
        await send_json(send, 200, data, [(EMULATED_HEADER, emulated_value(meta))])
        self._finish(payload, overrides, outcome, meta, started, 200, False, completion)

    # -- streaming ----------------------------------------------------------------------------

    async def _replay(
        self, receive: Receive, send: Send, events: Iterable[bytes], meta: Metadata | None
    ) -> None:
        async def each() -> AsyncGenerator[bytes, None]:
            for data in events:
                yield data

        headers = [(EMULATED_HEADER, emulated_value(meta))]
        await SSEResponse(each(), headers=headers)(receive, send)

    async def _stream(
        self,
        receive: Receive,
        send: Send,
        answer: Answer,
        payload: dict[str, Any],
        overrides: Mapping[str, Any],
        started: float,
    ) -> None:
        chunks = answer.stream()
        # Wait for the first chunk before answering: an upstream that fails before streaming
        # anything gets a real HTTP error status, and the emulated header is known by then.
        guard = DisconnectGuard(receive, blocks=2)  # this wait, then the sending
        try:
            async with guard:
                first = await chunks.__anext__()
            if guard.disconnected:
                await _aclose(chunks)
                self._finish(payload, overrides, "client_closed", answer.meta(), started, 499, True)
                return
            emulated = b"true" if answer.emulated else b"false"
            encoder = self.codec.stream_encoder(answer.request)
            events = self._events(answer, encoder, first, chunks, payload, overrides, started)
            response = SSEResponse(events, headers=[(EMULATED_HEADER, emulated)], guard=guard)
            await response(receive, send)
        finally:
            guard.stop()

    async def _events(
        self,
        answer: Answer,
        encoder: StreamEncoder,
        first: StreamChunk,
        chunks: AsyncIterator[StreamChunk],
        payload: dict[str, Any],
        overrides: Mapping[str, Any],
        started: float,
    ) -> AsyncGenerator[bytes, None]:
        outcome = "tool_calls" if first.tool_calls else "text"
        status = 200
        finished = False
        try:
            for data in encoder.feed(first):
                yield data
            async for chunk in chunks:
                if chunk.tool_calls:
                    outcome = "tool_calls"
                for data in encoder.feed(chunk):
                    yield data
            ending = encoder.finish()
            finished = True
        except Exception as exc:
            # Headers are sent: the error travels as an event (with the turn's metadata beside
            # it, as on an error response), then the stream ends.
            exc = self.settings.explain(exc)
            status = exc.status if isinstance(exc, ToolshimError) else 500
            log_failure(exc, status)
            outcome = "error"
            finished = True
            ending = encoder.fail(exc, answer.meta())
        except asyncio.CancelledError:
            cut = cut_by_drain()  # the server's drain time ran out: say so, then end
            if cut is None:
                raise
            log_failure(cut, cut.status)
            outcome, status, finished = "error", cut.status, True
            ending = encoder.fail(cut, answer.meta())
        finally:
            if not finished:
                outcome, status = "client_closed", CLIENT_CLOSED
            self._finish(payload, overrides, outcome, answer.meta(), started, status, True)
        for data in ending:
            yield data

    # -- bookkeeping --------------------------------------------------------------------------

    async def _failed(
        self,
        send: Send,
        exc: Exception,
        payload: Mapping[str, Any],
        overrides: Mapping[str, Any],
        started: float,
        stream: bool,
    ) -> None:
        exc = self.settings.explain(exc)
        status, body = self.codec.error(exc)
        log_failure(exc, status)
        retry_after = getattr(exc, "retry_after", None)
        headers = [(b"retry-after", retry_after.encode("latin-1"))] if retry_after else []
        if isinstance(exc, ToolCallError):  # toolshim's own re-asks are spent: SDKs must not
            headers.append((b"x-should-retry", b"false"))  # retry (3 tries x 3 calls each)
        meta = error_meta(exc)  # set once the engine had started serving the turn
        if meta is not None:
            headers.append((EMULATED_HEADER, emulated_value(meta)))
        await send_json(send, status, body, headers)
        self._finish(payload, overrides, "error", meta, started, status, stream)

    def _finish(
        self,
        payload: Mapping[str, Any],
        overrides: Mapping[str, Any],
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
        key = KEY_NAME.get()
        if key != "-":
            details += f" key={key}"
        log.info(
            "%s model=%r stream=%s → %d %s mode=%s%s %.1f ms",
            self.codec.name,
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

    def _mode_label(self, payload: Mapping[str, Any], overrides: Mapping[str, Any]) -> str:
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
