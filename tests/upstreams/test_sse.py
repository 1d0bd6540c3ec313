"""The SSE decoder both HTTP adapters share."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolshim.errors import UpstreamIncompleteError, UpstreamProtocolError
from toolshim.upstreams._sse import SSEDecoder, sse_objects


def decode(lines: list[str]) -> tuple[list[str], bool]:
    decoder = SSEDecoder()
    out = []
    for line in lines:
        data = decoder.line(line)
        if data is not None:
            out.append(data)
        if decoder.done:
            return out, True
    tail = decoder.end()
    return ([*out, tail] if tail is not None else out), decoder.done


def test_events_comments_multiline_data_and_done() -> None:
    lines = [": keep-alive", "", "event: chunk", "data: {\"a\":", "data: 1}", "", "id: 7",
             "data: {\"b\": 2}\r\n", "", "data: [DONE]", "", "data: {\"after\": 1}", ""]  # fmt: skip
    assert decode(lines) == (['{"a":\n1}', '{"b": 2}'], True)


def test_a_stream_that_ends_without_a_blank_line() -> None:
    assert decode(['data: {"x": 1}']) == (['{"x": 1}'], False)
    assert decode(["data: [DONE]"]) == ([], True)
    assert decode([]) == ([], False)


# -- events from raw bytes: any chunking gives the same events; an unfinished stream raises --

EVENTS = [
    {"choices": [{"index": 0, "delta": {"content": "héllo\nworld"}, "finish_reason": None}]},
    {"choices": [{"index": 0, "delta": {"content": "x" * 300}, "finish_reason": None}]},
    {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
]
STREAM = (
    b": keep-alive\r\n\r\n"
    + b"".join(b"data: " + json.dumps(e, ensure_ascii=False).encode() + b"\r\n\r\n" for e in EVENTS)
    + b"data: [DONE]\n\n"
)


async def _parse(chunks: list[bytes], **options: Any) -> list[dict[str, Any]]:
    async def feed() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    return [obj async for obj in sse_objects(feed(), "http://up/v1", **options)]


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


@given(st.lists(st.integers(min_value=0, max_value=10_000), max_size=40))
def test_any_chunking_of_the_bytes_gives_the_same_events(cuts: list[int]) -> None:
    assert asyncio.run(_parse(_split(STREAM, cuts))) == EVENTS


@pytest.mark.parametrize(
    ("stream", "error"),
    [
        (STREAM[: STREAM.index(b"data: {", 30)], UpstreamIncompleteError),  # cut before the finish
        (b"", UpstreamIncompleteError),
    ],
)
async def test_a_stream_without_finish_or_done_raises(stream: bytes, error: type) -> None:
    with pytest.raises(error, match="cut off"):
        await _parse([stream])


async def test_a_finish_without_done_or_a_done_without_finish_is_complete() -> None:
    assert len(await _parse([STREAM[: STREAM.index(b"data: [DONE]")]])) == 3
    assert await _parse([b"data: [DONE]\n\n"]) == []


async def test_an_event_over_the_limit_names_it_and_a_long_one_under_it_passes() -> None:
    big = {"choices": [{"index": 0, "delta": {"content": "y" * 50_000}, "finish_reason": "stop"}]}
    data = b"data: " + json.dumps(big).encode() + b"\n\n"
    assert await _parse([data[i : i + 1000] for i in range(0, len(data), 1000)]) == [big]
    with pytest.raises(UpstreamProtocolError, match=r"limit of 10000 bytes \(max_event_bytes\)"):
        await _parse(
            [data[i : i + 1000] for i in range(0, len(data), 1000)], max_event_bytes=10_000
        )
