"""Seed 003's multi-tool syntax (its "Future Improvements" #1): ``{"tools": ["a", "b"]}``.

A list of bare tool names is one call per name, without arguments, in order, in every dialect,
whole or streamed. Names are folded as usual (case, ``functions.`` prefixes). Data that merely
has a ``tools`` list stays an answer; a list that is mostly offered tools with one made-up
name comes back with that unknown name, so that the engine re-asks.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.dialects.conftest import streamed, whole
from toolshim.dialects import ReplyParser, available_dialects, get_dialect
from toolshim.dialects.calls import ToolIndex
from toolshim.dialects.interpret import interpret_value
from toolshim.engine import Engine
from toolshim.testing import FakeUpstream
from toolshim.types import ToolSpec

NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}}
WEATHER = ToolSpec("getWeather", "Weather where the user is.", NO_ARGS)
LOCATION = ToolSpec("getLocation", "Where the user is.", NO_ARGS)
TIME = ToolSpec("getTime", "The time where the user is.", NO_ARGS)
TOOLS = [WEATHER, LOCATION]
BOTH: list[Any] = [("getWeather", {}, None), ("getLocation", {}, None)]


def calls_of(text: str, dialect: str, tools: list[ToolSpec] = TOOLS) -> list[Any]:
    _, calls, _ = whole(get_dialect(dialect), text, tools)
    return calls


@pytest.mark.parametrize("dialect", available_dialects())
@pytest.mark.parametrize(
    "text",
    [
        '{"tools":["getWeather","getLocation"]}',  # the seed's own example
        '{"tool":["getWeather","getLocation"]}',
        '{"functions": ["getWeather", "getLocation"]}',
        '{"tool_calls": ["getWeather", "getLocation"]}',
        '{"calls": ["getWeather", "getLocation"]}',
        '{"tool_names": ["getWeather", "getLocation"]}',
        '{"Tools" : ["getWeather", "getLocation"]}',  # key case and spacing drift
        '{"type": "tools", "tools": ["getWeather", "getLocation"]}',  # bookkeeping key
        "{'tools': ['getWeather', 'getLocation'],}",  # single quotes, trailing comma
        '{"tools":["getWeather","getLocation"]',  # unclosed brace (seed 003's failure list)
    ],
)
def test_a_list_of_tool_names_is_one_call_per_name(dialect: str, text: str) -> None:
    assert calls_of(text, dialect) == BOTH


@pytest.mark.parametrize("dialect", available_dialects())
def test_whole_and_streamed_agree(dialect: str) -> None:
    text = 'Let me check both.\n{"tools": ["getWeather", "getLocation"]}'
    expected = whole(get_dialect(dialect), text, TOOLS)
    assert expected[1] == BOTH
    assert expected[0].strip() == "Let me check both."
    for size in (1, 2, 5, 11):
        pieces = [text[i : i + size] for i in range(0, len(text), size)]
        assert streamed(ReplyParser(TOOLS), pieces) == expected, size


def test_names_are_folded_and_kept_in_order() -> None:
    index = ToolIndex(TOOLS)
    value = {"tools": ["functions.getlocation", "GetWeather", "getLocation"]}
    meaning = interpret_value(value, index, "raw")
    assert [(c.name, c.arguments, c.problem) for c in meaning.calls] == [
        ("getLocation", {}, None),
        ("getWeather", {}, None),
        ("getLocation", {}, None),
    ]
    assert all(c.raw == "raw" for c in meaning.calls)


@pytest.mark.parametrize(
    "value",
    [
        {"tools": ["hammer", "saw"]},  # ordinary data: no offered tool among them
        {"tools": ["getWeather", "hammer", "saw"]},  # fewer than half are offered tools
        {"tools": ["getWeather", "getLocation"], "count": 2},  # other members: data
        {"tools": ["getWeather", "check the weather"]},  # not a name
        {"tools": []},
        {"tools": ["getWeather", 3]},
        {"names": ["Ada", "Grace"]},
        {"tools": ["none"]},
    ],
)
def test_data_stays_data(value: dict[str, Any]) -> None:
    assert not interpret_value(value, ToolIndex(TOOLS)).is_call


def test_the_list_shape_needs_the_list_alone() -> None:
    # With a second member the object is some other shape: here compact's flat call, whose
    # "tools" member is read as an argument (as before).
    meaning = interpret_value({"tool": "getWeather", "tools": ["getLocation"]}, ToolIndex(TOOLS))
    assert [(c.name, c.arguments) for c in meaning.calls] == [
        ("getWeather", {"tools": ["getLocation"]})
    ]


@pytest.mark.parametrize("dialect", available_dialects())
def test_a_tools_list_in_an_answer_is_an_answer(dialect: str) -> None:
    text = 'You will need {"tools": ["hammer", "saw"]} for this shelf.'
    prose, calls, declined = whole(get_dialect(dialect), text, TOOLS)
    assert calls == [] and not declined and prose == text


@pytest.mark.parametrize(
    ("names", "unknown"),
    [
        (["getWeather", "getLocation", "getTime"], "getTime"),
        (["getWeather", "getTime"], "getTime"),  # half offered: the made-up one is re-asked
    ],
)
def test_one_made_up_name_comes_back_as_an_unknown_call(names: list[str], unknown: str) -> None:
    meaning = interpret_value({"tools": names}, ToolIndex(TOOLS))
    assert [c.name for c in meaning.calls] == names
    assert all(c.problem is None for c in meaning.calls)
    assert ToolIndex(TOOLS).resolve(unknown) is None


async def test_the_engine_returns_both_calls_in_the_openai_shape() -> None:
    upstream = FakeUpstream(['{"tools":["getWeather","getLocation"]}'])
    engine = Engine(upstream, mode="force", dialect="json", registry=":memory:")
    completion = await engine.acomplete(request())
    assert [(c.name, json.loads(c.arguments)) for c in completion.tool_calls] == [
        ("getWeather", {}),
        ("getLocation", {}),
    ]
    assert completion.message.text in (None, "")


async def test_the_engine_re_asks_about_a_made_up_name() -> None:
    upstream = FakeUpstream(
        ['{"tools":["getWeather","getTime"]}', '{"tools":["getWeather","getLocation"]}']
    )
    engine = Engine(upstream, mode="force", dialect="json", registry=":memory:")
    completion = await engine.acomplete(request())
    assert [c.name for c in completion.tool_calls] == ["getWeather", "getLocation"]
    correction = upstream.history[1]["messages"][-1]["content"]
    assert "there is no tool named 'getTime'" in correction
    assert completion.meta is not None and completion.meta.reasks == 1


async def test_a_listed_tool_that_needs_arguments_is_re_asked_for_them() -> None:
    city = ToolSpec(
        "getWeather",
        "Weather in a city.",
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    )
    oslo = '{"tool": "getWeather", "city": "Oslo"}'
    # Oslo is nobody's city: re-asked once for that too, and written again
    upstream = FakeUpstream(['{"tools":["getWeather","getLocation"]}', oslo, oslo])
    engine = Engine(upstream, mode="force", dialect="compact", registry=":memory:")
    completion = await engine.acomplete(request([city, LOCATION]))
    assert [(c.name, json.loads(c.arguments)) for c in completion.tool_calls] == [
        ("getWeather", {"city": "Oslo"})
    ]
    assert "city" in upstream.history[1]["messages"][-1]["content"]


def request(tools: list[ToolSpec] = TOOLS) -> dict[str, Any]:
    return {
        "model": "gemma-3n",
        "messages": [{"role": "user", "content": "What's the weather and my location?"}],
        "tools": [t.to_openai() for t in tools],
    }


@pytest.mark.parametrize("dialect", ["pythonic", "json", "hermes"])
def test_a_dotted_name_is_the_offered_tool_with_underscores(dialect: str) -> None:
    """BFCL's tools are named ``us_economy.gdp_by_state_year`` and offered as
    ``us_economy_gdp_by_state_year``; the 1.5B writes the dotted name back (parallel_multiple_110)."""
    gdp = ToolSpec(
        "us_economy_gdp_by_state_year",
        parameters={"type": "object", "properties": {"state": {"type": "string"}}},
    )
    texts = {
        "pythonic": '[us_economy.gdp_by_state_year(state="California")]',
        "json": '{"name": "us_economy.gdp_by_state_year", "arguments": {"state": "California"}}',
        "hermes": '<tool_call>\n{"name": "us_economy.gdp_by_state_year", "arguments": '
        '{"state": "California"}}\n</tool_call>',
    }
    assert calls_of(texts[dialect], dialect, [gdp]) == [
        ("us_economy_gdp_by_state_year", {"state": "California"}, None)
    ]
