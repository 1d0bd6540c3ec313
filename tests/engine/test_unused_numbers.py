"""Numbers the user gave that no call uses, while a call leaves out a parameter for them: re-asked
once. Ids made up as the parameter's name numbered, beside real calls: held back."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.engine.helpers import called
from toolshim.engine import Engine
from toolshim.engine.checks.unused_numbers import SAID_NUMBER
from toolshim.testing import FakeUpstream, Reply


def tool(name: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    schema = {"type": "object", "properties": properties, "required": required}
    return {"type": "function", "function": {"name": name, "parameters": schema}}


BINOMIAL = tool(
    "binomial",
    {"trials": {"type": "integer"}, "successes": {"type": "integer"}, "p": {"type": "number"}},
    ["trials", "successes"],
)
ASK = (
    "You win any round with a 0.3 probability. What is the probability of winning exactly 5 "
    "of 20 rounds?"
)
WITHOUT_P = "[binomial(trials=20, successes=5)]"
WITH_P = "[binomial(trials=20, successes=5, p=0.3)]"


def request(content: str, *tools: dict[str, Any], **extra: Any) -> dict[str, Any]:
    messages = [{"role": "user", "content": content}]
    return {"model": "m", "messages": messages, "tools": list(tools or [BINOMIAL]), **extra}


async def calls_of(engine: Engine, body: dict[str, Any], stream: bool) -> list[tuple[str, Any]]:
    if not stream:
        completion = await engine.acomplete(body)
        return [(c.name, json.loads(c.arguments)) for c in completion.tool_calls]
    found: dict[int, list[str]] = {}
    async for chunk in engine.astream({**body, "stream": True}):
        for delta in chunk.tool_calls:
            entry = found.setdefault(delta.index, ["", ""])
            entry[0] += delta.name or ""
            entry[1] += delta.arguments or ""
    return [(name, json.loads(arguments)) for name, arguments in found.values()]


def engine_for(upstream: FakeUpstream) -> Engine:
    return Engine(upstream, mode="force", dialect="pythonic", registry=":memory:")


@pytest.mark.parametrize("stream", [False, True])
async def test_a_number_no_call_uses_is_asked_for_when_a_parameter_is_left_out(
    stream: bool,
) -> None:
    upstream = FakeUpstream([WITHOUT_P, WITH_P])
    calls = await calls_of(engine_for(upstream), request(ASK), stream)
    assert calls == [("binomial", {"trials": 20, "successes": 5, "p": 0.3})]
    correction = upstream.history[1]["messages"][-1]["content"]
    assert "the user's message gives 0.3, which no call uses" in correction
    assert "'p' of 'binomial'" in correction


async def test_the_same_calls_written_again_are_returned() -> None:
    upstream = FakeUpstream([WITHOUT_P, WITHOUT_P])
    calls = await calls_of(engine_for(upstream), request(ASK), stream=False)
    assert calls == [("binomial", {"trials": 20, "successes": 5})]
    assert len(upstream.history) == 2


@pytest.mark.parametrize(
    ("content", "reply"),
    [
        # every number used (a percentage as a fraction, a number inside a string)
        ("Win 5 of 20 rounds at 30%?", "[binomial(trials=20, successes=5, p=0.3)]"),
        # no parameter left out that takes a number
        (ASK, "[binomial(trials=20, successes=5, p=0.5)]"),
        # digits of words and units are not numbers given
        ("Win 5 of 20 rounds of the 2nd game, in m/s^2, for COVID19", WITHOUT_P),
    ],
)
async def test_no_re_ask_when_nothing_is_left_out(content: str, reply: str) -> None:
    upstream = FakeUpstream([reply])
    await calls_of(engine_for(upstream), request(content), stream=False)
    assert len(upstream.history) == 1


async def test_calls_cut_by_max_tokens_are_returned_without_that_re_ask() -> None:
    upstream = FakeUpstream([Reply(WITHOUT_P, finish_reason="length")])
    calls = await calls_of(engine_for(upstream), request(ASK), stream=False)
    assert calls == [("binomial", {"trials": 20, "successes": 5})]
    assert len(upstream.history) == 1


async def test_after_tool_results_the_question_s_numbers_are_not_asked_for() -> None:
    upstream = FakeUpstream([WITHOUT_P])
    body = request(ASK)
    body["messages"] += called("binomial", '{"trials": 2, "successes": 1}', "0.42")
    await calls_of(engine_for(upstream), body, stream=False)
    assert len(upstream.history) == 1


def test_said_numbers() -> None:
    said = [m.group(0) for m in SAID_NUMBER.finditer("1e-9 at 7:30, $1,000, 5%, B12, 2nd, x^2")]
    assert said == ["1e-9", "7", "30", "1,000", "5%"]


SEARCH = tool(
    "search_cases",
    {"location": {"type": "string"}, "year": {"type": "integer"}},
    ["location", "year"],
)
BRIEFS = tool("display_briefs", {"case_id": {"type": "array"}}, ["case_id"])


@pytest.mark.parametrize("stream", [False, True])
async def test_ids_numbered_after_their_parameter_wait_for_the_results(stream: bool) -> None:
    """The 1.5B on BFCL: the briefs of cases it has yet to find, as case_id1 … case_id5."""
    reply = (
        '[search_cases(location="New York", year=2021), '
        'display_briefs(case_id=["case_id1", "case_id2"])]'
    )
    upstream = FakeUpstream([reply])
    body = request("Find 2021 cases in New York and show their briefs.", SEARCH, BRIEFS)
    calls = await calls_of(engine_for(upstream), body, stream)
    assert calls == [("search_cases", {"location": "New York", "year": 2021})]
    if not stream:
        completion = await engine_for(FakeUpstream([reply])).acomplete(body)
        assert completion.meta is not None
        assert any("held back display_briefs" in w for w in completion.meta.warnings)
