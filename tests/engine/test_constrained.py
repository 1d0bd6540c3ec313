"""Constrained emulation: a JSON Schema response_format that admits exactly the valid replies."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from tests.engine.helpers import request
from toolshim.capabilities import Source
from toolshim.dialects import PromptOptions, get_dialect, parse_reply
from toolshim.engine import Engine
from toolshim.testing import FakeUpstream, Reply
from toolshim.types import ToolChoice
from toolshim.wire.openai_chat import parse_request

SPECS = parse_request(request()).tools


def schema(**options: Any) -> dict[str, Any]:
    fmt = get_dialect("json").response_format(SPECS, PromptOptions(constrained=True, **options))
    assert fmt is not None
    assert fmt["type"] == "json_schema"
    return dict(fmt["json_schema"]["schema"])


def valid(schema: dict[str, Any], reply: Any) -> bool:
    return jsonschema.Draft202012Validator(schema).is_valid(reply)


def test_schema_admits_exactly_calls_of_offered_tools_or_an_answer() -> None:
    s = schema()
    assert valid(s, {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]})
    assert valid(
        s,
        {
            "tool_calls": [
                {"name": "get_weather", "arguments": {"city": "P"}},
                {"name": "get_time", "arguments": {}},
            ]
        },
    )
    assert valid(s, {"answer": "It is Paris."})
    assert not valid(s, {"tool_calls": [{"name": "get_location", "arguments": {}}]})
    assert not valid(s, {"tool_calls": [{"name": "get_weather", "arguments": {"unit": "c"}}]})
    assert not valid(
        s, {"tool_calls": [{"name": "get_weather", "arguments": {"city": "P", "unit": "k"}}]}
    )
    assert not valid(s, {"answer": "x", "tool_calls": []})
    assert not valid(s, {"answer": "x" * 9000})


def test_strings_are_bounded() -> None:
    s = schema()
    weather = s["anyOf"][0]["properties"]["tool_calls"]["items"]["anyOf"][0]
    assert weather["properties"]["arguments"]["properties"]["city"]["maxLength"] == 2000
    assert "maxLength" not in weather["properties"]["arguments"]["properties"]["unit"]  # an enum


def test_no_parallel_calls_means_at_most_one_item() -> None:
    s = schema(parallel=False)
    two = {
        "tool_calls": [{"name": "get_time", "arguments": {}}, {"name": "get_time", "arguments": {}}]
    }
    assert not valid(s, two)
    assert valid(s, {"tool_calls": [{"name": "get_time", "arguments": {}}]})


@pytest.mark.parametrize("choice", [ToolChoice.REQUIRED, ToolChoice.function("get_time")])
def test_a_forced_choice_has_no_text_branch(choice: ToolChoice) -> None:
    s = schema(choice=choice)
    assert not valid(s, {"answer": "no"})
    assert not valid(s, {"tool_calls": []})
    if choice.kind == "function":
        assert not valid(s, {"tool_calls": [{"name": "get_weather", "arguments": {"city": "P"}}]})
    assert valid(s, {"tool_calls": [{"name": "get_time", "arguments": {}}]})


def test_the_answer_branch_parses_as_text() -> None:
    parsed = parse_reply('{"answer": "Paris is lovely."}', SPECS)
    assert parsed.calls == ()
    assert parsed.text == "Paris is lovely."
    quoted = parse_reply('Here: {"answer": "x"}', SPECS)
    assert quoted.text == 'Here: {"answer": "x"}'


async def test_engine_sends_the_schema_when_the_upstream_honours_it() -> None:
    upstream = FakeUpstream(['{"answer": "Paris is the capital."}'], tools="reject")
    engine = Engine(upstream, mode="force", registry=":memory:")
    engine.registry.learn(upstream.key, "m", "structured_output", "yes", Source.UPSTREAM)
    completion = await engine.acomplete(request())
    assert completion.message.content == "Paris is the capital."
    body = upstream.history[0]
    assert body["response_format"]["type"] == "json_schema"
    assert '{"answer": "<your answer>"}' in body["messages"][0]["content"]


async def test_constrained_call_and_streamed_answer() -> None:
    call = '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}'
    upstream = FakeUpstream([call, '{"answer": "Sunny."}'])
    engine = Engine(upstream, mode="force", constrain=True, registry=":memory:")
    completion = await engine.acomplete(request())
    assert json.loads(completion.tool_calls[0].arguments) == {"city": "Paris"}
    chunks = [c async for c in engine.astream(request(stream=True))]
    assert "".join(c.content or "" for c in chunks) == "Sunny."
    assert all("response_format" in body for body in upstream.history)


async def test_constraint_can_be_turned_off_and_is_skipped_for_other_dialects() -> None:
    upstream = FakeUpstream(["Paris.", "Paris."])
    engine = Engine(upstream, mode="force", constrain=False, registry=":memory:")
    engine.registry.learn(upstream.key, "m", "structured_output", "yes", Source.UPSTREAM)
    await engine.acomplete(request())
    await engine.acomplete({**request(), "toolshim": {"dialect": "hermes", "constrain": True}})
    assert all("response_format" not in body for body in upstream.history)


async def test_a_constrained_reply_cut_off_by_max_tokens() -> None:
    cut = Reply(
        '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Par', finish_reason="length"
    )
    upstream = FakeUpstream([cut])
    engine = Engine(upstream, mode="force", constrain=True, registry=":memory:")
    completion = await engine.acomplete(request(max_tokens=16))
    assert upstream.calls == 1
    assert completion.tool_calls == ()
    assert completion.finish_reason == "length"
    assert completion.meta is not None
    assert any("cut off by max_tokens" in w for w in completion.meta.warnings)
