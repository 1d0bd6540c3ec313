"""The agent loop against a scripted model, natively and emulated: results, history, concurrency."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

from toolshim.agent import Agent, AgentResult, Tool
from toolshim.engine import Engine
from toolshim.errors import ConfigError, UpstreamError
from toolshim.testing import FakeUpstream, Reply, call
from toolshim.testing.server import serve_fake

from .conftest import Kind, add, calls_reply, fake_for, get_weather


def assert_valid_history(messages: list[dict[str, Any]]) -> None:
    """Every assistant tool call is answered by exactly one tool message, right after it."""
    pending: list[str] = []
    for message in messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] in pending, message
            pending.remove(message["tool_call_id"])
            continue
        assert not pending, f"unanswered calls {pending} before {message}"
        pending = [c["id"] for c in message.get("tool_calls") or ()]
    assert not pending
    assert messages[-1]["role"] == "assistant" and not messages[-1].get("tool_calls")


async def test_two_tools_in_one_turn_then_the_answer(kind: Kind) -> None:
    fake = fake_for(
        kind,
        calls_reply(kind, ("get_weather", {"city": "Paris"}), ("add", {"a": 2, "b": 3})),
        "It is 18 degrees in Paris, and 2 + 3 = 5.",
    )
    agent = Agent([get_weather, add], upstream=fake, model="fake-model")
    result = await agent.arun("Weather in Paris, and 2+3?")

    assert result.output == "It is 18 degrees in Paris, and 2 + 3 = 5."
    assert result.completed and result.stopped is None
    assert [(r.name, r.result, r.status) for r in result.tool_runs] == [
        ("get_weather", "18.0 degrees celsius in Paris", "ok"),
        ("add", "5", "ok"),
    ]
    assert result.tool_runs[1].arguments == {"a": 2, "b": 3}
    assert result.tool_runs[1].value == 5
    assert all(r.duration >= 0 and r.turn == 1 and not r.is_error for r in result.tool_runs)
    assert_valid_history(result.messages)
    assert [m["role"] for m in result.messages] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    assert len(result.turns) == 2 and result.turns[0].tool_calls == ("get_weather", "add")
    assert result.usage.total_tokens == sum(t.usage.total_tokens for t in result.turns if t.usage)
    assert result.usage.total_tokens > 0
    metas = result.metadata
    assert len(metas) == 2
    assert all(m.emulated is (kind == "emulated") for m in metas)
    assert ("tool calls emulated" in result.warnings) is (kind == "emulated")

    last_body = fake.history[-1]
    if kind == "native":
        assert [t["function"]["name"] for t in last_body["tools"]] == ["get_weather", "add"]
        tool_messages = [m for m in last_body["messages"] if m["role"] == "tool"]
        assert [m["content"] for m in tool_messages] == ["18.0 degrees celsius in Paris", "5"]
    else:
        assert "tools" not in last_body
        text = json.dumps(last_body["messages"])
        assert "18.0 degrees celsius in Paris" in text and "get_weather" in text


def test_sync_run_matches_and_can_run_twice() -> None:
    fake = FakeUpstream(
        [
            Reply(tool_calls=[call("add", {"a": 1, "b": 1})]),
            "2",
            Reply(tool_calls=[call("add", {"a": 2, "b": 2})]),
            "4",
        ]
    )
    with Agent([add], upstream=fake, model="m") as agent:
        assert agent.run("1+1?").output == "2"
        assert agent.run("2+2?").output == "4"


async def test_sync_tools_of_one_turn_run_concurrently_in_threads(kind: Kind) -> None:
    barrier = threading.Barrier(2, timeout=10)

    def left() -> str:
        """Left."""
        barrier.wait()  # only passes when the other tool runs at the same time
        return "L"

    def right() -> str:
        """Right."""
        barrier.wait()
        return "R"

    fake = fake_for(kind, calls_reply(kind, ("left", {}), ("right", {})), "LR")
    result = await Agent([left, right], upstream=fake, model="m").arun("go")
    assert [r.result for r in result.tool_runs] == ["L", "R"]
    assert result.output == "LR"


async def test_async_tools_of_one_turn_run_concurrently(kind: Kind) -> None:
    ping, pong = asyncio.Event(), asyncio.Event()

    async def first() -> str:
        """First."""
        ping.set()
        await asyncio.wait_for(pong.wait(), 10)
        return "1"

    async def second() -> str:
        """Second."""
        await asyncio.wait_for(ping.wait(), 10)
        pong.set()
        return "2"

    fake = fake_for(kind, calls_reply(kind, ("first", {}), ("second", {})), "done: 1 and 2")
    result = await Agent([first, second], upstream=fake, model="m").arun("go")
    assert [r.result for r in result.tool_runs] == ["1", "2"]


async def test_a_tool_exception_goes_back_to_the_model(kind: Kind) -> None:
    fake = fake_for(
        kind,
        calls_reply(kind, ("get_weather", {"city": "Atlantis"})),
        "I have no weather for Atlantis.",
    )
    result = await Agent([get_weather], upstream=fake, model="m").arun("Weather in Atlantis?")
    run = result.tool_runs[0]
    assert run.status == "error" and run.is_error and run.error_type == "ValueError"
    assert run.result == "Error: ValueError: no weather station for 'Atlantis'"
    assert isinstance(run.value, ValueError)
    assert result.output == "I have no weather for Atlantis."
    assert run.result in json.dumps(fake.history[-1]["messages"])


async def test_invalid_native_arguments_are_explained_and_the_tool_not_called() -> None:
    seen: list[str] = []

    def lookup(city: str, days: int) -> str:
        """Look up."""
        seen.append(city)
        return f"{city}/{days}"

    fake = FakeUpstream(
        [
            Reply(tool_calls=[call("lookup", {"town": "Oslo", "days": "many"})]),
            Reply(tool_calls=[call("lookup", {"city": "Oslo", "days": 2})]),
            "Oslo/2",
        ]
    )
    result = await Agent([lookup], upstream=fake, model="m", mode="off").arun("?")
    first, second = result.tool_runs
    assert first.status == "invalid_arguments" and first.is_error
    assert "city: required, but missing" in first.result
    assert "days: Input should be a valid integer" in first.result
    assert "Unknown argument(s) 'town'" in first.result
    assert second.status == "ok" and second.result == "Oslo/2"
    assert seen == ["Oslo"]
    assert result.output == "Oslo/2"


async def test_the_agent_streams_events_in_order(kind: Kind) -> None:
    fake = fake_for(
        kind,
        calls_reply(kind, ("get_weather", {"city": "London"}), ("add", {"a": 1, "b": 2})),
        "London is at 14 degrees and the sum is 3.",
    )
    agent = Agent([get_weather, add], upstream=fake, model="m")
    events = [e async for e in agent.astream("?")]
    names = [type(e).__name__ for e in events]
    assert names[0] == "TurnStarted" and names[-1] == "RunFinished"
    first_turn = names[: names.index("TurnFinished") + 1]
    assert first_turn.count("ToolCallStarted") == 2 and first_turn.count("ToolCallFinished") == 2
    assert max(i for i, n in enumerate(first_turn) if n == "ToolCallStarted") < min(
        i for i, n in enumerate(first_turn) if n == "ToolCallFinished"
    )
    text = "".join(e.text for e in events if type(e).__name__ == "TextDelta" and e.turn == 2)
    result = events[-1].result
    assert text == result.output == "London is at 14 degrees and the sum is 3."
    assert sum(1 for n in names if n == "TextDelta") > 1  # it really streamed in pieces
    assert [r.result for r in result.tool_runs] == ["14.0 degrees celsius in London", "3"]
    assert result.usage.total_tokens > 0
    assert all(t.meta is not None for t in result.turns)
    assert_valid_history(result.messages)
    assert all(body.get("stream") for body in fake.history)


def test_sync_stream() -> None:
    fake = FakeUpstream([Reply(tool_calls=[call("add", {"a": 5, "b": 5})]), "ten"])
    agent = Agent([add], upstream=fake, model="m")
    events = list(agent.stream("5+5"))
    assert type(events[-1]).__name__ == "RunFinished"
    assert events[-1].result.output == "ten"
    agent.close()


async def test_an_engine_can_be_shared_and_the_agent_mode_overrides_it() -> None:
    fake = FakeUpstream(
        [
            '{"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]}',
            "3",
        ],
        tools="native",
    )
    engine = Engine(fake, mode="auto")
    result = await Agent([add], upstream=engine, model="m", mode="force").arun("1+2")
    assert result.output == "3" and result.emulated
    assert all("tools" not in body for body in fake.history)  # force: never sent natively


async def test_the_model_defaults_to_the_upstreams_first_model() -> None:
    fake = FakeUpstream(["hello"], models=["served-model", "other"])
    result = await Agent([], upstream=fake).arun("hi")
    assert result.output == "hello" and result.model == "served-model"
    assert fake.history[0]["model"] == "served-model"
    assert "tools" not in fake.history[0]


async def test_system_prompt_params_and_message_prompts() -> None:
    fake = FakeUpstream(["a", "b"])
    agent = Agent([add], upstream=fake, model="m", system="Be brief.", params={"temperature": 0})
    await agent.arun("first")
    assert fake.history[0]["messages"][0] == {"role": "system", "content": "Be brief."}
    assert fake.history[0]["temperature"] == 0
    history = [{"role": "system", "content": "Own system."}, {"role": "user", "content": "x"}]
    result = await agent.arun(history)
    sent = fake.history[1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user"] and sent[0]["content"] == "Own system."
    assert history == [
        {"role": "system", "content": "Own system."},
        {"role": "user", "content": "x"},
    ]
    assert result.messages[-1] == {"role": "assistant", "content": "b"}


async def test_a_real_http_upstream_by_url() -> None:
    fake = FakeUpstream(
        ['{"tool_calls": [{"name": "add", "arguments": {"a": 20, "b": 22}}]}', "42"],
        tools="reject",
        rejection="llama-server",
    )
    with serve_fake(fake) as server:
        agent = Agent([add], upstream=server.base_url, model="m")
        try:
            result = await agent.arun("20+22?")
        finally:
            await agent.aclose()
    assert result.output == "42" and result.emulated
    assert result.tool_runs[0].result == "42"
    assert any("rejected tools" in w for w in result.warnings)


async def test_upstream_failures_are_raised() -> None:
    fake = FakeUpstream([UpstreamError("boom")])
    with pytest.raises(UpstreamError, match="boom"):
        await Agent([add], upstream=fake, model="m").arun("x")


def test_result_to_dict_is_json() -> None:
    fake = FakeUpstream([Reply(tool_calls=[call("add", {"a": 1, "b": 1})]), "2"])
    result: AgentResult = Agent([add], upstream=fake, model="m").run("?")
    data = json.loads(json.dumps(result.to_dict()))
    assert data["output"] == "2" and data["stopped"] is None
    assert data["tool_runs"][0]["name"] == "add" and data["tool_runs"][0]["result"] == "2"
    assert data["turns"][0]["toolshim"]["mode"] == "auto"
    assert data["usage"]["total_tokens"] == result.usage.total_tokens
    assert str(result) == "2"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_turns": 0}, "max_turns must be an integer of at least 1"),
        ({"max_tool_calls": -1}, "max_tool_calls must be"),
        ({"max_total_tokens": 0}, "max_total_tokens must be"),
        ({"mode": "sometimes"}, "unknown mode 'sometimes'"),
        ({"dialect": "klingon"}, "unknown dialect 'klingon'"),
    ],
)
def test_bad_options_are_config_errors(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Agent([add], upstream=FakeUpstream(), **kwargs)


def test_duplicate_tool_names_and_missing_upstream(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="two tools are named 'add'"):
        Agent([add, Tool.from_function(add)], upstream=FakeUpstream())
    monkeypatch.delenv("TOOLSHIM_UPSTREAM", raising=False)
    with pytest.raises(ConfigError, match="the agent has no upstream"):
        Agent([add])


async def test_an_empty_final_answer_is_flagged() -> None:
    result = await Agent([add], upstream=FakeUpstream([""]), model="m").arun("?")
    assert result.output == "" and result.completed
    assert "the model's final answer (turn 1) is empty" in result.warnings
