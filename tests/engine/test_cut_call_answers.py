"""An answer asked for without tools keeps no call markup that names no tool: a call opening
the reply's end cut off (``{"name": "``: the 0.5B's whole answer in BFCL's
``multi_turn_base_12``), a ``<tool_call>`` cut before its name, a marker token. Whole and
streamed replies give the same answer; an object that is data stays in it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.engine.helpers import WEATHER
from tests.engine.test_audit_gaps import serve
from toolshim.engine import Engine
from toolshim.testing import FakeUpstream

TOOLS = [WEATHER]


def request(**extra: Any) -> dict[str, Any]:
    return {
        "model": "m",
        "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
        "tools": TOOLS,
        "tool_choice": "none",
        **extra,
    }


async def answer(replies: list[str], stream: bool) -> tuple[str, list[str], int]:
    """The text answer, its warnings and the LLM calls it took."""
    upstream = FakeUpstream(replies)
    engine = Engine(upstream, mode="force", dialect="hermes", registry=":memory:")
    out = await serve(engine, request(), stream)
    assert out.calls == {} and out.meta is not None
    return out.content.strip(), list(out.meta.warnings), upstream.calls


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    "reply",
    [
        'It is sunny.\n{"name": "',
        'It is sunny.\n{"name": "get_wea',
        'It is sunny. <tool_call>\n{"name": "get_w',
        'It is sunny.\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n{"name": "',
    ],
)
async def test_a_cut_off_call_opening_is_left_out_of_the_answer(reply: str, stream: bool) -> None:
    text, warnings, calls = await answer([reply], stream)
    assert text == "It is sunny."
    assert calls == 1
    assert any("removed a tool call" in w for w in warnings)


@pytest.mark.parametrize("stream", [False, True])
async def test_a_reply_that_is_only_a_cut_opening_is_asked_again(stream: bool) -> None:
    text, _, calls = await answer(['{"name": "', "It is sunny in Paris."], stream)
    assert text == "It is sunny in Paris."
    assert calls == 2


@pytest.mark.parametrize("stream", [False, True])
async def test_a_marker_token_is_left_out_of_a_whole_answer_as_of_a_streamed_one(
    stream: bool,
) -> None:
    text, warnings, _ = await answer(["It is sunny.<|python_tag|>"], stream)
    assert text == "It is sunny."
    assert not any("removed a tool call" in w for w in warnings)  # no call was removed


@pytest.mark.parametrize("stream", [False, True])
async def test_a_cut_off_object_that_is_data_stays_in_the_answer(stream: bool) -> None:
    reply = 'The record reads {"name": "Ada", "age'
    text, warnings, _ = await answer([reply], stream)
    assert text == reply
    assert not warnings


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    ("reply", "removed"),
    [('It is sunny.\n{"name": "', True), ("It is sunny.<|python_tag|>", False)],
)
async def test_a_native_reply_under_none_drops_them_too(
    reply: str, removed: bool, stream: bool
) -> None:
    """The tools sent natively, ``tool_choice: "none"``: the same answer whole and streamed
    (a whole reply kept the marker token that the streamed one dropped)."""
    upstream = FakeUpstream([reply])
    engine = Engine(upstream, mode="auto", registry=":memory:")
    out = await serve(engine, request(), stream)
    assert out.calls == {} and out.content.strip() == "It is sunny."
    assert upstream.calls == 1
    assert out.meta is not None
    assert any("removed a tool call" in w for w in out.meta.warnings) is removed


@pytest.mark.parametrize("stream", [False, True])
async def test_a_reply_that_is_only_a_marker_token_is_asked_again(stream: bool) -> None:
    """Whole and streamed alike (the streamed reply ended with an empty answer)."""
    text, _, calls = await answer(["<|python_tag|>", "It is sunny in Paris."], stream)
    assert text == "It is sunny in Paris."
    assert calls == 2
