"""The proxy's timing of upstream streams (``ObservedUpstream``): the wait for the first chunk
is observed once, also for a stream that fails or ends before one; closing the stream closes
the upstream's; at DEBUG the raw text is logged once the stream ends."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping

import pytest

from tests.server.helpers import metric
from toolshim.errors import UpstreamError
from toolshim.server.metrics import Metrics, ObservedUpstream
from toolshim.testing import FakeUpstream
from toolshim.types import ChatRequest, Message, StreamChunk
from toolshim.upstreams.base import WrappedUpstream

REQUEST = ChatRequest(model="fake-model", messages=(Message(role="user", content="hi"),))


def streamed(metrics: Metrics) -> float:
    return metric(
        metrics.render().decode(), "toolshim_upstream_latency_seconds_count", call="stream"
    )


async def test_a_whole_stream_is_passed_on_and_timed_once() -> None:
    fake = FakeUpstream(["a reply in several pieces"], piece=4)
    metrics = Metrics()
    chunks = [c async for c in ObservedUpstream(fake, metrics).stream(REQUEST)]
    direct = [c async for c in FakeUpstream(["a reply in several pieces"], piece=4).stream(REQUEST)]
    assert len(chunks) > 3
    assert [c.content for c in chunks] == [c.content for c in direct]
    assert streamed(metrics) == 1


async def test_a_stream_that_fails_before_its_first_chunk_is_timed() -> None:
    metrics = Metrics()
    fake = FakeUpstream([UpstreamError("upstream down")])
    with pytest.raises(UpstreamError, match="upstream down"):
        async for _ in ObservedUpstream(fake, metrics).stream(REQUEST):
            pass
    assert streamed(metrics) == 1


class Recording(WrappedUpstream):
    """Notes when the upstream's own stream is closed."""

    closed = False

    async def stream(
        self, request: ChatRequest, *, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[StreamChunk]:
        try:
            async for chunk in self.inner.stream(request, headers=headers):
                yield chunk
        finally:
            Recording.closed = True


async def test_closing_the_stream_closes_the_upstreams() -> None:
    Recording.closed = False
    metrics = Metrics()
    stream = ObservedUpstream(Recording(FakeUpstream(["one two three four"], piece=3)), metrics)
    chunks = stream.stream(REQUEST)
    await chunks.__anext__()
    assert not Recording.closed
    await chunks.aclose()  # type: ignore[attr-defined]
    assert Recording.closed
    assert streamed(metrics) == 1


async def test_at_debug_the_raw_text_is_logged_when_the_stream_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="toolshim.engine")
    metrics = Metrics()
    fake = FakeUpstream(["the raw reply text"], piece=5)
    chunks = [c async for c in ObservedUpstream(fake, metrics).stream(REQUEST)]
    logged = [r.getMessage() for r in caplog.records if "raw streamed reply" in r.getMessage()]
    assert len(logged) == 1
    assert f"({len(chunks)} chunks)" in logged[0]
    assert logged[0].endswith("the raw reply text")
    assert streamed(metrics) == 1
