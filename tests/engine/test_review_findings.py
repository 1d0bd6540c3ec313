"""Regressions for the engine defects a code review found (each test failed before its fix)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.engine.helpers import CALL_TEXT, request
from tests.engine.test_streaming import collect
from toolshim.engine import Engine
from toolshim.testing import FakeUpstream, FunctionUpstream, Reply, call
from toolshim.types import StreamChunk
from toolshim.wire.openai_chat import chunk_to_dict

SCHEMA = {
    "type": "json_schema",
    "json_schema": {
        "name": "answer",
        "schema": {
            "type": "object",
            "properties": {"summary": {"type": "string"}},
            "required": ["summary"],
        },
    },
}


def enforcing(body: dict[str, Any]) -> Any:
    """An upstream that holds replies to response_format as llama-server/vLLM/Ollama do."""
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema" and fmt["json_schema"]["name"] == "answer":
        return '{"summary": "Sunny in Paris."}'
    if "get_weather" in json.dumps(body["messages"]) and "Tool result" not in json.dumps(
        body["messages"]
    ):
        return CALL_TEXT
    return "It is sunny."


@pytest.mark.parametrize("stream", [False, True])
async def test_the_callers_response_format_applies_to_the_answer_not_the_tool_decision(
    stream: bool,
) -> None:
    upstream = FunctionUpstream(enforcing)
    engine = Engine(upstream, mode="force", registry=":memory:")
    body = request(response_format=SCHEMA, tool_choice="required", stream=stream)
    if stream:
        result = await collect(engine, body)
        assert result.calls[0]["name"] == "get_weather"
    else:
        completion = await engine.acomplete(body)
        assert completion.tool_calls[0].name == "get_weather"
    assert "response_format" not in upstream.history[0]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_text_answer_is_asked_again_in_the_callers_response_format(stream: bool) -> None:
    upstream = FakeUpstream(["Paris is sunny.", '{"summary": "Sunny."}'])
    engine = Engine(upstream, mode="force", registry=":memory:")
    body = request(response_format=SCHEMA, stream=stream)
    if stream:
        result = await collect(engine, body)
        text, meta = result.content, result.meta
    else:
        completion = await engine.acomplete(body)
        text, meta = completion.message.content, completion.meta
    assert text == '{"summary": "Sunny."}'
    first, second = upstream.history
    assert "response_format" not in first and second["response_format"] == SCHEMA
    assert "get_weather" not in json.dumps(second["messages"])
    assert meta is not None and meta.llm_calls == 2


async def test_streamed_reasks_do_not_repeat_prose() -> None:
    bad = (
        'The weather is sunny. {"tool_calls": [{"name": "get_weather", "arguments": {"town": 3}}]}'
    )
    upstream = FakeUpstream([bad, bad, bad])
    engine = Engine(upstream, mode="force", registry=":memory:")
    result = await collect(engine, request(stream=True))
    assert result.content == "The weather is sunny."
    good = 'Let me look.\n{"name": "get_weather", "arguments": {"city": "Paris"}}'
    upstream = FakeUpstream(['Let me look.\n{"name": "get_wether", "arguments": {}}', good])
    result = await collect(
        Engine(upstream, mode="force", registry=":memory:"), request(stream=True)
    )
    assert result.content == "Let me look.\n"
    assert result.calls[0]["name"] == "get_weather"


def _chunks_with_reasoning(body: dict[str, Any]) -> dict[str, Any]:
    return Reply("It is sunny.").completion("m")


async def test_a_relayed_native_stream_keeps_fields_and_other_choices() -> None:
    """reasoning_content, logprobs and a second choice survive the rescue relay."""

    class Upstream(FakeUpstream):
        async def stream_body(self, body: Any, *, headers: Any = None):  # type: ignore[no-untyped-def,override]
            self.history.append(body)
            base = {"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m"}
            yield {
                **base,
                "choices": [
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "reasoning_content": "thinking"},
                        "logprobs": None,
                        "finish_reason": None,
                    }
                ],
            }
            yield {
                **base,
                "choices": [
                    {
                        "index": 0,
                        "delta": {"content": "It is sunny."},
                        "logprobs": {"content": [{"token": "It"}]},
                        "finish_reason": None,
                    },
                    {"index": 1, "delta": {"content": "It is rainy."}, "finish_reason": "stop"},
                ],
            }
            yield {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}

    engine = Engine(Upstream(), mode="auto", registry=":memory:")
    chunks: list[StreamChunk] = [c async for c in engine.astream(request(stream=True))]
    written = [chunk_to_dict(c, id="x", model="m", created=0) for c in chunks]
    flat = json.dumps(written)
    assert '"reasoning_content": "thinking"' in flat
    assert '"token": "It"' in flat
    assert "It is rainy." in flat
    first = [c for w in written for c in w["choices"] if c["index"] == 0]
    assert "".join(c["delta"].get("content") or "" for c in first) == "It is sunny."
    assert [c.finish_reason for c in chunks if c.finish_reason] == ["stop"]


async def test_the_rescue_keeps_the_messages_other_fields() -> None:
    fenced = '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```'
    completion_dict = Reply(fenced).completion("m")
    completion_dict["choices"][0]["message"]["reasoning_content"] = "I should call it."
    engine = Engine(
        FakeUpstream([completion_dict], tools="ignore"), mode="auto", registry=":memory:"
    )
    completion = await engine.acomplete(request())
    assert completion.tool_calls[0].name == "get_weather"
    assert completion.message.extra["reasoning_content"] == "I should call it."


@pytest.mark.parametrize("stream", [False, True])
async def test_native_calls_are_judged_the_same_streamed_or_not(stream: bool) -> None:
    upstream = FakeUpstream([Reply(None, [call("get_wether", {"city": "Paris"})]), CALL_TEXT])
    engine = Engine(upstream, mode="auto", registry=":memory:")
    if stream:
        result = await collect(engine, request(stream=True))
        names, meta = [c["name"] for c in result.calls.values()], result.meta
    else:
        completion = await engine.acomplete(request())
        names, meta = [c.name for c in completion.tool_calls], completion.meta
    assert names == ["get_weather"]
    assert upstream.calls == 2
    assert meta is not None and any("no tool named 'get_wether'" in w for w in meta.warnings)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("mode", ["auto", "fallback"])
async def test_parallel_false_trims_native_calls(mode: str, stream: bool) -> None:
    two = Reply(
        None, [call("get_weather", {"city": "Paris"}), call("get_weather", {"city": "Rome"})]
    )
    engine = Engine(FakeUpstream([two]), mode=mode, registry=":memory:")
    body = request(parallel_tool_calls=False, stream=stream)
    if stream:
        result = await collect(engine, body)
        count, meta = len(result.calls), result.meta
    else:
        completion = await engine.acomplete(body)
        count, meta = len(completion.tool_calls), completion.meta
    assert count == 1
    assert meta is not None
    assert "kept the first 1 of 2 calls (parallel_tool_calls is false)" in meta.warnings


async def test_fallback_keeps_a_native_answer_when_tool_choice_is_none() -> None:
    upstream = FakeUpstream(["Native answer.", "Second answer."])
    engine = Engine(upstream, mode="fallback", registry=":memory:")
    result = await collect(engine, request(tool_choice="none", stream=True))
    assert result.content == "Native answer."
    assert upstream.calls == 1
    assert result.meta is not None and not result.meta.emulated


@pytest.mark.parametrize("mode", ["auto", "off", "force", "fallback"])
async def test_an_answer_without_choices_is_passed_on(mode: str) -> None:
    empty = {"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": []}
    engine = Engine(FakeUpstream([empty, empty]), mode=mode, registry=":memory:")
    completion = await engine.acomplete(
        {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    )
    assert completion.choices == ()


async def test_a_stream_opens_with_a_role_and_no_empty_content() -> None:
    engine = Engine(FakeUpstream([CALL_TEXT]), mode="force", registry=":memory:")
    chunks = [c async for c in engine.astream(request(stream=True))]
    assert chunks[0].role == "assistant" and chunks[0].content is None
    assert sum(1 for c in chunks if c.role) == 1
