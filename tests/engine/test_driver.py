"""The turn driver alone (no I/O): attempts in, steps out; streamed and whole replies agree."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.engine.helpers import request
from toolshim.dialects.interpret import ParsedCall
from toolshim.engine import Engine
from toolshim.engine.driver import (
    FORMAT_WARNING,
    AnswerWithoutTools,
    Attempt,
    CutOff,
    GiveUp,
    Reask,
    ReturnCalls,
    ReturnText,
    Step,
    TurnDriver,
)
from toolshim.errors import ToolCallError
from toolshim.testing import FakeUpstream, Reply
from toolshim.types import Message

CALL = ParsedCall("get_weather", {"city": "Paris"})
BROKEN = ("'get_weather' needs 'city'",)


def correction(problems: Sequence[str]) -> str:
    return "fix: " + "; ".join(problems)


def driver(**options: object) -> TurnDriver:
    return TurnDriver(correction=correction, **{"max_reasks": 2, **options})  # type: ignore[arg-type]


def invalid(**fields: object) -> Attempt:
    return Attempt(problems=BROKEN, reply="{broken}", **fields)  # type: ignore[arg-type]


def test_valid_calls_are_returned() -> None:
    assert driver().feed(Attempt(calls=(CALL,))) == ReturnCalls((CALL,))


def test_text_is_returned_with_its_finish_reason() -> None:
    step = driver().feed(Attempt(prose="It is sunny.", finish="stop"))
    assert step == ReturnText("It is sunny.", "stop")


@pytest.mark.parametrize(
    ("options", "attempt", "expected"),
    [
        ({"decision": True}, Attempt(prose="no tool needed"), AnswerWithoutTools()),
        ({"formatted": True}, Attempt(prose="{}"), AnswerWithoutTools(FORMAT_WARNING)),
        ({}, Attempt(declined=True, prose="  "), AnswerWithoutTools()),
        ({}, Attempt(declined=True, sent="Sure."), ReturnText("", None)),
        ({}, Attempt(calls=(CALL,), answer_now=True), AnswerWithoutTools()),
    ],
)
def test_a_reply_without_calls_may_be_answered_again_without_tools(
    options: dict[str, object], attempt: Attempt, expected: Step
) -> None:
    assert driver(**options).feed(attempt) == expected


def test_an_invalid_reply_is_reasked_with_the_correction_and_the_reply() -> None:
    turn = driver()
    step = turn.feed(invalid(sent="Let me check."))
    expected = (Message("assistant", "{broken}"), Message("user", "fix: " + BROKEN[0]))
    assert step == Reask(expected)
    assert turn.reasks == 1 and turn.streamed == "Let me check." and turn.hold_text
    assert turn.feed(invalid()) == Reask(expected * 2)
    assert turn.messages == expected * 2


def test_a_reply_cut_by_max_tokens_is_not_reasked() -> None:
    turn = driver()
    step = turn.feed(invalid(prose="Partial", truncated=True, finish="length"))
    assert isinstance(step, CutOff) and step.text == "Partial"
    assert step.warning.startswith("the reply was cut off by max_tokens") and turn.reasks == 0


def test_a_forced_choice_gives_up_with_a_tool_call_error() -> None:
    turn = driver(forced=True, max_reasks=1)
    assert isinstance(turn.feed(invalid()), Reask)
    step = turn.feed(invalid(prose="I cannot."))
    assert isinstance(step, GiveUp) and isinstance(step.error, ToolCallError)
    assert step.error.attempts == 2 and step.error.problems == BROKEN
    assert str(step.error).startswith("the model did not make a valid tool call after 1 re-ask(s)")


@pytest.mark.parametrize(
    ("options", "attempt", "kind", "warning"),
    [
        ({}, invalid(prose="Paris is sunny."), ReturnText, "returned the text answer"),
        ({}, invalid(), AnswerWithoutTools, "answered without tools"),
        ({"formatted": True}, invalid(prose="x"), AnswerWithoutTools, "answered without tools"),
        ({"decision": True}, invalid(prose="x"), AnswerWithoutTools, "answered without tools"),
    ],
)
def test_auto_degrades_when_the_reasks_are_spent(
    options: dict[str, object], attempt: Attempt, kind: type, warning: str
) -> None:
    step = driver(max_reasks=0, **options).feed(attempt)
    assert isinstance(step, kind)
    assert isinstance(step, ReturnText | AnswerWithoutTools) and step.warning is not None
    assert step.warning.startswith(f"no valid tool call after 0 re-ask(s), {warning}: ")


def test_prose_streamed_before_a_reask_is_the_answer_and_never_followed_by_another() -> None:
    turn = driver(max_reasks=1)
    assert isinstance(turn.feed(invalid(sent="Checking.")), Reask)
    step = turn.feed(invalid(prose="A second answer."))
    assert isinstance(step, ReturnText) and step.text == ""
    cut = driver(max_reasks=1)
    cut.feed(invalid(sent="Checking."))
    step = cut.feed(invalid(prose="Another.", truncated=True))
    assert isinstance(step, CutOff) and step.text == ""


def test_the_reask_count_starts_from_the_turns_own() -> None:
    turn = driver(max_reasks=1, reasks=1)
    assert turn.hold_text
    step = turn.feed(invalid(prose="So."))
    assert (
        isinstance(step, ReturnText)
        and step.warning is not None
        and "after 1 re-ask" in step.warning
    )


# Random turns: a whole reply and the same reply streamed (its prose partly sent as it came,
# unless the driver holds it) reach the same steps.


@dataclass(frozen=True)
class ModelReply:
    valid: bool
    with_calls: bool
    prose: str
    declined: bool
    truncated: bool
    answer_now: bool
    split: int
    """Where the streamed path had sent the prose up to (when it was not held)."""


replies = st.builds(
    ModelReply,
    valid=st.booleans(),
    with_calls=st.booleans(),
    prose=st.sampled_from(["", " ", "Sunny.", " It is 20 C. ", "\n"]),
    declined=st.booleans(),
    truncated=st.booleans(),
    answer_now=st.integers(0, 9).map(lambda n: n == 0),
    split=st.integers(0, 20),
)


def attempt(reply: ModelReply, *, streamed: bool, hold: bool) -> Attempt:
    sent, prose = "", reply.prose.strip()
    if streamed:
        cut = 0 if hold else min(reply.split, len(reply.prose))
        sent, prose = reply.prose[:cut], reply.prose[cut:]
    return Attempt(
        problems=() if reply.valid else BROKEN,
        calls=(CALL,) if reply.valid and reply.with_calls else (),
        prose=prose,
        sent=sent,
        declined=reply.declined,
        finish="length" if reply.truncated else "stop",
        truncated=reply.truncated and not reply.valid,
        answer_now=reply.answer_now,
        reply="{broken}",
    )


def run(
    config: dict[str, object], turn: Sequence[ModelReply], *, streamed: bool
) -> tuple[TurnDriver, Step, str]:
    """The driver, its last step, and all the prose sent before that step's text."""
    machine = driver(**config)
    ceiling = max(machine.max_reasks, machine.reasks)
    for reply in turn:
        fed = attempt(reply, streamed=streamed, hold=machine.hold_text or machine.decision)
        before = machine.streamed
        step = machine.feed(fed)
        assert machine.reasks <= ceiling
        if not isinstance(step, Reask):
            return machine, step, before + fed.sent
    raise AssertionError(f"no last step after {len(turn)} attempts")


def visible(step: Step, sent: str) -> str:
    text = step.text if isinstance(step, ReturnText | CutOff) else ""
    return (sent + text).strip()


@settings(max_examples=300, deadline=None)
@given(
    max_reasks=st.integers(0, 3),
    reasks=st.integers(0, 1),
    forced=st.booleans(),
    formatted=st.booleans(),
    decision=st.booleans(),
    turn=st.lists(replies, min_size=5, max_size=5),
)
def test_streamed_and_whole_replies_reach_the_same_last_step(
    max_reasks: int,
    reasks: int,
    forced: bool,
    formatted: bool,
    decision: bool,
    turn: list[ModelReply],
) -> None:
    config: dict[str, object] = {
        "max_reasks": max_reasks,
        "reasks": reasks,
        "forced": forced,
        "formatted": formatted,
        "decision": decision,
    }
    whole, whole_step, _ = run(config, turn, streamed=False)
    stream, stream_step, sent = run(config, turn, streamed=True)
    assert whole.reasks == stream.reasks <= max(max_reasks, reasks)
    assert whole.messages == stream.messages
    if not stream.streamed:
        # Nothing went out before the last attempt: the very same step, the text split aside
        # (before a call or an answer asked for anew, the prose already sent stays sent).
        assert type(whole_step) is type(stream_step)
        if isinstance(whole_step, ReturnText | CutOff):
            assert visible(whole_step, "") == visible(stream_step, sent)
        for field in ("warning", "finish", "calls"):
            assert getattr(whole_step, field, None) == getattr(stream_step, field, None)
        if isinstance(whole_step, GiveUp) and isinstance(stream_step, GiveUp):
            assert str(whole_step.error) == str(stream_step.error)
        return
    # Prose went out in the first attempt: it is the answer, never taken back or doubled.
    assert not (forced or formatted or decision)
    if isinstance(stream_step, CutOff) or (
        isinstance(stream_step, ReturnText) and stream_step.warning is not None
    ):
        assert stream_step.text == ""
        if isinstance(whole_step, AnswerWithoutTools):
            assert whole_step.warning is not None and stream_step.warning is not None
            assert stream_step.warning.startswith(
                whole_step.warning.split(", answered without tools")[0]
            )
            return
    assert type(whole_step) is type(stream_step)
    assert getattr(whole_step, "warning", None) == getattr(stream_step, "warning", None)


# Through the engine: the decision strategy reads its JSON decision whole in both paths, so
# streamed and not, a decision cut by max_tokens ends the same way.


@pytest.mark.parametrize("max_reasks", [0, 2])
@pytest.mark.parametrize("stream", [False, True])
async def test_a_decision_cut_by_max_tokens_ends_alike_streamed_or_not(
    stream: bool, max_reasks: int
) -> None:
    cut = Reply(
        'Checking first. {"tool_calls": [{"name": "get_weather", "arguments": {"ci',
        finish_reason="length",
    )
    upstream = FakeUpstream([cut, "It is sunny."])
    engine = Engine(
        upstream, mode="force", strategy="decision", max_reasks=max_reasks, registry=":memory:"
    )
    if stream:
        chunks = [c async for c in engine.astream(request(stream=True, max_tokens=20))]
        text = "".join(c.content or "" for c in chunks)
        finish: str | None = next(c.finish_reason for c in reversed(chunks) if c.finish_reason)
        meta = chunks[-1].meta
    else:
        completion = await engine.acomplete(request(max_tokens=20))
        text, finish, meta = completion.message.text, completion.finish_reason, completion.meta
    assert (text, finish, upstream.calls) == ("Checking first.", "length", 1)
    assert meta is not None and any("cut off by max_tokens" in w for w in meta.warnings)
