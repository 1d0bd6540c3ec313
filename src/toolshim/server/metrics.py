"""Proxy metrics in Prometheus form (one registry per app), and the upstream wrapper that times calls."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from toolshim.engine import RESCUED_WARNING
from toolshim.types import ChatRequest, Completion, Metadata, StreamChunk
from toolshim.upstreams.base import Upstream, WrappedUpstream

__all__ = ["CONTENT_TYPE_LATEST", "Metrics", "ObservedUpstream", "Outcome"]

log = logging.getLogger("toolshim.engine")

Outcome = str
"""``tool_calls``, ``text``, ``error`` or ``client_closed``."""

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class Metrics:
    """The counters and histograms ``GET /metrics`` exposes, in a registry of their own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "toolshim_requests",
            "Chat-completion requests served, by mode and outcome "
            "(tool_calls, text, error, client_closed).",
            ["mode", "outcome"],
            registry=self.registry,
        )
        self.emulated = Counter(
            "toolshim_emulated_requests",
            "Requests whose tool calling was emulated (tools described in the prompt).",
            registry=self.registry,
        )
        self.reasks = Counter(
            "toolshim_reasks",
            "Times the model was re-asked after an invalid tool call.",
            registry=self.registry,
        )
        self.rescued = Counter(
            "toolshim_rescued_requests",
            "Native replies whose tool calls were recovered from the text content.",
            registry=self.registry,
        )
        self.llm_calls = Counter(
            "toolshim_llm_calls",
            "Requests sent to the upstream model server.",
            registry=self.registry,
        )
        self.upstream_latency = Histogram(
            "toolshim_upstream_latency_seconds",
            "Upstream latency: the whole reply (call=complete) or the first chunk (call=stream).",
            ["call"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.request_duration = Histogram(
            "toolshim_request_duration_seconds",
            "Time to serve a chat-completion request, end to end.",
            ["stream"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.limit_hits = Counter(
            "toolshim_limit_hits",
            "Requests or connections stopped by one of the proxy's limits (body_size, "
            "body_timeout, header_timeout, header_size, connections, concurrent_requests) or "
            "refused for want of a valid access key (auth).",
            ["limit"],
            registry=self.registry,
        )
        self.key_requests = Counter(
            "toolshim_key_requests",
            "Requests accepted, by the name of the access key they presented (--auth-keys).",
            ["key"],
            registry=self.registry,
        )
        self._complete_latency = self.upstream_latency.labels("complete")
        self._stream_latency = self.upstream_latency.labels("stream")
        self._durations = {
            True: self.request_duration.labels("true"),
            False: self.request_duration.labels("false"),
        }
        self._request_children: dict[tuple[str, str], Any] = {}

    def observe_request(
        self, mode: str, outcome: Outcome, meta: Metadata | None, seconds: float, *, stream: bool
    ) -> None:
        """Count one finished request (``meta`` is None when it failed before the engine ran)."""
        key = (mode, outcome)
        child = self._request_children.get(key)
        if child is None:
            child = self._request_children[key] = self.requests.labels(mode, outcome)
        child.inc()
        self._durations[stream].observe(seconds)
        if meta is None:
            return
        if meta.emulated:
            self.emulated.inc()
        if meta.reasks:
            self.reasks.inc(meta.reasks)
        if meta.llm_calls:
            self.llm_calls.inc(meta.llm_calls)
        if RESCUED_WARNING in meta.warnings:
            self.rescued.inc()

    def count_limit_hit(self, limit: str) -> None:
        self.limit_hits.labels(limit).inc()

    def count_key(self, name: str) -> None:
        self.key_requests.labels(name).inc()

    def observe_upstream(self, seconds: float, *, stream: bool) -> None:
        (self._stream_latency if stream else self._complete_latency).observe(seconds)

    def render(self, *, per_key: bool = True) -> bytes:
        """The Prometheus text; without ``per_key``, no series that names an access key (a
        caller who is not an admin sees neither the other keys' names nor their counts)."""
        text = generate_latest(self.registry)
        if per_key:
            return text
        lines = text.splitlines(keepends=True)
        return b"".join(
            line for line in lines if not _metric_name(line).startswith(b"toolshim_key_")
        )


class ObservedUpstream(WrappedUpstream):
    """Wraps an upstream to time its calls; at DEBUG it also logs a streamed reply's raw text.

    (The engine logs the raw text of non-streaming replies itself.)
    """

    def __init__(self, inner: Upstream, metrics: Metrics) -> None:
        super().__init__(inner)
        self.metrics = metrics

    def __repr__(self) -> str:
        return repr(self.inner)

    async def complete(
        self, request: ChatRequest, *, headers: Mapping[str, str] | None = None
    ) -> Completion:
        started = time.perf_counter()
        try:
            return await self.inner.complete(request, headers=headers)
        finally:
            self.metrics.observe_upstream(time.perf_counter() - started, stream=False)

    def stream(
        self, request: ChatRequest, *, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[StreamChunk]:
        timed = _TimedStream(self.inner.stream(request, headers=headers), self.metrics)
        return _logged(timed) if log.isEnabledFor(logging.DEBUG) else timed


class _TimedStream:
    """A stream's chunks as they come, the wait for its first one (or for its end or error,
    if it ends before one) observed. An iterator object, not an async generator: a chunk costs
    a call here, where a generator's layer costs a frame's resumption on every chunk of every
    stream."""

    __slots__ = ("_chunks", "_metrics", "_started", "_waiting")

    def __init__(self, chunks: AsyncIterator[StreamChunk], metrics: Metrics) -> None:
        self._chunks = chunks
        self._metrics = metrics
        self._started = time.perf_counter()
        self._waiting = True

    def __aiter__(self) -> _TimedStream:
        return self

    def __anext__(self) -> Awaitable[StreamChunk]:
        if self._waiting:
            return self._first()
        return self._chunks.__anext__()

    async def _first(self) -> StreamChunk:
        self._waiting = False
        try:
            return await self._chunks.__anext__()
        finally:
            self._metrics.observe_upstream(time.perf_counter() - self._started, stream=True)

    async def aclose(self) -> None:
        close = getattr(self._chunks, "aclose", None)
        if close is not None:
            await close()


async def _logged(chunks: _TimedStream) -> AsyncIterator[StreamChunk]:
    """``chunks`` passed on, their text logged at the end (DEBUG)."""
    texts: list[str] = []
    try:
        async for chunk in chunks:
            texts.append(_delta_text(chunk))
            yield chunk
    finally:
        await chunks.aclose()
        log.debug("← raw streamed reply (%d chunks):\n%s", len(texts), "".join(texts))


def _delta_text(chunk: StreamChunk) -> str:
    out = [chunk.content] if chunk.content else []
    for call in chunk.tool_calls:
        if call.name:
            out.append(f"[native tool call {call.name}]")
        if call.arguments:
            out.append(call.arguments)
    return "".join(out)


def _metric_name(line: bytes) -> bytes:
    """The metric a line of Prometheus text is about (``# HELP name …``, ``name{…} value``)."""
    words = line.split(b" ", 3)
    name = words[2] if line.startswith(b"#") and len(words) > 2 else words[0]
    return name.split(b"{", 1)[0]
