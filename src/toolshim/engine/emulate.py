"""Emulated tool calling, non-streaming: the ``single`` and ``decision`` strategies, re-asks, rescue.

``single`` sends one request whose system prompt describes the tools; the reply is a call or
an answer. ``decision`` follows seed 001: a JSON-only decision request, then, when no tool
is needed, a final request without tools. Both re-ask the model with a precise correction
when a call is invalid (at most ``max_reasks`` times). Tool results and earlier calls stay in
the history as text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from toolshim.dialects.base import rendered_tools
from toolshim.dialects.extract import ParsedReply
from toolshim.dialects.interpret import ParsedCall
from toolshim.engine.call_checks import (
    drop_repeats_in_reply,
    extra_argument_problems,
    placeholder_problems,
    repeat_problems,
    repeat_stops,
)
from toolshim.engine.history import fold_results, rewrite_history
from toolshim.engine.nocalls import answer_without_calls
from toolshim.engine.turn import Turn, emulated_id
from toolshim.engine.validate import Verdict, reask_message, validate_calls
from toolshim.errors import ToolCallError
from toolshim.types import Choice, Completion, Message, ToolCall
from toolshim.wire.openai import request_to_body

__all__ = [
    "cut_off",
    "emulate",
    "emulation_body",
    "stop_sequences",
    "tool_call_message",
]

_STREAM_ONLY = ("stream", "stream_options")
_LENGTH_KEYS = ("max_tokens", "max_completion_tokens")
_MAX_STOPS = 4
"""OpenAI accepts at most four stop sequences; the caller's own come first."""
FORMAT_WARNING = "answered again without tools, in the caller's response_format"


def emulation_body(
    turn: Turn, extra: Sequence[Message] = (), *, instructions: bool = True, stream: bool = False
) -> dict[str, Any]:
    """The upstream body for an emulated request: tools in the prompt, history as text."""
    request = turn.request
    tools = request.function_tools
    text = None
    if instructions and request.wants_tools and tools:
        text = rendered_tools(turn.dialect, tools, turn.prompt_options)
    if text is None and turn.results_in:
        history = fold_results(request.messages, turn.dialect)  # an answer from the results
    else:
        history = rewrite_history(request.messages, turn.dialect, text)
    messages = (*history, *extra)
    params = dict(request.params)
    if not stream:
        for key in _STREAM_ONLY:
            params.pop(key, None)
    if turn.default_max_tokens is not None and not any(k in params for k in _LENGTH_KEYS):
        params["max_tokens"] = turn.default_max_tokens
    if text is not None:
        ends = (*turn.dialect.stop_sequences, *repeat_stops(turn))
        if ends:
            params["stop"] = stop_sequences(params.get("stop"), ends)
    if text is not None:
        # The caller's response_format is for the answer, not for the tool decision: held to
        # it, the model could not write a call. It applies to the answer asked for afterwards.
        params.pop("response_format", None)
        if turn.constrained:
            response_format = turn.dialect.response_format(tools, turn.prompt_options)
            if response_format is not None:
                params["response_format"] = dict(response_format)
    body = request_to_body(
        replace(request, messages=messages, stream=stream, params=params), tools=False
    )
    return body


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
    """Check parsed calls against the turn's tools, tool_choice and the dialect's limits (a
    ``native`` reply is held to the request's rules only, not to the dialect's)."""
    request = turn.request
    calls, finish = drop_repeats_in_reply(turn, calls, finish)
    verdict = validate_calls(
        calls,
        request.function_tools,
        request.choice,
        parallel=request.allows_parallel,
        max_calls=None if native else turn.dialect.max_calls,
        truncated=finish == "length",
    )
    for warning in verdict.warnings:
        turn.warn(warning)
    if native or not verdict.ok or not verdict.calls:
        return verdict
    problems = extra_argument_problems(verdict.calls, request.function_tools)
    problems += placeholder_problems(verdict.calls, request.function_tools)
    if not problems:
        problems += repeat_problems(turn, verdict.calls)
    if problems:
        return replace(verdict, problems=tuple(problems))
    return verdict


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


async def emulate(turn: Turn) -> Completion:
    """Serve the turn by emulation (the caller decided that native tools are not used)."""
    turn.mark_emulated()
    if not turn.request.wants_tools:
        return await answer_without_calls(turn, partial(emulation_body, turn))
    if turn.strategy.value == "decision":
        return await _decision(turn)
    return await _single(turn)


async def _answer_without_tools(turn: Turn) -> Completion:
    """The answer asked for without tool instructions (no call JSON is returned as it)."""
    return await answer_without_calls(turn, partial(emulation_body, turn, instructions=False))


async def _single(turn: Turn) -> Completion:
    extra: list[Message] = []
    while True:
        completion = await turn.call(emulation_body(turn, extra))
        result, problems, parsed = _settle_choices(turn, completion)
        if turn.answer_now:
            return await _answer_without_tools(turn)
        if not problems:
            answered = not result.tool_calls
            if answered and turn.caller_format is not None:
                turn.warn(FORMAT_WARNING)
                return await _answer_without_tools(turn)
            if answered and parsed is not None and parsed.declined and not parsed.text.strip():
                # The model declined without answering: ask for the answer without tools.
                return await _answer_without_tools(turn)
            return result
        if completion.finish_reason == "length" and turn.trimmed_reply is None:
            return cut_off(turn, completion, problems, parsed)
        if turn.reasks >= turn.max_reasks:
            return await _give_up(turn, completion, problems, parsed)
        turn.reasks += 1
        extra += _reask(turn, turn.trimmed_reply or completion.message.text, problems)


def _settle_choices(
    turn: Turn, completion: Completion
) -> tuple[Completion, tuple[str, ...], ParsedReply | None]:
    """Turn each choice's text into calls or an answer; return choice 0's problems."""
    first_problems: tuple[str, ...] = ()
    first_parsed: ParsedReply | None = None
    for choice in completion.choices:
        parsed, verdict = judge(turn, choice.message.text, choice.finish_reason)
        if choice.index == completion.choices[0].index:
            first_problems, first_parsed = verdict.problems, parsed
        if verdict.ok and verdict.calls:
            completion = _with_choice(
                completion,
                _position(completion, choice),
                tool_call_message(verdict.calls),
                "tool_calls",
            )
        elif verdict.ok or choice.index != completion.choices[0].index:
            # A text answer: its prose (a further choice's broken call is never sent as text).
            text = parsed.text.strip()
            completion = _with_choice(
                completion,
                _position(completion, choice),
                _answer(choice.message, text),
                choice.finish_reason,
            )
    return completion, first_problems, first_parsed


def _position(completion: Completion, choice: Choice) -> int:
    return next(
        i for i, c in enumerate(completion.choices) if c is choice or c.index == choice.index
    )


def _reask(turn: Turn, reply: str, problems: Sequence[str]) -> list[Message]:
    correction = reask_message(
        problems, turn.request.function_tools, turn.dialect, turn.prompt_options
    )
    return [Message("assistant", reply), Message("user", correction)]


def cut_off(
    turn: Turn, completion: Completion, problems: Sequence[str], parsed: ParsedReply | None
) -> Completion:
    """The reply hit ``max_tokens`` before its call was complete: re-asking under the same
    limit would only cut again, so the text comes back with ``finish_reason: "length"``."""
    turn.warn(
        "the reply was cut off by max_tokens before a valid tool call was complete: "
        + "; ".join(problems)
    )
    text = parsed.text.strip() if parsed else ""
    return _with_choice(completion, 0, _answer(completion.message, text), "length")


def give_up_error(turn: Turn, problems: Sequence[str]) -> ToolCallError:
    return ToolCallError(
        f"the model did not make a valid tool call after {turn.reasks} re-ask(s): "
        + "; ".join(problems),
        problems=problems,
        attempts=turn.reasks + 1,
    )


async def _give_up(
    turn: Turn, completion: Completion, problems: Sequence[str], parsed: ParsedReply | None
) -> Completion:
    """Re-asks are spent. A forced tool_choice fails; ``auto`` degrades to a text answer: the
    reply's prose, or, when the reply was nothing but a broken call, an answer asked for
    without tools (never the broken call's JSON as content)."""
    if turn.request.choice.kind != "auto":
        raise give_up_error(turn, problems)
    summary = "; ".join(problems)
    prose = parsed.text.strip() if parsed else ""
    if prose and turn.caller_format is None:
        turn.warn(
            f"no valid tool call after {turn.reasks} re-ask(s), returned the text answer: {summary}"
        )
        return _with_choice(
            completion, 0, _answer(completion.message, prose), completion.finish_reason
        )
    turn.warn(
        f"no valid tool call after {turn.reasks} re-ask(s), answered without tools: {summary}"
    )
    return await _answer_without_tools(turn)


async def _decision(turn: Turn) -> Completion:
    extra: list[Message] = []
    while True:
        completion = await turn.call(emulation_body(turn, extra))
        parsed, verdict = judge(turn, completion.message.text, completion.finish_reason)
        if turn.answer_now:
            return await _answer_without_tools(turn)
        if verdict.ok and verdict.calls:
            return _with_choice(completion, 0, tool_call_message(verdict.calls), "tool_calls")
        if verdict.ok:
            # Decision "no tools" (explicit, or no call found): the final request without tools.
            return await _answer_without_tools(turn)
        if completion.finish_reason == "length" and turn.trimmed_reply is None:
            return cut_off(turn, completion, verdict.problems, parsed)
        if turn.reasks >= turn.max_reasks:
            if turn.request.choice.kind == "auto":
                turn.warn(
                    f"no valid tool call after {turn.reasks} re-ask(s), answered without tools: "
                    + "; ".join(verdict.problems)
                )
                return await _answer_without_tools(turn)
            raise give_up_error(turn, verdict.problems)
        turn.reasks += 1
        extra += _reask(turn, turn.trimmed_reply or completion.message.text, verdict.problems)
