"""Audit gaps: errors carry the turn's metadata; no call JSON leaks into an answer under
``tool_choice: "none"``; a call that repeats one already answered in the history is flagged."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.engine.helpers import ANSWER, CALL_TEXT, request
from tests.engine.test_streaming import Assembled, collect
from toolshim.engine import Engine
from toolshim.errors import ConfigError, ToolCallError, ToolshimError, UpstreamStatusError
from toolshim.testing import FakeUpstream, FunctionUpstream, Reply, call
from toolshim.types import Metadata

UNKNOWN = '{"tool_calls": [{"name": "zz", "arguments": {}}]}'


async def serve(engine: Engine, body: dict[str, Any], stream: bool) -> Assembled:
    """The reply as an :class:`Assembled`, streamed or not (the same shape either way)."""
    if stream:
        return await collect(engine, {**body, "stream": True})
    completion = await engine.acomplete(body)
    out = Assembled(content=completion.message.text, meta=completion.meta)
    out.finish = completion.finish_reason
    for i, c in enumerate(completion.tool_calls):
        out.calls[i] = {"id": c.id, "name": c.name, "arguments": c.arguments}
    return out


async def fail(engine: Engine, body: dict[str, Any], stream: bool) -> ToolshimError:
    with pytest.raises(ToolshimError) as info:
        await serve(engine, body, stream)
    return info.value


def meta_of(error: ToolshimError) -> Metadata:
    meta = error.meta
    assert meta is not None, "the error carries the turn's metadata"
    return meta


# -- 1. errors carry the turn's metadata --------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("strategy", ["single", "decision"])
async def test_tool_call_error_carries_the_metadata(stream: bool, strategy: str) -> None:
    engine = Engine(
        FakeUpstream([UNKNOWN] * 3), mode="force", strategy=strategy, registry=":memory:"
    )
    error = await fail(engine, request(tool_choice="required"), stream)
    assert isinstance(error, ToolCallError)
    meta = meta_of(error)
    assert meta.emulated and meta.mode == "force" and meta.dialect == "json"
    assert (meta.llm_calls, meta.reasks) == (3, 2)
    assert "tool calls emulated" not in meta.warnings  # no emulated call came back


@pytest.mark.parametrize("stream", [False, True])
async def test_an_upstream_error_carries_the_metadata_too(stream: bool) -> None:
    boom = UpstreamStatusError("the model crashed", status=500)
    engine = Engine(FakeUpstream([boom]), mode="off", registry=":memory:")
    error = await fail(engine, request(), stream)
    assert isinstance(error, UpstreamStatusError)
    meta = meta_of(error)
    assert (meta.mode, meta.emulated, meta.llm_calls, meta.reasks) == ("off", False, 1, 0)


async def test_an_upstream_error_after_emulated_reasks_counts_them() -> None:
    boom = UpstreamStatusError("the model crashed", status=500)
    engine = Engine(FakeUpstream([UNKNOWN, boom]), mode="force", registry=":memory:")
    meta = meta_of(await fail(engine, request(), False))
    assert meta.emulated and (meta.llm_calls, meta.reasks) == (2, 1)


async def test_an_error_before_the_turn_started_has_no_metadata() -> None:
    engine = Engine(FakeUpstream([]), registry=":memory:")
    with pytest.raises(ConfigError) as info:
        await engine.acomplete(request(toolshim={"mode": "nope"}))
    assert info.value.meta is None


# -- 2. tool_choice "none": no call JSON as the answer -----------------------------------------


@pytest.mark.parametrize("stream", [False, True])
async def test_none_reasks_once_when_the_reply_is_only_a_call(stream: bool) -> None:
    upstream = FakeUpstream([CALL_TEXT, ANSWER])
    engine = Engine(upstream, mode="force", registry=":memory:")
    out = await serve(engine, request(tool_choice="none"), stream)
    assert out.calls == {} and out.content == ANSWER
    assert out.finish == "stop"
    assert upstream.calls == 2
    assert out.meta is not None and out.meta.reasks == 1 and out.meta.llm_calls == 2
    reask = upstream.history[1]["messages"]
    assert reask[-2] == {"role": "assistant", "content": CALL_TEXT}
    assert reask[-1]["role"] == "user" and "not available" in reask[-1]["content"]
    assert "get_weather" not in json.dumps(upstream.history[0]["messages"])  # no instructions


@pytest.mark.parametrize("stream", [False, True])
async def test_none_keeps_the_prose_and_drops_the_call(stream: bool) -> None:
    upstream = FakeUpstream([f"Let me check.\n{CALL_TEXT}"])
    engine = Engine(upstream, mode="force", registry=":memory:")
    out = await serve(engine, request(tool_choice="none"), stream)
    assert out.calls == {} and out.content.strip() == "Let me check."
    assert upstream.calls == 1
    assert out.meta is not None and out.meta.reasks == 0
    assert any("tool call" in w and "removed" in w for w in out.meta.warnings)


@pytest.mark.parametrize("stream", [False, True])
async def test_none_returns_the_text_with_a_warning_when_the_call_persists(stream: bool) -> None:
    upstream = FakeUpstream([CALL_TEXT, CALL_TEXT, ANSWER])
    engine = Engine(upstream, mode="force", registry=":memory:")
    out = await serve(engine, request(tool_choice="none"), stream)
    assert out.calls == {} and out.content == CALL_TEXT
    assert upstream.calls == 2
    assert out.meta is not None and out.meta.reasks == 1
    assert any("tool_choice is 'none'" in w for w in out.meta.warnings)


@pytest.mark.parametrize("stream", [False, True])
async def test_none_does_not_reask_past_max_reasks(stream: bool) -> None:
    upstream = FakeUpstream([CALL_TEXT, ANSWER])
    engine = Engine(upstream, mode="force", max_reasks=0, registry=":memory:")
    out = await serve(engine, request(tool_choice="none"), stream)
    assert out.content == CALL_TEXT and upstream.calls == 1
    assert out.meta is not None and any("tool_choice is 'none'" in w for w in out.meta.warnings)


@pytest.mark.parametrize("stream", [False, True])
async def test_none_treats_a_bare_no_tool_reply_as_call_json(stream: bool) -> None:
    upstream = FakeUpstream(['{"tool_calls": []}', ANSWER])
    engine = Engine(upstream, mode="force", registry=":memory:")
    out = await serve(engine, request(tool_choice="none"), stream)
    assert out.content == ANSWER and upstream.calls == 2


@pytest.mark.parametrize("stream", [False, True])
async def test_none_leaves_json_that_is_no_call_alone(stream: bool) -> None:
    data = '{"name": "Ada", "age": 3}'
    upstream = FakeUpstream([data])
    engine = Engine(upstream, mode="force", registry=":memory:")
    out = await serve(engine, request(tool_choice="none"), stream)
    assert out.content == data and upstream.calls == 1
    assert out.meta is not None and out.meta.reasks == 0


@pytest.mark.parametrize("stream", [False, True])
async def test_a_native_reply_writing_a_call_under_none_is_not_the_answer(stream: bool) -> None:
    def writes_calls(body: dict[str, Any]) -> Any:
        return CALL_TEXT if body.get("tools") else ANSWER

    upstream = FunctionUpstream(writes_calls)
    engine = Engine(upstream, mode="auto", registry=":memory:")
    out = await serve(engine, request(tool_choice="none"), stream)
    assert out.calls == {} and out.content == ANSWER
    assert upstream.calls == 2
    assert "tools" not in upstream.history[1]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("mode", ["auto", "fallback"])
async def test_a_native_reply_with_prose_and_a_call_under_none_keeps_the_prose(
    stream: bool, mode: str
) -> None:
    upstream = FakeUpstream([f"It should be sunny.\n```json\n{CALL_TEXT}\n```"])
    engine = Engine(upstream, mode=mode, registry=":memory:")
    out = await serve(engine, request(tool_choice="none"), stream)
    assert out.calls == {} and out.content.strip() == "It should be sunny."
    assert upstream.calls == 1


@pytest.mark.parametrize("stream", [False, True])
async def test_the_answer_asked_for_without_tools_does_not_leak_a_call(stream: bool) -> None:
    # auto choice; the model declines, then writes a call in the answer asked without tools.
    upstream = FakeUpstream(['{"tool_calls": []}', CALL_TEXT, ANSWER])
    engine = Engine(upstream, mode="force", registry=":memory:")
    out = await serve(engine, request(), stream)
    assert out.calls == {} and out.content == ANSWER
    assert upstream.calls == 3


async def test_off_mode_never_intervenes_under_none() -> None:
    upstream = FakeUpstream([CALL_TEXT])
    engine = Engine(upstream, mode="off", registry=":memory:")
    out = await serve(engine, request(tool_choice="none"), False)
    assert out.content == CALL_TEXT and upstream.calls == 1


# -- 3. a call that repeats one already answered ------------------------------------------------


AND_ROME = "What is the weather in Paris? And in Rome?"


def answered(
    arguments: str = '{"city": "Paris"}',
    *,
    result: bool = True,
    question: str = "What is the weather in Paris?",
) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": question},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": arguments},
                }
            ],
        },
    ]
    if result:
        messages.append({"role": "tool", "tool_call_id": "c1", "content": "sunny"})
    return request(messages=messages)


def repeat_warnings(out: Assembled) -> list[str]:
    assert out.meta is not None
    return [w for w in out.meta.warnings if "already in the conversation" in w]


@pytest.mark.parametrize("stream", [False, True])
async def test_an_emulated_repeat_of_a_call_that_worked_is_answered_from_the_results(
    stream: bool,
) -> None:
    """Told so, the 0.5B wrote the same call again in 56 of its 100 agent tasks: the answer is
    asked for from the results at once, without a re-ask."""
    again = '{"tool_calls": [{"name": "get_weather", "arguments": {"city":"Paris"}}]}'
    upstream = FakeUpstream([again, "It is 18 degrees and sunny in Paris."])
    engine = Engine(upstream, mode="force", registry=":memory:")
    # (a question that leaves a step: Rome has no result, so the tools are offered again)
    out = await serve(engine, answered('{ "city" : "Paris" }', question=AND_ROME), stream)
    assert out.calls == {} and out.content == "It is 18 degrees and sunny in Paris."
    assert upstream.calls == 2 and out.meta is not None and out.meta.reasks == 0
    last = upstream.history[1]
    assert "Do not call a tool" in last["messages"][-1]["content"]
    assert "sunny" in last["messages"][-1]["content"]  # the result, folded into the question
    assert "tool calls emulated" not in out.meta.warnings
    assert any("answered from the results without tools" in w for w in out.meta.warnings)


PARIS_AND_OSLO = (
    '{"tool_calls": [{"name": "get_weather", "arguments": {"city":"Paris"}},'
    ' {"name": "get_weather", "arguments": {"city":"Oslo"}}]}'
)


async def and_in_oslo(replies: list[str], stream: bool) -> tuple[FakeUpstream, Assembled]:
    """ "And in Oslo?" after Paris's weather, answered with ``replies``; the reply must be
    Oslo's call."""
    upstream = FakeUpstream(replies)
    engine = Engine(upstream, mode="force", registry=":memory:")
    body = answered()
    body["messages"] += [
        {"role": "assistant", "content": "It is sunny in Paris."},
        {"role": "user", "content": "And in Oslo?"},
    ]
    out = await serve(engine, body, stream)
    assert [json.loads(c["arguments"]) for c in out.calls.values()] == [{"city": "Oslo"}]
    return upstream, out


@pytest.mark.parametrize("stream", [False, True])
async def test_a_repeat_of_an_earlier_questions_call_is_reasked_with_the_new_question(
    stream: bool,
) -> None:
    """Asked "And in Oslo?" after Paris's weather, the 0.5B wrote Paris's call again and,
    answered from the results at once, gave Oslo Paris's weather."""
    paris = '{"tool_calls": [{"name": "get_weather", "arguments": {"city":"Paris"}}]}'
    oslo = '{"tool_calls": [{"name": "get_weather", "arguments": {"city":"Oslo"}}]}'
    upstream, _ = await and_in_oslo([paris, oslo], stream)
    reask = upstream.history[1]["messages"][-1]["content"]
    assert 'you already called get_weather({"city": "Paris"}) for an earlier question' in reask
    assert 'The question now is: "And in Oslo?"' in reask


@pytest.mark.parametrize("stream", [False, True])
async def test_a_done_repeat_beside_a_new_call_is_dropped_not_reasked(stream: bool) -> None:
    """The 1.5B wrote the cd of an earlier question again beside the new question's cp; told
    so, it wrote both again and the turn was answered without tools. The new call is sent."""
    upstream, out = await and_in_oslo([PARIS_AND_OSLO], stream)
    assert upstream.calls == 1 and out.meta is not None
    assert any(
        "dropped get_weather: repeated from an earlier question" in w for w in out.meta.warnings
    )


async def test_a_failed_repeat_beside_a_new_call_is_not_dropped() -> None:
    """A repeat whose result was an error may be the retry the new question asks for."""
    upstream = FakeUpstream([PARIS_AND_OSLO, "No weather data."])
    engine = Engine(upstream, mode="force", registry=":memory:")
    body = answered(result=False)
    body["messages"] += [
        {"role": "tool", "tool_call_id": "c1", "content": "Error: no weather data"},
        {"role": "assistant", "content": "Paris failed."},
        {"role": "user", "content": "Try Paris again, and Oslo too."},
    ]
    await serve(engine, body, False)
    reask = upstream.history[1]["messages"][-1]["content"]  # re-asked, as before
    assert 'you already called get_weather({"city": "Paris"}) for an earlier question' in reask


async def test_a_repeated_call_that_failed_is_reasked_to_fix_the_cause_not_to_answer() -> None:
    """BFCL's file system: the 0.5B repeated a failed cat() where a cd() first would fix it."""
    again = '{"tool_calls": [{"name": "get_weather", "arguments": {"city":"Paris"}}]}'
    upstream = FakeUpstream([again, "Paris has no weather data."])
    engine = Engine(upstream, mode="force", registry=":memory:")
    body = answered('{ "city" : "Paris" }', result=False, question=AND_ROME)  # (Rome: to try)
    body["messages"].append(
        {"role": "tool", "tool_call_id": "c1", "content": "Error: no weather data for 'Paris'"}
    )
    out = await serve(engine, body, False)
    reask = upstream.history[1]["messages"][-1]["content"]
    assert 'you already called get_weather({"city": "Paris"}) and it failed' in reask
    assert "change its arguments, or first make the call that fixes" in reask
    assert "answer the user's question with this result" not in reask
    assert out.content == "Paris has no weather data."


@pytest.mark.parametrize("stream", [False, True])
async def test_a_failed_repeat_with_nothing_left_to_try_is_answered_at_once(stream: bool) -> None:
    """The request holds nothing no call took: told its call failed, the 0.5B wrote it again
    in each of its tool-error tasks. The answer is asked for without tools at once."""
    again = '{"tool_calls": [{"name": "get_weather", "arguments": {"city":"Paris"}}]}'
    upstream = FakeUpstream([again, "There is no weather data for Paris."])
    engine = Engine(upstream, mode="force", registry=":memory:")
    body = answered(result=False)
    failed = {"role": "tool", "tool_call_id": "c1", "content": "Error: no weather data"}
    body["messages"].append(failed)
    out = await serve(engine, body, stream)
    assert out.content == "There is no weather data for Paris." and upstream.calls == 2
    assert "Tell the user, in plain words, what failed" in str(upstream.history[1]["messages"])
    assert out.meta is not None
    assert any("nothing else to try" in w for w in out.meta.warnings)


@pytest.mark.parametrize("stream", [False, True])
async def test_a_second_repeat_is_answered_from_the_results_without_tools(stream: bool) -> None:
    """A repeat of a call that failed is re-asked once (the fix may be another call); written
    again, the answer is asked for from the results."""
    again = '{"tool_calls": [{"name": "get_weather", "arguments": {"city":"Paris"}}]}'
    upstream = FakeUpstream([again, again, "18 degrees in Paris."])
    engine = Engine(upstream, mode="force", registry=":memory:")
    body = answered(result=False, question=AND_ROME)
    failed = {"role": "tool", "tool_call_id": "c1", "content": "Error: station down, try later"}
    body["messages"].append(failed)
    out = await serve(engine, body, stream)
    assert out.calls == {} and out.content == "18 degrees in Paris."
    assert upstream.calls == 3
    last = upstream.history[2]["messages"]
    assert "get_weather" not in last[0]["content"] or last[0]["role"] != "system"
    folded = last[-1]["content"]
    assert folded.startswith(AND_ROME)
    assert 'You called get_weather(city="Paris"); it returned:' in folded
    assert "Tell the user, in plain words, what failed" in folded
    assert out.meta is not None
    assert any("answered from the results without tools" in w for w in out.meta.warnings)


@pytest.mark.parametrize("stream", [False, True])
async def test_a_repeat_under_a_forced_choice_is_returned_with_a_warning(stream: bool) -> None:
    again = '{"tool_calls": [{"name": "get_weather", "arguments": {"city":"Paris"}}]}'
    upstream = FakeUpstream([again])
    engine = Engine(upstream, mode="force", registry=":memory:")
    out = await serve(
        engine, {**answered('{ "city" : "Paris" }'), "tool_choice": "required"}, stream
    )
    assert [c["name"] for c in out.calls.values()] == ["get_weather"]
    assert upstream.calls == 1 and out.meta is not None and out.meta.reasks == 0
    assert repeat_warnings(out) == [
        'repeats get_weather({"city": "Paris"}) whose result is already in the conversation'
    ]
    assert "tool calls emulated" in out.meta.warnings


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("mode", ["auto", "off"])
async def test_a_native_repeat_is_flagged_too(stream: bool, mode: str) -> None:
    upstream = FakeUpstream([Reply(None, [call("get_weather", {"city": "Paris"})])])
    engine = Engine(upstream, mode=mode, registry=":memory:")
    out = await serve(engine, answered(), stream)
    assert len(out.calls) == 1 and upstream.calls == 1
    assert len(repeat_warnings(out)) == 1


@pytest.mark.parametrize("stream", [False, True])
async def test_other_arguments_or_an_unanswered_call_are_no_repeat(stream: bool) -> None:
    upstream = FakeUpstream([Reply(None, [call("get_weather", {"city": "Rome"})])] * 2)
    engine = Engine(upstream, mode="auto", registry=":memory:")
    assert repeat_warnings(await serve(engine, answered(), stream)) == []
    upstream.enqueue(Reply(None, [call("get_weather", {"city": "Paris"})]))
    upstream.queue = upstream.queue[-1:]
    assert repeat_warnings(await serve(engine, answered(result=False), stream)) == []
