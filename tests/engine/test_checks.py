"""The checks on a model's calls (:mod:`toolshim.engine.checks`): one list in one order, one
module per check, one re-ask ledger on the turn; a new check is one module and one line."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import pytest

import toolshim.engine.checks as checks
from toolshim.dialects.interpret import ParsedCall
from toolshim.engine import Engine
from toolshim.engine.checks import CHECKS, CONTINUED, run_checks
from toolshim.engine.checks.base import PASS, Check, CheckedReply, Outcome, Reask, Revise, revised
from toolshim.engine.turn import Turn, call_key
from toolshim.testing import FakeUpstream
from toolshim.testing.tools import WEATHER

ASK = {"model": "m", "messages": [{"role": "user", "content": "Weather in Paris, or else London?"}]}


def engine_for(upstream: FakeUpstream) -> Engine:
    return Engine(upstream, mode="force", dialect="pythonic", registry=":memory:")


def a_turn() -> Turn:
    return engine_for(FakeUpstream([])).turn({**ASK, "tools": [WEATHER]})


def test_the_checks_run_in_the_order_of_the_chain_they_replaced() -> None:
    assert [c.name for c in CHECKS] == [
        "repeats_in_reply",
        "waiting",
        "first_step",
        "ordered_steps",
        "paths",
        "undeclared_arguments",
        "schema",
        "quoted",
        "placeholders",
        "file_syntax",
        "number_content",
        "example_copies",
        "answered_repeats",
        "made_up",
        "unused_numbers",
        "local_names",
    ]
    assert [c.name for c in CHECKS if c.native] == ["repeats_in_reply", "schema"]
    assert [c.name for c in CONTINUED] == [
        "waiting",
        "undeclared_arguments",
        "schema",
        "placeholders",
        "number_content",
    ]


def test_each_check_is_its_own_module_of_the_package_and_one_entry_of_the_list() -> None:
    package = Path(checks.__file__).parent
    modules = {p.stem for p in package.glob("*.py")} - {"__init__", "base"}
    assert sorted(c.name for c in CHECKS) == sorted(modules)
    for check in CHECKS:
        assert importlib.import_module(f"{checks.__name__}.{check.name}").CHECK is check


NOT_PARIS = "Paris is not a city this test serves: call it for London"


def _no_paris(reply: CheckedReply) -> Outcome:
    """A new check, as its module would write it: re-asks a call for Paris, once."""
    if "no_paris" in reply.turn.reasked:
        return PASS
    if any(c.arguments.get("city") == "Paris" for c in reply.calls):
        return Reask((NOT_PARIS,))
    return PASS


NO_PARIS = Check("no_paris", _no_paris)  # the module's one line: its CHECK


def test_a_new_check_re_asks_once_through_the_turns_ledger() -> None:
    turn = a_turn()
    call = ParsedCall("get_weather", {"city": "Paris"}, "")
    verdict = run_checks(turn, [call], checks=(*CHECKS, NO_PARIS))
    assert verdict.problems == (NOT_PARIS,)
    assert turn.reasked == {"no_paris": frozenset({call_key("get_weather", '{"city":"Paris"}')})}
    again = run_checks(turn, [call], checks=(*CHECKS, NO_PARIS))
    assert again.ok
    assert [c.arguments for c in again.calls] == [{"city": "Paris"}]


async def test_a_new_check_is_one_line_of_the_list_away_from_the_engine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(checks, "CHECKS", (*CHECKS, NO_PARIS))  # the list's one new line
    upstream = FakeUpstream(['[get_weather(city="Paris")]', '[get_weather(city="London")]'])
    completion = await engine_for(upstream).acomplete({**ASK, "tools": [WEATHER]})
    assert NOT_PARIS in upstream.history[1]["messages"][-1]["content"]
    arguments: list[Any] = [json.loads(c.arguments) for c in completion.tool_calls]
    assert arguments == [{"city": "London"}]


def test_a_continued_call_is_dropped_quietly_and_not_written_in_the_ledger() -> None:
    turn = a_turn()
    verdict = run_checks(
        turn, [ParsedCall("get_weather", {"city": "..."}, "")], continued=True, checks=CONTINUED
    )
    assert verdict.problems
    assert turn.reasked == {}
    assert turn.warnings == []


def test_calls_equal_but_not_the_same_go_on_as_revised() -> None:
    turn = a_turn()
    said = ParsedCall("get_weather", {"city": "Paris", "days": 1}, "")
    reply = CheckedReply(turn, (said,))
    assert revised(reply, [said]) is PASS
    coerced = ParsedCall("get_weather", {"city": "Paris", "days": 1.0}, "")
    assert coerced == said  # 1 == 1.0: equality would lose the coercion
    assert revised(reply, [coerced]) == Revise((coerced,), None)
