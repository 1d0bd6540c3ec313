"""Safeguards: max_turns, loop detection (seed 003), unknown tools, budgets — natively and emulated."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolshim.agent import Agent
from toolshim.errors import AgentLimitError
from toolshim.testing import FakeUpstream, Reply, call

from .conftest import Kind, add, calls_reply, fake_for, get_weather, new_call_after_results
from .test_loop import assert_valid_history


class Counter:
    """A tool that counts its calls."""

    def __init__(self) -> None:
        self.calls: list[Any] = []

    def __call__(self, city: str, units: str = "celsius") -> str:
        self.calls.append((city, units))
        return f"18 degrees {units} in {city}"


def counting_agent(fake: FakeUpstream, counter: Counter, **kwargs: Any) -> Agent:
    from toolshim.agent import Tool

    return Agent([Tool(counter, name="get_weather")], upstream=fake, model="m", **kwargs)


async def test_the_same_call_after_its_result_ends_the_run_with_that_result() -> None:
    """Natively, the agent's own loop detection stops a repeated call (emulated, the engine
    re-asks first: see the next test)."""
    kind: Kind = "native"
    counter = Counter()
    fake = fake_for(
        kind,
        calls_reply(kind, ("get_weather", {"city": "Paris"})),
        calls_reply(kind, ("get_weather", {"city": "Paris"})),
        "never asked for",
    )
    result = await counting_agent(fake, counter).arun("Weather in Paris?")
    assert counter.calls == [("Paris", "celsius")]  # the repeat was not run
    assert result.stopped == "loop" and not result.completed
    assert result.output == 'get_weather(city="Paris") returned: 18 degrees celsius in Paris'
    assert any(w.startswith("loop stopped: the model called get_weather") for w in result.warnings)
    assert [r.status for r in result.tool_runs] == ["ok", "repeated"]
    assert len(fake.queue) == 1  # no third request went to the model
    assert_valid_history(result.messages)
    assert result.messages[-1]["content"] == result.output


async def test_an_emulated_repeat_is_reasked_and_the_run_ends_with_an_answer() -> None:
    counter = Counter()
    repeat = calls_reply("emulated", ("get_weather", {"city": "Paris"}))
    fake = fake_for(
        "emulated",
        calls_reply("emulated", ("get_weather", {"city": "Paris"})),
        repeat,  # where its answer was asked for without tools: re-asked once
        "It is 18 degrees in Paris.",
    )
    result = await counting_agent(fake, counter).arun("Weather in Paris?")
    assert counter.calls == [("Paris", "celsius")]  # the tool ran once
    assert result.completed and result.output == "It is 18 degrees in Paris."
    assert len(fake.queue) == 0
    assert_valid_history(result.messages)


async def test_loop_detection_compares_normalised_arguments(kind: Kind) -> None:
    fake = fake_for(
        kind,
        calls_reply(kind, ("get_weather", {"city": "Paris"})),
        *new_call_after_results(
            kind, calls_reply(kind, ("get_weather", {"units": "celsius", "city": "Paris"}))
        ),
    )
    result = await Agent([get_weather], upstream=fake, model="m").arun("Weather in Paris?")
    assert result.stopped == "loop"
    assert [r.status for r in result.tool_runs] == ["ok", "repeated"]


async def test_different_arguments_are_not_a_loop(kind: Kind) -> None:
    counter = Counter()
    fake = fake_for(
        kind,
        calls_reply(kind, ("get_weather", {"city": "Paris"})),
        *new_call_after_results(
            kind, calls_reply(kind, ("get_weather", {"city": "Paris", "units": "kelvin"}))
        ),
        "done",
    )
    result = await counting_agent(fake, counter).arun("Weather in Paris?")
    assert result.completed and result.output == "done"
    assert len(counter.calls) == 2


async def test_a_repeat_next_to_a_new_call_is_answered_from_the_earlier_result() -> None:
    counter = Counter()
    fake = FakeUpstream(
        [
            Reply(tool_calls=[call("get_weather", {"city": "Paris"})]),
            Reply(
                tool_calls=[
                    call("get_weather", {"city": "Paris"}),
                    call("get_weather", {"city": "Oslo"}),
                ]
            ),
            "Paris 18, Oslo 18",
        ]
    )
    result = await counting_agent(fake, counter).arun("?")
    assert counter.calls == [("Paris", "celsius"), ("Oslo", "celsius")]
    assert result.completed and result.output == "Paris 18, Oslo 18"
    repeated = result.tool_runs[1]
    assert repeated.status == "repeated" and not repeated.is_error
    assert "Not run again" in repeated.result and "18 degrees celsius in Paris" in repeated.result
    assert any("answered from its earlier result" in w for w in result.warnings)


async def test_identical_calls_in_one_turn_run_once() -> None:
    counter = Counter()
    fake = FakeUpstream(
        [
            Reply(
                tool_calls=[
                    call("get_weather", {"city": "Paris"}),
                    call("get_weather", {"city": "Paris"}),
                ]
            ),
            "ok",
        ]
    )
    result = await counting_agent(fake, counter).arun("?")
    assert len(counter.calls) == 1
    assert [r.result for r in result.tool_runs] == ["18 degrees celsius in Paris"] * 2
    assert_valid_history(result.messages)


async def test_a_failed_call_may_be_retried_once_before_it_counts_as_a_loop() -> None:
    attempts: list[int] = []

    def flaky(n: int) -> str:
        """Fails every time."""
        attempts.append(n)
        raise ConnectionError("service unavailable")

    same = Reply(tool_calls=[call("flaky", {"n": 1})])
    fake = FakeUpstream([same, same, same, "unreachable"])
    result = await Agent([flaky], upstream=fake, model="m").arun("?")
    assert attempts == [1, 1]
    assert result.stopped == "loop"
    assert result.output == ("flaky(n=1) failed: Error: ConnectionError: service unavailable")


async def test_max_turns_ends_the_run_with_a_clear_answer(kind: Kind) -> None:
    fake = fake_for(
        kind,
        calls_reply(kind, ("add", {"a": 0, "b": 1})),
        *(
            r
            for i in range(1, 5)
            for r in new_call_after_results(kind, calls_reply(kind, ("add", {"a": i, "b": 1})))
        ),
    )
    result = await Agent([add], upstream=fake, model="m", max_turns=3).arun("count")
    assert result.stopped == "max_turns"
    assert len(result.turns) == 3 and len(result.tool_runs) == 3
    assert result.output.startswith(
        "I stopped before reaching a final answer: the turn limit (max_turns=3) was reached"
    )
    assert "add(a=2, b=1): 3" in result.output  # the latest result, for the reader
    assert any("max_turns=3" in w for w in result.warnings)
    assert_valid_history(result.messages)


async def test_raise_on_limit_raises_with_the_result() -> None:
    fake = FakeUpstream([Reply(tool_calls=[call("add", {"a": i, "b": 1})]) for i in range(3)])
    agent = Agent([add], upstream=fake, model="m", max_turns=2, raise_on_limit=True)
    with pytest.raises(AgentLimitError) as info:
        await agent.arun("count")
    assert info.value.reason == "max_turns"
    assert info.value.result.stopped == "max_turns"
    assert len(info.value.result.tool_runs) == 2


async def test_an_unknown_native_tool_is_answered_with_the_real_tools_then_corrected() -> None:
    fake = FakeUpstream(
        [
            Reply(tool_calls=[call("get_location", {})]),
            Reply(tool_calls=[call("get_weather", {"city": "Paris"})]),
            "18 in Paris",
        ]
    )
    result = await Agent([get_weather, add], upstream=fake, model="m", mode="off").arun("?")
    first = result.tool_runs[0]
    assert first.status == "unknown_tool"
    assert first.result == (
        "Error: there is no tool named 'get_location'. The available tools are "
        "'get_weather', 'add'. Call one of them by its exact name, or answer in plain text."
    )
    assert result.completed and result.output == "18 in Paris"
    assert first.result in json.dumps(fake.history[1]["messages"])


async def test_a_model_that_keeps_inventing_tools_gets_a_graceful_answer() -> None:
    fake = FakeUpstream([Reply(tool_calls=[call("get_location", {})]) for _ in range(5)])
    agent = Agent([get_weather], upstream=fake, model="m", mode="off", max_unknown_tool_retries=2)
    result = await agent.arun("Where am I?")
    assert result.stopped == "unknown_tool"
    assert fake.calls == 3  # two corrections, then the graceful stop
    assert result.output == (
        "I tried to use a tool called 'get_location', but it doesn't exist (the tools I have "
        "are 'get_weather'), so I could not finish this request with tools."
    )
    assert_valid_history(result.messages)


async def test_emulated_unknown_tools_are_re_asked_by_the_engine_first() -> None:
    fake = FakeUpstream(
        [
            '{"tool_calls": [{"name": "get_location", "arguments": {}}]}',
            '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "London"}}]}',
            "14 in London",
        ],
        tools="reject",
    )
    result = await Agent([get_weather], upstream=fake, model="m").arun("Weather in London?")
    assert result.output == "14 in London"
    assert result.turns[0].meta is not None and result.turns[0].meta.reasks == 1
    reask = fake.history[2]["messages"][-1]["content"]
    assert "there is no tool named 'get_location'" in reask and "'get_weather'" in reask


async def test_prefixed_or_case_drifted_native_names_are_resolved() -> None:
    fake = FakeUpstream(
        [Reply(tool_calls=[call("functions.Get_Weather", {"city": "Paris"})]), "ok"]
    )
    result = await Agent([get_weather], upstream=fake, model="m", mode="off").arun("?")
    assert result.tool_runs[0].status == "ok" and result.tool_runs[0].name == "get_weather"


async def test_the_tool_call_budget_stops_before_running_more(kind: Kind) -> None:
    counter = Counter()
    fake = fake_for(
        kind,
        calls_reply(kind, ("get_weather", {"city": "Paris"})),
        calls_reply(kind, ("get_weather", {"city": "Oslo"}), ("get_weather", {"city": "Rome"})),
    )
    result = await counting_agent(fake, counter, max_tool_calls=2).arun(
        "Weather in Paris, Oslo and Rome?"
    )
    assert counter.calls == [("Paris", "celsius")]
    assert result.stopped == "tool_call_budget"
    assert [r.status for r in result.tool_runs] == ["ok", "not_run", "not_run"]
    assert "max_tool_calls=2" in result.output and "18 degrees celsius in Paris" in result.output
    assert_valid_history(result.messages)


async def test_the_token_budget_stops_after_the_turn_that_spends_it() -> None:
    usage = {"prompt_tokens": 60, "completion_tokens": 10, "total_tokens": 70}
    fake = FakeUpstream(
        [
            Reply(tool_calls=[call("add", {"a": 1, "b": 1})], usage=usage),
            Reply(tool_calls=[call("add", {"a": 2, "b": 2})], usage=usage),
            Reply("never", usage=usage),
        ]
    )
    result = await Agent([add], upstream=fake, model="m", max_total_tokens=100).arun("?")
    assert result.stopped == "token_budget"
    assert result.usage.total_tokens == 140
    assert [r.status for r in result.tool_runs] == ["ok", "not_run"]
    assert "max_total_tokens=100" in result.output and "140 tokens" in result.output


async def test_a_final_answer_within_the_token_budget_is_kept() -> None:
    usage = {"prompt_tokens": 90, "completion_tokens": 20, "total_tokens": 110}
    fake = FakeUpstream([Reply("fine", usage=usage)])
    result = await Agent([add], upstream=fake, model="m", max_total_tokens=100).arun("?")
    assert result.completed and result.output == "fine"
