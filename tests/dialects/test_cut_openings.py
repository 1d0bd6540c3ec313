"""A reply that ends inside the opening of a JSON call (``{"name": "``, cut by ``max_tokens`` or
a stop sequence) holds call text, not prose; a cut-off object that is data stays prose. The
0.5B's answer in BFCL's ``multi_turn_base_12`` was ``{"name": "``."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolshim.dialects import available_dialects, get_dialect
from toolshim.types import ToolSpec

from .conftest import streamed, whole

TOOLS = (
    ToolSpec(
        "get_weather",
        "Current weather",
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    ),
)

OPENINGS = [
    '{"name": "',
    '{"name": ',
    '{"name": "get_w',
    '{ "function": {"name": "get',
    '{"tool_calls": [{"name": "',
    '{"tool_calls": [',
    '{"tool_name":"',
]


@pytest.mark.parametrize("dialect", available_dialects())
@pytest.mark.parametrize("opening", OPENINGS)
def test_a_reply_cut_inside_a_calls_opening_is_no_prose(dialect: str, opening: str) -> None:
    text, calls, _ = whole(get_dialect(dialect), f"It is sunny.\n{opening}", TOOLS)
    assert text == "It is sunny.\n"
    assert [(name, arguments) for name, arguments, _ in calls] == [("", None)]
    assert "ended inside the opening of a tool call" in (calls[0][2] or "")


@pytest.mark.parametrize(
    ("output", "name"),
    [
        ('{"tool":"get_weather"', "get_weather"),  # the name whole: that call, repaired
        ('{"name": "get_weather", "argu', "get_weather"),
    ],
)
def test_a_cut_call_whose_name_arrived_is_that_call(output: str, name: str) -> None:
    _, calls, _ = whole(get_dialect("json"), output, TOOLS)
    assert [c[0] for c in calls] == [name]


@pytest.mark.parametrize(
    "output",
    [
        'Here is the record: {"name": "Ada", "age',  # a name no tool's begins with: data
        'Here is the record: {"name": "Ada"',
        'The file says {"title": "',
    ],
)
def test_a_cut_object_that_is_data_stays_prose(output: str) -> None:
    assert whole(get_dialect("json"), output, TOOLS) == (output, [], False)


@given(st.sampled_from(OPENINGS), st.data())
def test_streamed_and_whole_agree_at_every_split(opening: str, data: st.DataObject) -> None:
    reply = f"It is sunny.\n{opening}"
    cuts = sorted(data.draw(st.sets(st.integers(1, len(reply) - 1), max_size=4)))
    pieces = [reply[a:b] for a, b in zip([0, *cuts], [*cuts, len(reply)], strict=True)]
    dialect = get_dialect("hermes")
    assert streamed(dialect.parser(TOOLS), pieces) == whole(dialect, reply, TOOLS)
