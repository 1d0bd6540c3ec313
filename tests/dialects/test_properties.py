"""Hypothesis properties of every dialect: round trips, streamed = whole, prose stays prose."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolshim.dialects import available_dialects, get_dialect
from toolshim.dialects.calls import fold_name
from toolshim.types import ToolCall, ToolSpec

from .conftest import streamed, whole

DIALECTS = available_dialects()
SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# OpenAI tool names: ^[a-zA-Z0-9_-]{1,64}$
names = st.from_regex(r"[a-zA-Z0-9_][a-zA-Z0-9_\-]{0,20}", fullmatch=True)
text = st.text(st.characters(exclude_categories=["Cs"]), max_size=30)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | text
)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(text, children, max_size=4),
    max_leaves=12,
)
arguments = st.dictionaries(text, json_values, max_size=5)


@st.composite
def call_lists(draw: st.DrawFn) -> list[tuple[str, dict[str, Any]]]:
    chosen = draw(st.lists(names, min_size=1, max_size=4, unique_by=fold_name))
    return [
        (draw(st.sampled_from(chosen)), draw(arguments)) for _ in range(draw(st.integers(1, 4)))
    ]


def _tools(calls: list[tuple[str, dict[str, Any]]]) -> list[ToolSpec]:
    return [ToolSpec(name) for name in dict.fromkeys(n for n, _ in calls)]


def _same(a: Any, b: Any) -> bool:
    """JSON equality that also tells 1 from 1.0 and True from 1, and -0.0 from nothing."""
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, float) and isinstance(b, float) and (a == b or math.isclose(a, b))
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


@SETTINGS
@given(calls=call_lists(), dialect=st.sampled_from(DIALECTS))
def test_parse_of_render_gives_the_calls_back(
    calls: list[tuple[str, dict[str, Any]]], dialect: str
) -> None:
    d = get_dialect(dialect)
    tool_calls = [ToolCall.from_arguments(f"c{i}", n, a) for i, (n, a) in enumerate(calls)]
    rendered = d.render_calls(tool_calls)
    parsed = d.parse(rendered, _tools(calls))
    assert [c.name for c in parsed.calls] == [n for n, _ in calls], rendered
    for got, (_, expected) in zip(parsed.calls, calls, strict=True):
        assert got.problem is None, (rendered, got.problem)
        assert _same(got.arguments, expected), rendered
    assert parsed.text.strip() == ""


@SETTINGS
@given(calls=call_lists(), dialect=st.sampled_from(DIALECTS), data=st.data())
def test_rendered_calls_stream_like_whole_at_random_splits(
    calls: list[tuple[str, dict[str, Any]]], dialect: str, data: st.DataObject
) -> None:
    d = get_dialect(dialect)
    tools = _tools(calls)
    tool_calls = [ToolCall.from_arguments(f"c{i}", n, a) for i, (n, a) in enumerate(calls)]
    reply = "Let me check that.\n" + d.render_calls(tool_calls) + "\nDone."
    expected = whole(d, reply, tools)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(reply)), max_size=8)))
    pieces = [reply[a:b] for a, b in zip([0, *cuts], [*cuts, len(reply)], strict=True)]
    assert streamed(d.parser(tools), pieces) == expected


TOOLS = [
    ToolSpec("get_weather", "", {"type": "object", "properties": {"city": {"type": "string"}}}),
    ToolSpec("get_time"),
]
FRAGMENTS = [
    "<tool_call>",
    "</tool_call>",
    "```json\n",
    "```python\n",
    "```bash\n",
    "```",
    "{",
    "}",
    "[",
    "]",
    "(",
    ")",
    '"',
    "'",
    ",",
    ":",
    "<think>",
    "</think>",
    "<function=get_weather>",
    "</function>",
    "<function>",
    "<parameter=city>",
    "</parameter>",
    "get_weather(",
    "get_time()",
    "functions.",
    "[TOOL_CALLS]",
    "[ARGS]",
    "to=functions.",
    "functools",
    "<|python_tag|>",
    "<",
    "`",
    "\n",
    " ",
    "Paris",
    "name",
    "tool",
    "none",
    '"name": "get_weather"',
    '"arguments": {"city": "Oslo"}',
    '{"tool":"none"}',
    '{"tool":"get_time"}',
    '{"name": "get_weather", "arguments": {"city": "x"}}',
    '[get_weather(city="y"), get_time()]',
    "<｜tool▁call▁begin｜>",
    "<｜tool▁sep｜>",
    "<｜tool▁call▁end｜>",
]
mixed_text = st.lists(st.sampled_from(FRAGMENTS) | text, max_size=14).map("".join)


@settings(max_examples=200, deadline=None)
@given(reply=mixed_text, dialect=st.sampled_from(DIALECTS), data=st.data())
def test_any_text_streams_like_whole(reply: str, dialect: str, data: st.DataObject) -> None:
    d = get_dialect(dialect)
    expected = whole(d, reply, TOOLS)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(reply)), max_size=6)))
    pieces = [reply[a:b] for a, b in zip([0, *cuts], [*cuts, len(reply)], strict=True)]
    assert streamed(d.parser(TOOLS), pieces) == expected


@settings(max_examples=40, deadline=None)
@given(reply=mixed_text)
def test_any_text_streams_like_whole_at_every_split(reply: str) -> None:
    d = get_dialect("json")
    expected = whole(d, reply, TOOLS)
    assert streamed(d.parser(TOOLS), list(reply)) == expected
    for cut in range(len(reply) + 1):
        assert streamed(d.parser(TOOLS), [reply[:cut], reply[cut:]]) == expected, cut


prose_chars = st.characters(exclude_categories=["Cs"], exclude_characters="{}[]<>`")
prose = st.lists(
    st.text(prose_chars, max_size=40)
    | st.sampled_from(["get_weather", "get_time", "tool", "the get_weather tool", "(see below)"]),
    max_size=8,
).map(" ".join)
data_values = st.dictionaries(
    st.sampled_from(["city", "age", "title", "count", "items"]), json_values, max_size=4
)


@SETTINGS
@given(before=prose, value=data_values, after=prose, dialect=st.sampled_from(DIALECTS))
def test_prose_and_quoted_data_stay_prose(
    before: str, value: dict[str, Any], after: str, dialect: str
) -> None:
    reply = f"{before}\n```json\n{json.dumps(value)}\n```\n{after} {json.dumps(value)}"
    parsed = get_dialect(dialect).parse(reply, TOOLS)
    assert parsed.calls == ()
    assert parsed.text == reply
