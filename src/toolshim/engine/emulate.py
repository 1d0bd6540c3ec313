"""Emulated tool calling, non-streaming: the request bodies, reading replies, the whole-reply path.

``single`` sends one request whose system prompt describes the tools; the reply is a call or
an answer. ``decision`` sends a JSON-only decision request, then, when no tool is needed, a
final request without tools. What follows each reply (re-ask with a precise correction, at
most ``max_reasks`` times; return; degrade) is the :mod:`.driver`'s; the streamed path
(:mod:`.streaming`) drives the same driver. Tool results and earlier calls stay in the
history as text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from typing import Any, assert_never

import toolshim.engine.confidence as confidence
import toolshim.engine.driver as steps
from toolshim.dialects.base import rendered_tools
from toolshim.dialects.extract import ParsedReply
from toolshim.dialects.interpret import ParsedCall
from toolshim.engine.answer_first import STEP_WARNING as ANSWER_FIRST_STEP_WARNING
from toolshim.engine.answer_first import WARNING as ANSWER_FIRST_WARNING
from toolshim.engine.answer_first import answers_first, nothing_more_asked
from toolshim.engine.checks import run_checks
from toolshim.engine.checks.repeats_in_reply import repeat_stops
from toolshim.engine.focus import condense_tools
from toolshim.engine.history import fold_results, rewrite_history
from toolshim.engine.markup import defused_results, defused_tools
from toolshim.engine.more_calls import more_calls
from toolshim.engine.next_step import (
    next_step,
    planned_first,
    step_before_giving_up,
    written_instead,
)
from toolshim.engine.nocalls import answer_without_calls, first_answer
from toolshim.engine.turn import Turn, emulated_id
from toolshim.engine.unoffered import drop_unoffered
from toolshim.engine.validate import Verdict
from toolshim.errors import InvalidRequestError
from toolshim.types import ChatRequest, Completion, Message, ToolCall, ToolSpec

__all__ = [
    "check",
    "emulate",
    "emulation_request",
    "finished_calls",
    "judge",
    "refuse_several_choices",
    "stop_sequences",
    "tool_call_message",
    "well_formed",
    "whole_attempt",
]

_STREAM_ONLY = ("stream", "stream_options")
_LENGTH_KEYS = ("max_tokens", "max_completion_tokens")
_MAX_STOPS = 4
"""OpenAI accepts at most four stop sequences; the caller's own come first."""


def emulation_request(
    turn: Turn, extra: Sequence[Message] = (), *, instructions: bool = True, stream: bool = False
) -> ChatRequest:
    """The upstream request for an emulated request: tools in the prompt, history as text."""
    request = turn.request
    tools = request.function_tools
    text = None
    if instructions and request.wants_tools and tools:
        text = _described(turn, tools)
    said = defused_results(request.messages)  # a result cannot close or open the prompt's tags
    if text is None and turn.results_in:
        # An answer from the results. A coding agent's prompt keeps its tools in it (the
        # note says to answer without a call): its turn's earlier requests began the same
        # way, so llama.cpp's cache serves all but the note; without them, the 0.5B's last
        # request of a Codex task was processed afresh from its 900th character. Asked
        # again after a reply that was only a call (``extra``), the tools are left out: with
        # them still described, the 0.5B wrote the call again and its text was the answer.
        kept = (
            _described(turn, tools)
            if turn.one_step and request.wants_tools and tools and not extra
            else None
        )
        history = fold_results(said, turn.dialect, kept, agent=turn.one_step, answer=True)
    else:
        history = rewrite_history(said, turn.dialect, text, agent=turn.one_step)
    messages = (*history, *extra)
    params = dict(request.params)
    if not stream:
        for key in _STREAM_ONLY:
            params.pop(key, None)
    if turn.default_max_tokens is not None and not any(k in params for k in _LENGTH_KEYS):
        params["max_tokens"] = turn.default_max_tokens
    if turn.one_step and step_limit(params):
        turn.warn(f"max_tokens lowered to {STEP_MAX_TOKENS} for a small model's step")
    if text is not None:
        ends = (*turn.dialect.stop_sequences, *repeat_stops(turn))
        if ends:
            params["stop"] = stop_sequences(params.get("stop"), ends)
    if text is not None and confidence.judged(turn, first_attempt=not extra):
        confidence.logprob_params(params)
    if text is not None:
        # The caller's response_format is for the answer, not for the tool decision: held to
        # it, the model could not write a call. It applies to the answer asked for afterwards.
        params.pop("response_format", None)
        if turn.constrained:
            response_format = turn.dialect.response_format(tools, turn.prompt_options)
            if response_format is not None:
                params["response_format"] = dict(response_format)
    return replace(request, messages=messages, stream=stream, params=params).without_tools()


def _described(turn: Turn, tools: Sequence[ToolSpec]) -> str:
    """The tool instructions of the turn's prompt (the tools condensed for a small model)."""
    compact, one_step = turn.compact, turn.one_step

    def shown(given: Sequence[ToolSpec]) -> Sequence[ToolSpec]:
        return defused_tools(condense_tools(given, required_only=one_step) if compact else given)

    return rendered_tools(
        turn.dialect,
        tools,
        turn.prompt_options,
        prepare=shown,
        variant=(compact, one_step and compact),
    )


STEP_MAX_TOKENS = 1024
"""A coding agent's step on a small model writes at most this many tokens (as an emulated
request that sets none): Claude Code asks for 32,000, and a 1.5B that loops on its own output
then held a task for its whole time budget; at 4,096 it still held one for 15 minutes."""


def step_limit(params: dict[str, Any]) -> bool:
    """Lower a coding agent's output limit to :data:`STEP_MAX_TOKENS` (the caller's, if lower,
    stands); whether it was lowered."""
    lowered = False
    for key in _LENGTH_KEYS:
        value = params.get(key)
        if isinstance(value, int) and value > STEP_MAX_TOKENS:
            params[key] = STEP_MAX_TOKENS
            lowered = True
    return lowered


def stop_sequences(caller: Any, dialect: Sequence[str]) -> list[str]:
    """The caller's ``stop`` (a string or a list) followed by the dialect's, at most four."""
    if isinstance(caller, str):
        own = [caller]
    elif isinstance(caller, list):
        own = [s for s in caller if isinstance(s, str)]
    else:
        own = []
    return list(dict.fromkeys([*own, *dialect]))[:_MAX_STOPS]


def tool_call_message(calls: Sequence[ParsedCall]) -> Message:
    return Message(
        "assistant",
        None,
        tool_calls=tuple(
            ToolCall(emulated_id(i), c.name, c.arguments_json) for i, c in enumerate(calls)
        ),
    )


def check(
    turn: Turn, calls: Sequence[ParsedCall], finish: str | None = None, *, native: bool = False
) -> Verdict:
    """Check parsed calls against the turn's tools, tool_choice and the dialect's limits: the
    checks of :mod:`toolshim.engine.checks`, in their order (a ``native`` reply is held to the
    request's rules only, not to the dialect's)."""
    return run_checks(turn, calls, finish, native=native)


def judge(turn: Turn, text: str, finish: str | None = None) -> tuple[ParsedReply, Verdict]:
    """Parse a reply and check it against the tools and the tool_choice."""
    parsed = turn.dialect.parse(text, turn.request.function_tools, markup=turn.markup)
    return parsed, check(turn, parsed.calls, finish)


def _with_choice(
    completion: Completion, index: int, message: Message, finish: str | None
) -> Completion:
    choices = list(completion.choices)
    choices[index] = replace(choices[index], message=message, finish_reason=finish)
    return replace(completion, choices=tuple(choices))


def _answer(message: Message, text: str) -> Message:
    return Message("assistant", text, extra=message.extra)


def whole_attempt(turn: Turn, completion: Completion, *, opening: bool = False) -> steps.Attempt:
    """A whole reply (its first choice) read as an attempt: every ``decision`` request, and
    ``single`` when not streamed. ``opening``: the reply's opening is judged
    (:func:`.confidence.judged`)."""
    parsed, verdict = judge(turn, completion.message.text, completion.finish_reason)
    finish = completion.finish_reason
    unsure = None
    if opening and completion.choices:
        logprobs = completion.choices[0].extra.get("logprobs")
        unsure = confidence.doubt(confidence.logprob_tokens(logprobs))
    return steps.Attempt(
        problems=verdict.problems,
        calls=verdict.calls,
        prose=parsed.text.strip(),
        declined=parsed.declined,
        finish=finish,
        truncated=finish == "length" and turn.trimmed_reply is None,
        answer_now=turn.answer_now,
        reply=turn.trimmed_reply or completion.message.text,
        unsure=unsure,
        formed=well_formed(parsed.calls),
    )


TAKEN_WARNING = (
    "asked for its answer without tools after the re-asks, the model wrote a call that passes "
    "the checks; returned as that call"
)


def taken_calls(turn: Turn) -> tuple[ParsedCall, ...]:
    """The calls the model wrote when its answer was asked for without tools after the re-asks
    for unusable calls were spent (:attr:`.driver.AnswerWithoutTools.take_calls`), when they
    pass every check; empty otherwise. The 1.5B, asked in BFCL's ``multi_turn_base_17`` to
    "cd into project folder", wrote ``[cd(project); find(kelly's test report)]`` three times;
    asked for its answer, it wrote ``[cd(project)]``, which was returned to the caller as the
    answer's text."""
    wanted, turn.wanted = turn.wanted, ()
    if not wanted:
        return ()
    verdict = check(turn, wanted)
    if verdict.problems or not verdict.calls:
        return ()
    turn.warn(TAKEN_WARNING)
    return verdict.calls


def well_formed(calls: Sequence[ParsedCall]) -> bool:
    """Whether a reply made calls and each was read whole (:attr:`.driver.Attempt.formed`)."""
    return bool(calls) and all(call.problem is None for call in calls)


def refuse_several_choices(turn: Turn) -> None:
    """``n`` > 1 with tools is a 400 when the calls are emulated: each choice would need its
    own checks and re-asks, and a choice that failed them was sent as an empty answer."""
    n = turn.request.params.get("n")
    if turn.request.wants_tools and isinstance(n, int) and not isinstance(n, bool) and n > 1:
        raise InvalidRequestError(
            f"n={n} is not supported when tool calls are emulated (this model gets no native "
            "tools): send n=1, or one request per answer you want",
            param="n",
        )


async def finished_calls(
    turn: Turn, calls: Sequence[ParsedCall], extra: Sequence[Message]
) -> tuple[ParsedCall, ...]:
    """The calls an emulated step returns, whole or streamed: ``calls`` with the further ones
    the continued reply brings (:func:`~toolshim.engine.more_calls.more_calls`), then a file's
    text printed instead of written made a write
    (:func:`~toolshim.engine.next_step.written_instead`). ``extra`` are the driver's messages."""
    body = partial(emulation_request, turn)
    return await written_instead(turn, await more_calls(turn, calls, extra, body), extra, body)


async def emulate(turn: Turn) -> Completion:
    """Serve the turn by emulation (the caller decided that native tools are not used): each
    reply read into an attempt, the next step from the turn's :class:`.driver.TurnDriver`."""
    refuse_several_choices(turn)
    turn.mark_emulated()
    if not turn.request.wants_tools:
        return await answer_without_calls(turn, partial(emulation_request, turn))
    turn.nothing_asked = nothing_more_asked(turn)
    if answers_first(turn):
        answered = await first_answer(turn, partial(emulation_request, turn, instructions=False))
        if answered is not None:
            turn.warn(ANSWER_FIRST_WARNING)
            return answered
        turn.warn(ANSWER_FIRST_STEP_WARNING)
    first = await planned_first(turn, partial(emulation_request, turn))
    if first is not None:
        return _with_choice(first[1], 0, tool_call_message([first[0]]), "tool_calls")
    driver = steps.driver_for(turn)
    while True:
        opening = confidence.judged(turn, first_attempt=not driver.messages)
        completion = await turn.call(emulation_request(turn, driver.messages))
        completion = drop_unoffered(turn, completion, offered=())  # it was sent no tools
        attempt = whole_attempt(turn, completion, opening=opening)
        if opening and not turn.request.params.get("logprobs"):
            completion = _without_logprobs(completion)  # asked for by toolshim, not the caller
        if not driver.decision:
            completion = _settle_others(turn, completion)
        match steps.advance(turn, driver, attempt):
            case steps.Reask():
                continue
            case steps.ReturnCalls(calls=calls):
                calls = await finished_calls(turn, calls, driver.messages)
                return _with_choice(completion, 0, tool_call_message(calls), "tool_calls")
            case steps.ReturnText(text=text, finish=finish):
                return _with_choice(completion, 0, _answer(completion.message, text), finish)
            case steps.NextStep(text=text, finish=finish):
                step = await next_step(
                    turn, driver.messages, partial(emulation_request, turn), text
                )
                if step is not None:
                    return _with_choice(completion, 0, tool_call_message([step]), "tool_calls")
                if driver.silent_on_failure(text, finish):
                    turn.warn(steps.UNREPORTED_WARNING)
                    return await answer_without_calls(
                        turn, partial(emulation_request, turn, instructions=False)
                    )
                return _with_choice(completion, 0, _answer(completion.message, text), finish)
            case steps.CutOff(text=text):
                return _with_choice(completion, 0, _answer(completion.message, text), "length")
            case steps.AnswerWithoutTools(empty=empty, take_calls=take):
                step = await step_before_giving_up(
                    turn, driver.messages, partial(emulation_request, turn), attempt.prose, empty
                )
                if step is not None:
                    return _with_choice(completion, 0, tool_call_message([step]), "tool_calls")
                body = partial(emulation_request, turn, instructions=False)
                if take:
                    answered = await first_answer(turn, body)
                    if answered is not None:
                        return answered
                    if taken := taken_calls(turn):
                        return _with_choice(completion, 0, tool_call_message(taken), "tool_calls")
                return await answer_without_calls(turn, body)
            case steps.GiveUp(error=error):
                raise error
            case step:
                assert_never(step)


def _without_logprobs(completion: Completion) -> Completion:
    """The completion without its choices' ``logprobs``."""
    choices = tuple(
        replace(c, extra={k: v for k, v in c.extra.items() if k != "logprobs"})
        if "logprobs" in c.extra
        else c
        for c in completion.choices
    )
    return replace(completion, choices=choices)


def _settle_others(turn: Turn, completion: Completion) -> Completion:
    """Each further choice (``n`` > 1) as its calls or its prose (a broken call is never sent
    as text); the first one is the driver's."""
    if len(completion.choices) < 2:
        return completion
    choices = list(completion.choices)
    for position, choice in enumerate(choices[1:], 1):
        parsed, verdict = judge(turn, choice.message.text, choice.finish_reason)
        if verdict.ok and verdict.calls:
            choice = replace(choice, message=tool_call_message(verdict.calls))
            choices[position] = replace(choice, finish_reason="tool_calls")
        else:
            choices[position] = replace(
                choice, message=_answer(choice.message, parsed.text.strip())
            )
    return replace(completion, choices=tuple(choices))
