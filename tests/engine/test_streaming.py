"""Streaming through the engine gives the same answers, with the same upstream calls, as not."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from tests.engine.helpers import Scripted, request
from tests.engine.test_modes import AUTO_TABLE, FORCED_TABLE
from toolshim.engine import Engine
from toolshim.errors import ToolCallError, UpstreamStatusError
from toolshim.testing import FakeUpstream, Reply, call
from toolshim.types import Metadata, StreamChunk
from toolshim.wire.openai_chat import chunk_to_dict


@dataclass
class Assembled:
    content: str = ""
    calls: dict[int, dict[str, str]] = field(default_factory=dict)
    finish: str | None = None
    meta: Metadata | None = None
    usage: Any = None
    chunks: int = 0


async def collect(engine: Engine, body: dict[str, Any]) -> Assembled:
    out = Assembled()
    chunks: list[StreamChunk] = [c async for c in engine.astream(body)]
    for i, chunk in enumerate(chunks):
        wire = chunk_to_dict(chunk, id="x", model="m", created=0)
        out.chunks += 1
        if chunk.meta is not None:
            assert i == len(chunks) - 1, "metadata must ride on the last chunk only"
            out.meta = chunk.meta
        if wire.get("usage"):
            out.usage = wire["usage"]
        for choice in wire.get("choices") or []:
            delta = choice["delta"]
            out.content += delta.get("content") or ""
            for d in delta.get("tool_calls") or []:
                entry = out.calls.get(d["index"])
                if entry is None:
                    assert d.get("id") and d["function"].get("name"), "id and name come first"
                    assert d["type"] == "function"
                    entry = out.calls[d["index"]] = {"id": d["id"], "name": "", "arguments": ""}
                entry["name"] += d["function"].get("name") or ""
                entry["arguments"] += d["function"].get("arguments") or ""
            out.finish = choice.get("finish_reason") or out.finish
    assert out.meta is not None, "the last chunk carries the toolshim metadata"
    return out


def stream_outcome(result: Assembled) -> str:
    if result.calls:
        assert result.finish == "tool_calls"
        assert [c["name"] for c in result.calls.values()] == ["get_weather"]
        assert json.loads(result.calls[0]["arguments"]) == {"city": "Paris"}
        return "call"
    assert result.content.strip()
    return "text"


@pytest.mark.parametrize("strategy", ["single", "decision"])
@pytest.mark.parametrize(("mode", "kind", "needed"), sorted(AUTO_TABLE))
async def test_streamed_table_matches(mode: str, kind: str, needed: bool, strategy: str) -> None:
    single, decision, expected = AUTO_TABLE[(mode, kind, needed)]
    scripted = Scripted(kind, needed, decision=strategy == "decision")
    upstream = scripted.upstream()
    engine = Engine(upstream, mode=mode, strategy=strategy, registry=":memory:")
    if expected == "error":
        with pytest.raises(UpstreamStatusError):
            await collect(engine, request(stream=True))
        return
    result = await collect(engine, request(stream=True))
    assert stream_outcome(result) == expected
    calls = single if strategy == "single" else decision
    assert upstream.calls == calls
    assert result.meta is not None and result.meta.llm_calls == calls
    assert ("tool calls emulated" in result.meta.warnings) == (
        result.meta.emulated and bool(result.calls)
    )


@pytest.mark.parametrize(("mode", "kind"), sorted(FORCED_TABLE))
async def test_streamed_required_choice(mode: str, kind: str) -> None:
    calls, expected = FORCED_TABLE[(mode, kind)]
    upstream = Scripted(kind, needed=False).upstream()
    engine = Engine(upstream, mode=mode, registry=":memory:")
    result = await collect(engine, request(stream=True, tool_choice="required"))
    assert stream_outcome(result) == expected
    assert upstream.calls == calls


async def test_text_streams_before_the_reply_ends() -> None:
    upstream = FakeUpstream(tools="reject", piece=4).enqueue(
        "The weather is fine, no tool needed here."
    )
    engine = Engine(upstream, mode="force", registry=":memory:")
    deltas = [
        c.content for c in [c async for c in engine.astream(request(stream=True))] if c.content
    ]
    assert len(deltas) > 5, "prose is streamed in pieces, not held to the end"
    assert "".join(deltas) == "The weather is fine, no tool needed here."


async def test_a_call_after_prose_streams_the_prose_then_the_call() -> None:
    reply = 'Let me look that up. {"name": "get_weather", "arguments": {"city": "Paris"}}'
    upstream = FakeUpstream(piece=3).enqueue(reply)
    engine = Engine(upstream, mode="force", registry=":memory:")
    result = await collect(engine, request(stream=True))
    assert result.content == "Let me look that up. "
    assert stream_outcome(result) == "call"
    assert result.calls[0]["id"].startswith("emulated_")


async def test_usage_chunk_when_asked() -> None:
    upstream = FakeUpstream().enqueue(
        '{"tool_calls":[{"name":"get_weather","arguments":{"city":"Paris"}}]}'
    )
    engine = Engine(upstream, mode="force", registry=":memory:")
    result = await collect(engine, request(stream=True, stream_options={"include_usage": True}))
    assert result.usage is not None and result.usage["total_tokens"] > 0
    assert upstream.history[0]["stream_options"] == {"include_usage": True}


async def test_no_usage_chunk_unless_asked() -> None:
    upstream = FakeUpstream().enqueue("Hello there.")
    engine = Engine(upstream, mode="force", registry=":memory:")
    result = await collect(engine, request(stream=True))
    assert result.usage is None


async def test_streamed_reask_then_call() -> None:
    upstream = FakeUpstream().enqueue(
        '{"name": "get_location", "arguments": {}}',
        '{"name": "get_weather", "arguments": {"city": "Paris"}}',
    )
    engine = Engine(upstream, mode="force", registry=":memory:")
    result = await collect(engine, request(stream=True))
    assert stream_outcome(result) == "call"
    assert result.meta is not None and result.meta.reasks == 1
    correction = upstream.history[1]["messages"][-1]["content"]
    assert "get_location" in correction and "get_weather" in correction


async def test_streamed_required_choice_gives_up_with_an_error() -> None:
    upstream = FakeUpstream().enqueue("no", "still no", "never")
    engine = Engine(upstream, mode="force", registry=":memory:")
    with pytest.raises(ToolCallError):
        await collect(engine, request(stream=True, tool_choice="required"))
    assert upstream.calls == 3


async def test_native_stream_passes_through_untouched_without_tools() -> None:
    sent: list[dict[str, Any]] = []

    class Recorded(FakeUpstream):
        async def stream_body(self, body: Any, *, headers: Any = None) -> Any:
            async for chunk in super().stream_body(body, headers=headers):
                sent.append(chunk)
                yield chunk

    upstream = Recorded().enqueue("plain answer")
    engine = Engine(upstream, mode="auto", registry=":memory:")
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    chunks = [c async for c in engine.astream(body)]
    written = [chunk_to_dict(replace(c, meta=None), id="x", model="m", created=0) for c in chunks]
    assert written == sent


async def test_native_tool_call_deltas_are_relayed() -> None:
    upstream = FakeUpstream().enqueue(
        Reply(None, [call("get_weather", {"city": "Paris"}, id="call_1")])
    )
    engine = Engine(upstream, mode="auto", registry=":memory:")
    result = await collect(engine, request(stream=True))
    assert result.calls[0]["id"] == "call_1"
    assert stream_outcome(result) == "call"
    assert result.meta is not None and not result.meta.emulated


async def test_streamed_cut_off_call_ends_with_length() -> None:
    cut = Reply('{"tool_calls": [{"name": "get_weather", "arguments": {"ci', finish_reason="length")
    upstream = FakeUpstream([cut])
    engine = Engine(upstream, mode="force", registry=":memory:")
    result = await collect(engine, request(stream=True, tool_choice="required", max_tokens=12))
    assert upstream.calls == 1
    assert result.finish == "length"
    assert not result.calls
    assert result.meta is not None
    assert any("cut off by max_tokens" in w for w in result.meta.warnings)


@pytest.mark.parametrize(
    "choice", ["required", {"type": "function", "function": {"name": "get_weather"}}]
)
async def test_a_forced_choice_streams_no_text_from_rejected_attempts(choice: Any) -> None:
    upstream = FakeUpstream(
        [
            'Tool result: {"city": "Paris", "weather": "Sunny"}',
            '{"name": "get_weather", "arguments": {"city": "Paris"}}',
        ]
    )
    engine = Engine(upstream, mode="force", registry=":memory:")
    result = await collect(engine, request(stream=True, tool_choice=choice))
    assert result.content == ""
    assert stream_outcome(result) == "call"
    assert upstream.calls == 2


async def test_native_text_with_an_invalid_call_streams_as_written() -> None:
    text = 'Use this: {"name": "get_weather", "arguments": {"town": "Paris"}} and enjoy.'
    upstream = FakeUpstream([Reply(text)], tools="ignore", piece=5)
    engine = Engine(upstream, mode="auto", registry=":memory:")
    result = await collect(engine, request(stream=True))
    assert result.content == text
    assert not result.calls
    non_stream = await Engine(
        FakeUpstream([Reply(text)], tools="ignore"), mode="auto", registry=":memory:"
    ).acomplete(request())
    assert non_stream.message.content == text


UNUSABLE_FENCED = '```json\n{"name": "get_weather", "arguments": {"town": "Paris"}}\n```'
"""A call to an offered tool written as text, its arguments against the schema
(Qwen2.5-Coder-0.5B natively, BFCL live_simple_22-5-0: 'whopper' where the enum says
'WHOPPER')."""
MADE_UP_FENCED = '```json\n{"name": "get_forecast", "arguments": {"city": "Paris"}}\n```'
"""A call written as text to a tool that is not offered (BFCL irrelevance_53)."""


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("mode", ["auto", "fallback"])
async def test_a_native_reply_that_is_only_an_unusable_call_is_emulated(
    mode: str, stream: bool
) -> None:
    upstream = FakeUpstream(
        [Reply(UNUSABLE_FENCED), '{"name": "get_weather", "arguments": {"city": "Paris"}}'],
        tools="ignore",
    )
    engine = Engine(upstream, mode=mode, registry=":memory:")
    if stream:
        result = await collect(engine, request())
        names, content, meta = (
            [c["name"] for c in result.calls.values()],
            result.content,
            result.meta,
        )
    else:
        completion = await engine.acomplete(request())
        names = [c.name for c in completion.message.tool_calls]
        content, meta = completion.message.content or "", completion.meta
    assert names == ["get_weather"]
    assert "town" not in content
    assert meta is not None and meta.emulated and meta.llm_calls == 2
    assert any(
        w.startswith("native reply rejected: its text is a tool call that cannot be used")
        and "'city' is a required property" in w
        for w in meta.warnings
    )


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    ("mode", "text"),
    [
        ("off", UNUSABLE_FENCED),  # off never emulates
        ("auto", f"I would use this:\n{UNUSABLE_FENCED}"),  # prose around it: an answer
        ("auto", MADE_UP_FENCED),  # a made-up tool: emulating it called the wrong tool
    ],
)
async def test_an_unusable_call_in_text_is_left_alone_in_off_with_prose_or_a_made_up_tool(
    mode: str, text: str, stream: bool
) -> None:
    upstream = FakeUpstream([Reply(text)], tools="ignore")
    engine = Engine(upstream, mode=mode, registry=":memory:")
    if stream:
        result = await collect(engine, request())
        assert result.calls == {} and result.content == text
    else:
        completion = await engine.acomplete(request())
        assert completion.message.tool_calls == () and completion.message.content == text
    assert upstream.calls == 1
