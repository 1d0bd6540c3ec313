"""Emulation details: re-asks, giving up, validation messages, history rewriting, rescue."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest

from tests.engine.helpers import ANSWER, CALL_TEXT, TOOLS, request
from toolshim.engine import Engine
from toolshim.errors import ToolCallError
from toolshim.testing import FakeUpstream, Reply
from toolshim.wire.openai_chat import completion_to_dict


def force(*replies: Any, **kwargs: Any) -> tuple[Engine, FakeUpstream]:
    upstream = FakeUpstream(list(replies))
    return Engine(upstream, mode="force", registry=":memory:", **kwargs), upstream


async def test_unknown_tool_is_reasked_with_the_real_names() -> None:
    engine, upstream = force('{"tool": "get_location"}', CALL_TEXT)
    completion = await engine.acomplete(request())
    assert completion.message.tool_calls[0].name == "get_weather"
    assert completion.meta is not None and completion.meta.reasks == 1
    assert completion.meta.llm_calls == 2
    sent = upstream.history[1]["messages"]
    assert sent[-2] == {"role": "assistant", "content": '{"tool": "get_location"}'}
    correction = sent[-1]["content"]
    assert sent[-1]["role"] == "user"
    assert "there is no tool named 'get_location'" in correction
    assert "'get_weather', 'get_time'" in correction


async def test_schema_violation_names_the_error_and_the_schema() -> None:
    bad = '{"tool_calls": [{"name": "get_weather", "arguments": {"unit": "kelvin"}}]}'
    engine, upstream = force(bad, CALL_TEXT)
    await engine.acomplete(request())
    correction = upstream.history[1]["messages"][-1]["content"]
    assert "'city' is a required property" in correction
    assert "'kelvin' is not one of ['c', 'f']" in correction
    assert '"required": ["city"]' in correction


async def test_scalar_drift_is_coerced_not_reasked() -> None:
    tool = {
        "type": "function",
        "function": {
            "name": "add",
            "parameters": {
                "type": "object",
                "properties": {
                    "a": {"type": "integer"},
                    "b": {"type": "number"},
                    "x": {"type": "boolean"},
                },
                "required": ["a", "b"],
            },
        },
    }
    engine, upstream = force('{"name": "add", "arguments": {"a": "5", "b": "2.5", "x": "true"}}')
    completion = await engine.acomplete(
        {"model": "m", "messages": [{"role": "user", "content": "5+2.5"}], "tools": [tool]}
    )
    assert json.loads(completion.message.tool_calls[0].arguments) == {"a": 5, "b": 2.5, "x": True}
    assert upstream.calls == 1


METRICS = {
    "type": "function",
    "function": {
        "name": "extract",
        "parameters": {
            "type": "object",
            "properties": {
                # enum beside "type": "array" (BFCL live_simple_71-35-0, from a real user's tool)
                "metrics": {"type": "array", "items": {"type": "string"}, "enum": ["trust", "view"]}
            },
            "required": ["metrics"],
        },
    },
}


async def test_an_enum_written_on_an_array_is_checked_on_its_items() -> None:
    good = '{"name": "extract", "arguments": {"metrics": ["view", "trust"]}}'
    engine, _ = force(good)
    completion = await engine.acomplete(request(tools=[METRICS]))
    assert json.loads(completion.message.tool_calls[0].arguments) == {"metrics": ["view", "trust"]}
    assert completion.meta is not None and completion.meta.reasks == 0

    bad = '{"name": "extract", "arguments": {"metrics": ["buzz"]}}'
    engine, upstream = force(bad, good)
    completion = await engine.acomplete(request(tools=[METRICS]))
    assert completion.meta is not None and completion.meta.reasks == 1
    correction = upstream.history[1]["messages"][-1]["content"]
    assert "'buzz' is not one of ['trust', 'view'] (at metrics/0)" in correction


async def test_a_python_call_list_that_does_not_parse_is_reasked_with_the_syntax_error() -> None:
    broken = '[get_weather(city="Paris"), get_weather(city="Oslo"), colour="c"]'
    engine, upstream = force(broken, CALL_TEXT, dialect="pythonic")
    completion = await engine.acomplete(request())
    assert completion.message.tool_calls[0].name == "get_weather"
    assert completion.meta is not None and completion.meta.reasks == 1
    correction = upstream.history[1]["messages"][-1]["content"]
    assert "'get_weather': the list of calls is not valid Python (invalid syntax" in correction


async def test_auto_choice_gives_up_with_the_text_and_a_warning() -> None:
    engine, upstream = force('{"tool":"nope"}', '{"tool":"nope"}', 'Sorry: {"tool":"nope"}')
    completion = await engine.acomplete(request())
    assert upstream.calls == 3
    assert completion.message.tool_calls == ()
    assert completion.message.content == "Sorry:"
    assert completion.meta is not None and completion.meta.reasks == 2
    assert any("no valid tool call after 2 re-ask(s)" in w for w in completion.meta.warnings)


async def test_required_choice_gives_up_with_a_typed_error() -> None:
    engine, upstream = force("no", "no", "no")
    with pytest.raises(ToolCallError) as info:
        await engine.acomplete(request(tool_choice="required"))
    assert upstream.calls == 3
    assert info.value.attempts == 3
    assert "must call at least one tool" in info.value.problems[0]


@pytest.mark.parametrize("max_reasks", [0, 1, 3])
async def test_max_reasks_is_honoured(max_reasks: int) -> None:
    engine, upstream = force(*(["no"] * (max_reasks + 1)), max_reasks=max_reasks)
    with pytest.raises(ToolCallError):
        await engine.acomplete(request(tool_choice="required"))
    assert upstream.calls == max_reasks + 1


async def test_named_function_must_be_the_one_called() -> None:
    engine, upstream = force(
        '{"name": "get_time", "arguments": {}}',
        '{"name": "get_weather", "arguments": {"city": "Paris"}}',
    )
    choice = {"type": "function", "function": {"name": "get_weather"}}
    completion = await engine.acomplete(request(tool_choice=choice))
    assert completion.message.tool_calls[0].name == "get_weather"
    assert (
        "only the tool 'get_weather' may be called now, not 'get_time'"
        in (upstream.history[1]["messages"][-1]["content"])
    )
    assert "must call the tool 'get_weather'" in upstream.history[0]["messages"][0]["content"]


async def test_parallel_tool_calls_false_keeps_the_first_valid_call() -> None:
    two = (
        '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}},'
        ' {"name": "get_time", "arguments": {}}]}'
    )
    engine, upstream = force(two)
    completion = await engine.acomplete(request(parallel_tool_calls=False))
    assert [c.name for c in completion.message.tool_calls] == ["get_weather"]
    assert upstream.calls == 1
    assert "at most one call" in upstream.history[0]["messages"][0]["content"]
    assert completion.meta is not None
    assert "kept the first 1 of 2 calls (parallel_tool_calls is false)" in completion.meta.warnings


async def test_too_many_calls_with_an_invalid_one_is_reasked() -> None:
    two = (
        '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}},'
        ' {"name": "get_location", "arguments": {}}]}'
    )
    engine, upstream = force(two, CALL_TEXT)
    completion = await engine.acomplete(request(parallel_tool_calls=False))
    assert upstream.calls == 2
    assert [c.name for c in completion.message.tool_calls] == ["get_weather"]


async def test_several_calls_in_one_reply() -> None:
    reply = (
        'Sure.\n```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```\n'
        '```json\n{"name": "get_time", "arguments": "{\\"tz\\": \\"CET\\"}"}\n```'
    )
    engine, _ = force(reply)
    completion = await engine.acomplete(request())
    calls = completion.message.tool_calls
    assert [c.name for c in calls] == ["get_weather", "get_time"]
    assert json.loads(calls[1].arguments) == {"tz": "CET"}
    assert all(re.fullmatch(r"emulated_[0-9a-f]{20}_\d", c.id) for c in calls)
    assert [c.id[-1] for c in calls] == ["0", "1"]


async def test_declining_without_an_answer_costs_one_more_call() -> None:
    engine, upstream = force('{"tool_calls": []}', ANSWER)
    completion = await engine.acomplete(request())
    assert completion.message.content == ANSWER
    assert upstream.calls == 2
    assert "get_weather" not in json.dumps(upstream.history[1]["messages"])


async def test_tool_choice_none_sends_no_instructions_and_returns_no_call() -> None:
    engine, upstream = force(CALL_TEXT, ANSWER)
    completion = await engine.acomplete(request(tool_choice="none"))
    # The call's JSON is neither a call nor the answer: the model is asked again, without tools
    # (tests/engine/test_audit_gaps.py covers the rest).
    assert completion.message.tool_calls == ()
    assert completion.message.content == ANSWER
    assert upstream.history[0]["messages"] == [
        {"role": "user", "content": "What is the weather in Paris?"}
    ]


CONVERSATION: dict[str, Any] = {
    "model": "m",
    "tools": TOOLS,
    "temperature": 0.2,
    "messages": [
        {"role": "system", "content": "You are terse."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Weather and time in Paris?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ],
        },
        {
            "role": "assistant",
            "content": "Checking both.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "get_time", "arguments": '{"tz":"CET"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sunny, 21C"},
        {"role": "tool", "tool_call_id": "c2", "content": "14:05"},
        {"role": "developer", "content": "Answer in one line."},
    ],
}


async def test_history_is_rewritten_as_text_and_nothing_is_dropped() -> None:
    engine, upstream = force("Sunny, 21C, 14:05.")
    original = copy.deepcopy(CONVERSATION)
    completion = await engine.acomplete(CONVERSATION)
    assert original == CONVERSATION, "the caller's request is never mutated"
    assert completion.message.content == "Sunny, 21C, 14:05."
    sent = upstream.history[0]
    assert sent["temperature"] == 0.2
    assert "tools" not in sent and "tool_choice" not in sent
    roles = [m["role"] for m in sent["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
    system = sent["messages"][0]["content"]
    assert system.startswith("You are terse.\n\nAnswer in one line.")
    assert "get_weather" in system
    assert sent["messages"][1]["content"][1]["type"] == "image_url"
    assistant = sent["messages"][2]
    assert "tool_calls" not in assistant
    assert assistant["content"].startswith("Checking both.\n")
    assert '"name": "get_weather"' in assistant["content"] and '"tz": "CET"' in assistant["content"]
    results = sent["messages"][3]["content"]
    assert "get_weather" in results and "c1" in results and "sunny, 21C" in results
    assert "get_time" in results and "c2" in results and "14:05" in results


async def test_decision_strategy_keeps_tool_results_and_system_text() -> None:
    upstream = FakeUpstream(['{"tool_calls": []}', "Sunny, 21C; it is 14:05."])
    engine = Engine(upstream, mode="force", strategy="decision", registry=":memory:")
    completion = await engine.acomplete(CONVERSATION)
    assert completion.message.content == "Sunny, 21C; it is 14:05."
    decision, final = upstream.history
    text = json.dumps(decision["messages"])
    assert "sunny, 21C" in text and "14:05" in text
    assert decision["messages"][0]["content"].startswith("You are terse.")
    assert '{\\"tool_calls\\": []}' in text  # the decision prompt says how to decline
    assert "get_weather" not in final["messages"][0]["content"]
    assert final["messages"][0]["content"].startswith("You are terse.")


async def test_rescue_turns_fenced_json_content_into_a_call() -> None:
    fenced = '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```'
    for mode in ("auto", "off", "fallback"):
        upstream = FakeUpstream([Reply(fenced)], tools="ignore")
        engine = Engine(upstream, mode=mode, registry=":memory:")
        completion = await engine.acomplete(request())
        assert completion.message.tool_calls[0].name == "get_weather", mode
        assert completion.meta is not None
        assert "tool calls recovered from content" in completion.meta.warnings
        assert not completion.meta.emulated
        assert upstream.calls == 1


async def test_rescue_leaves_an_invalid_call_alone() -> None:
    text = 'Use {"name": "get_weather", "arguments": {"town": "Paris"}}'
    upstream = FakeUpstream([Reply(text)], tools="ignore")
    engine = Engine(upstream, mode="auto", registry=":memory:")
    completion = await engine.acomplete(request())
    assert completion.message.content == text
    assert completion.message.tool_calls == ()


def test_sync_wrappers() -> None:
    upstream = FakeUpstream([CALL_TEXT, "plain"])
    engine = Engine(upstream, mode="force", registry=":memory:")
    completion = engine.complete(request())
    assert completion.tool_calls[0].name == "get_weather"
    chunks = list(engine.stream(request(stream=True)))
    assert "".join(c.content or "" for c in chunks) == "plain"
    engine.close()
    assert upstream.closed


async def test_completion_to_openai_has_the_metadata() -> None:
    engine, _ = force(CALL_TEXT)
    data = completion_to_dict(await engine.acomplete(request()))
    assert data["object"] == "chat.completion"
    assert data["toolshim"] == {
        "mode": "force",
        "emulated": True,
        "dialect": "json",
        "strategy": "single",
        "llm_calls": 1,
        "reasks": 0,
        "warnings": ["tool calls emulated"],
    }
    assert data["choices"][0]["message"]["content"] is None
    assert data["choices"][0]["finish_reason"] == "tool_calls"


async def test_a_call_cut_off_by_max_tokens_is_not_reasked() -> None:
    cut = Reply('{"tool_calls": [{"name": "get_weather", "arguments": {"ci', finish_reason="length")
    engine, upstream = force(cut)
    completion = await engine.acomplete(request(max_tokens=12, tool_choice="required"))
    assert upstream.calls == 1
    assert completion.finish_reason == "length"
    assert completion.message.tool_calls == ()
    assert completion.meta is not None
    assert any("cut off by max_tokens" in w for w in completion.meta.warnings)


async def test_a_cut_off_call_that_only_parses_after_repair_is_not_trusted() -> None:
    cut = Reply(
        '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Par',
        finish_reason="length",
    )
    engine, upstream = force(cut)
    completion = await engine.acomplete(request(max_tokens=20))
    assert upstream.calls == 1
    assert completion.message.tool_calls == ()
    assert completion.finish_reason == "length"


async def test_a_complete_call_that_ends_at_max_tokens_is_returned() -> None:
    whole = Reply('{"name": "get_weather", "arguments": {"city": "Paris"}}', finish_reason="length")
    engine, _ = force(whole)
    completion = await engine.acomplete(request(max_tokens=20))
    assert json.loads(completion.message.tool_calls[0].arguments) == {"city": "Paris"}


@pytest.mark.parametrize("stream", [False, True])
async def test_auto_give_up_never_returns_the_broken_call_as_content(stream: bool) -> None:
    bad = '{"name": "get_location", "arguments": {}}'
    engine, upstream = force(bad, bad, bad, "I cannot look that up, sorry.")
    if stream:
        chunks = [c async for c in engine.astream(request(stream=True))]
        text = "".join(c.content or "" for c in chunks)
        meta = chunks[-1].meta
    else:
        completion = await engine.acomplete(request())
        text, meta = completion.message.text, completion.meta
    assert text == "I cannot look that up, sorry."
    assert upstream.calls == 4
    assert "get_weather" not in json.dumps(upstream.history[-1]["messages"])
    assert meta is not None
    assert any("answered without tools" in w for w in meta.warnings)


async def test_rescue_ignores_the_dialects_own_call_limit() -> None:
    two = '{"tool":"get_weather","city":"Paris"}\n{"tool":"get_time","tz":"CET"}'
    upstream = FakeUpstream([Reply(two)], tools="ignore")
    engine = Engine(upstream, mode="auto", dialect="compact", registry=":memory:")
    completion = await engine.acomplete(request())
    assert [c.name for c in completion.message.tool_calls] == ["get_weather", "get_time"]
    assert upstream.calls == 1


@pytest.mark.parametrize("dialect", ["json", "hermes", "pythonic", "compact", "windlass"])
async def test_the_prompt_speaks_of_tool_results_only_when_there_are_some(dialect: str) -> None:
    """Told up front how results look, small models write made-up results instead of calls."""
    upstream = FakeUpstream([ANSWER, ANSWER])
    engine = Engine(upstream, mode="force", dialect=dialect, registry=":memory:")
    await engine.acomplete(request())
    await engine.acomplete(CONVERSATION)
    first, second = (body["messages"][0]["content"].lower() for body in upstream.history)
    assert "results of your calls" not in first
    assert "start with 'tool result" not in first
    assert "results of your calls" in second


async def test_with_upstream_leaves_the_original_engine_alone() -> None:
    first, second = FakeUpstream([ANSWER]), FakeUpstream([ANSWER])
    engine = Engine(first, mode="force", registry=":memory:")
    other = engine.with_upstream(second)
    await other.acomplete(request())
    assert engine.upstream is first and other.upstream is second
    assert (first.calls, second.calls) == (0, 1)
    assert other.registry is engine.registry and other.options == engine.options
