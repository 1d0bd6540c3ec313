"""The agent suite: tools, tasks, the loop runner and its report, against scripted models."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest

from toolshim.evaluation.agent_report import (
    agent_markdown,
    load_agent_report,
    summarize_agent,
    wilson,
    write_agent_report,
)
from toolshim.evaluation.agent_runner import AgentRunner
from toolshim.evaluation.agent_tasks import (
    HARD_KINDS,
    KINDS,
    ORIGINAL_KINDS,
    TASKS,
    load_agent_tasks,
)
from toolshim.evaluation.agent_tools import TOOLS, run_tool
from toolshim.evaluation.runner import EvalConfig
from toolshim.testing import FunctionUpstream, Reply, call


def task(task_id: str) -> Any:
    return next(t for t in TASKS if t.id == task_id)


def test_the_suite_has_sixty_tasks_of_every_kind_and_style() -> None:
    assert len(TASKS) >= 60
    assert len({t.id for t in TASKS}) == len(TASKS)
    for kind in KINDS:
        assert {t.style for t in TASKS if t.kind == kind} == {"text", "json"}
    for t in TASKS:
        assert set(t.tools) <= set(TOOLS) and set(t.needs) <= set(t.tools)
        assert bool(t.needs) == (t.kind not in ("no_tool", "lookalike"))


def test_the_original_seventy_tasks_come_first_unchanged_and_the_harder_ones_follow() -> None:
    original = [t for t in TASKS if t.kind in ORIGINAL_KINDS]
    assert len(original) == 70 and TASKS[:70] == tuple(original)
    assert not any(t.history or t.followups for t in original)
    hard = TASKS[70:]
    assert {t.kind for t in hard} == set(HARD_KINDS)
    assert all(len([t for t in hard if t.kind == k]) == 6 for k in HARD_KINDS)
    assert all(t.history for t in hard if t.kind == "earlier_turn")
    assert all(t.followups for t in hard if t.kind == "multi_turn")
    assert all(len(t.needs) == 3 for t in hard if t.kind == "three_dependent")


async def test_a_later_user_turn_is_asked_after_the_first_answer_and_judged() -> None:
    """A multi-turn task: Paris asked and answered, then "And in Oslo?"; the last answer counts."""
    asked: list[list[str]] = []

    def model(body: dict[str, Any]) -> Any:
        users = [m["content"] for m in body["messages"] if m["role"] == "user"]
        asked.append(users)
        results = _results(body)
        if len(users) == 1:
            if not results:
                return Reply(None, [call("get_weather", {"city": "Paris"})])
            return f"In Paris: {results[-1]}."
        if len(results) < 2:
            return Reply(None, [call("get_weather", {"city": "Oslo"})])
        return f"In Oslo: {results[-1]}."

    runner = AgentRunner(FunctionUpstream(model), "m", [EvalConfig.parse("native")])
    record = await runner.run_task(task("turns-paris-then-oslo-text"), runner.configs[0])
    assert record.correct, record
    assert asked[-1] == ["What's the weather in Paris?", "And in Oslo?"]
    assert record.answer == "In Oslo: -3°C and snowing in Oslo."
    assert record.turns == 4 and len(record.tool_calls) == 2


async def test_an_earlier_turn_is_sent_before_the_question() -> None:
    seen: list[dict[str, Any]] = []

    def model(body: dict[str, Any]) -> Any:
        seen.append(body)
        return "I cannot tell."

    runner = AgentRunner(FunctionUpstream(model), "m", [EvalConfig.parse("native")])
    record = await runner.run_task(task("earlier-username-text"), runner.configs[0])
    assert [m["content"] for m in seen[0]["messages"]] == [
        "Hi! My username is carol.",
        "Hello carol! How can I help you today?",
        "Which order ids do I have?",
    ]
    assert not record.correct and record.failure == "invented_result"


def test_a_lookalike_question_is_wrong_when_a_tool_was_called() -> None:
    km = task("lookalike-km-miles-text")
    assert km.correct("10 km is about 6.21 miles.", called=False)
    assert not km.correct("10 km is about 6.21 miles.", called=True)


def test_tools_answer_in_text_or_json_and_refuse_bad_arguments() -> None:
    assert run_tool("get_weather", '{"city": "Paris"}', "text") == (
        "18°C and sunny in Paris",
        False,
    )
    data, error = run_tool("get_weather", '{"city": "paris"}', "json")
    assert not error and json.loads(data) == {
        "city": "Paris",
        "temperature_c": 18,
        "conditions": "sunny",
    }
    assert run_tool("get_weather", '{"city": "Atlantis"}', "text")[1]
    assert "no tool named" in run_tool("fly", "{}", "text")[0]
    assert (
        "unknown arguments ['x']" in run_tool("get_weather", '{"city": "Rome", "x": 1}', "text")[0]
    )
    assert (
        run_tool("calculate", '{"expression": "1234 * 5678"}', "text")[0] == "1234 * 5678 = 7006652"
    )
    assert run_tool("calculate", '{"expression": "__import__(1)"}', "text")[1]


def test_each_answer_check_accepts_the_right_answer_and_rejects_a_wrong_one() -> None:
    paris = task("weather-paris-text")
    assert paris.correct("It is 18°C and sunny in Paris.", called=True)
    assert not paris.correct("It is 21°C and sunny in Paris.", called=True)
    hamlet = task("none-hamlet-text")
    assert hamlet.correct("William Shakespeare wrote it.", called=False)
    assert not hamlet.correct("William Shakespeare wrote it.", called=True)


def test_load_agent_tasks_filters_kinds_and_limits_each() -> None:
    picked = load_agent_tasks(["no_tool", "one_call"], limit=3)
    assert [t.kind for t in picked].count("no_tool") == 3
    assert {t.kind for t in picked} == {"no_tool", "one_call"}
    with pytest.raises(Exception, match="unknown agent task kinds"):
        load_agent_tasks(["nope"])


def _results(body: dict[str, Any]) -> list[str]:
    return [m.get("content") or "" for m in body["messages"] if m["role"] == "tool"]


def good_native_model(body: dict[str, Any]) -> Any:
    """Calls the weather tool once, then answers from its result."""
    results = _results(body)
    if not results:
        return Reply(None, [call("get_weather", {"city": "Paris"})])
    return f"Right now: {results[-1]}."


async def test_a_model_that_calls_then_answers_is_correct_natively() -> None:
    runner = AgentRunner(FunctionUpstream(good_native_model), "m", [EvalConfig.parse("native")])
    record = await runner.run_task(task("weather-paris-text"), runner.configs[0])
    assert record.correct and record.failure is None
    assert (record.turns, record.llm_calls) == (2, 2)
    assert record.tool_calls == ['get_weather({"city": "Paris"})']
    assert record.answer == "Right now: 18°C and sunny in Paris."


async def test_through_toolshim_an_emulated_loop_closes() -> None:
    def model(body: dict[str, Any]) -> str:
        last = body["messages"][-1]["content"]
        if "it returned" in last:
            result = re.search(r"it returned:\n(.*)", last)
            assert result is not None
            return f"The weather: {result.group(1)}"
        return '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]}'

    upstream = FunctionUpstream(model, tools="reject")
    runner = AgentRunner(upstream, "m", [EvalConfig.parse("force:json")])
    record = await runner.run_task(task("weather-oslo-json"), runner.configs[0])
    assert record.correct, record
    assert record.llm_calls == 2 and record.turns == 2
    assert "tool calls emulated" in record.warnings


@pytest.mark.parametrize(
    ("reply", "failure"),
    [
        ("It is 25 degrees and rainy.", "invented_result"),
        (Reply(None, [call("get_weather", {"city": "Paris"})]), "runaway"),
    ],
)
async def test_failures_are_named(reply: Any, failure: str) -> None:
    runner = AgentRunner(
        FunctionUpstream(lambda body: reply), "m", [EvalConfig.parse("native")], max_turns=3
    )
    record = await runner.run_task(task("weather-paris-text"), runner.configs[0])
    assert not record.correct and record.failure == failure


async def test_a_repeated_call_that_ends_in_a_wrong_answer_is_named_so() -> None:
    def model(body: dict[str, Any]) -> Any:
        if len(_results(body)) < 2:
            return Reply(None, [call("get_weather", {"city": "Paris"})])
        return "I do not know."

    runner = AgentRunner(FunctionUpstream(model), "m", [EvalConfig.parse("native")])
    record = await runner.run_task(task("weather-paris-text"), runner.configs[0])
    assert record.failure == "repeated_call"


async def test_a_task_past_its_budget_is_a_hang() -> None:
    async def slow(body: dict[str, Any]) -> str:
        await asyncio.sleep(5)
        return "late"

    runner = AgentRunner(FunctionUpstream(slow), "m", [EvalConfig.parse("native")], budget=0.2)
    record = await runner.run_task(task("none-gold-text"), runner.configs[0])
    assert record.failure == "hang" and not record.correct


async def test_parallel_runs_keep_task_order_and_report_round_trips(tmp_path: Any) -> None:
    runner = AgentRunner(
        FunctionUpstream(good_native_model),
        "m",
        [EvalConfig.parse("native"), EvalConfig.parse("force:json")],
    )
    tasks = load_agent_tasks(["one_call"], limit=3)
    seen: list[str] = []
    records = await runner.run(tasks, parallel=3, on_record=lambda r: seen.append(r.task_id))
    assert [(r.task_id, r.config) for r in records] == [
        (t.id, c) for t in tasks for c in ("native", "force:json")
    ]
    assert sorted(seen) == sorted(r.task_id for r in records)
    path = tmp_path / "agent.json"
    write_agent_report(path, {"model": "m"}, records)
    meta, loaded = load_agent_report(path)
    assert meta == {"model": "m"} and loaded == records
    summary = {s.config: s for s in summarize_agent(records)}
    assert summary["native"].by_kind["one_call"][1] == 3
    table = agent_markdown(list(summary.values()))
    assert table.splitlines()[0].startswith("| configuration | all | one_call |")


def test_wilson_interval() -> None:
    low, high = wilson(8, 10)
    assert 0.49 < low < 0.45 + 0.05 and 0.94 < high < 0.95
    assert wilson(0, 0) == (0.0, 0.0)


def test_bfcl_prompt_is_no_agent_baseline() -> None:
    with pytest.raises(Exception, match="no 'bfcl-prompt' baseline"):
        AgentRunner(FunctionUpstream(good_native_model), "m", [EvalConfig.parse("bfcl-prompt")])


def test_eval_suite_agent_end_to_end_over_http(tmp_path: Any) -> None:
    from typer.testing import CliRunner

    from toolshim.cli.main import app
    from toolshim.testing.server import serve_fake

    output = tmp_path / "agent.json"
    upstream = FunctionUpstream(good_native_model, models=["weather-1"])
    args = ["eval", "--suite", "agent", "--categories", "one_call", "--limit", "2"]
    args += ["--config", "force:json", "--parallel", "2", "-o", str(output), "--markdown"]
    with serve_fake(upstream) as server:
        result = CliRunner().invoke(app, [*args, "--upstream", server.base_url])
    assert result.exit_code == 0, result.output
    report = json.loads(output.read_text())
    assert report["meta"]["model"] == "weather-1" and report["meta"]["suite"] == "agent"
    assert report["meta"]["configs"] == ["native", "force:json"]
    assert len(report["tasks"]) == 2 * 2
    native = next(s for s in report["summary"] if s["config"] == "native")
    assert native["correct"] == 1  # the scripted model knows Paris, not Oslo (the second task)
    assert "| `native` |" in result.output
    again = CliRunner().invoke(
        app, ["eval", "--suite", "agent", "--report-only", "-o", str(output)]
    )
    assert again.exit_code == 0 and "native" in again.output
