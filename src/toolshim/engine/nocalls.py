"""Replies in which no call may be returned: a call the model writes anyway is kept out of the answer.

Under ``tool_choice: "none"``, and for every answer asked for without tools (after a decline,
a ``decision`` of "no tools", spent re-asks), a reply whose text holds a call to an offered
tool (or a bare "no tool", ``{"tool_calls": []}``) is not the answer: its prose is returned
without the call; a reply that is nothing but the call is re-asked once (within
``max_reasks``) with a note that tools are not available; if the model writes the call again,
its text is returned as it is, with a warning. (After the re-asks for unusable calls are
spent under ``auto``, a reply that is nothing but a new call is first checked as a call and
taken when it passes: :func:`~toolshim.engine.emulate.taken_calls`.) Streamed and whole
replies agree: the incremental parser holds back only text that may be a call. (A native reply under
``tool_choice: "none"`` gets the same treatment in :mod:`.native` and :mod:`.relay`: prose
kept, a reply that is only a call emulated.) ``off`` mode never gets here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace

from toolshim.dialects.extract import ParsedReply
from toolshim.dialects.interpret import ParsedCall
from toolshim.engine.history import shown_arguments
from toolshim.engine.left_out import LEFT_OUT_WARNING, left_out, left_out_note, result_numbers
from toolshim.engine.stream_parts import StreamedReply, TextGate, first_choice, usage_chunks
from toolshim.engine.turn import Turn, call_key
from toolshim.engine.unoffered import drop_unoffered
from toolshim.types import ChatRequest, Completion, Message, StreamChunk

__all__ = [
    "NO_TOOLS_REASK",
    "Body",
    "answer_without_calls",
    "first_answer",
    "kept_warning",
    "leak",
    "new_step",
    "offers_called_tool",
    "repeated_results",
    "stream_without_calls",
    "stripped_warning",
    "writes_a_call",
]

Body = Callable[[Sequence[Message]], ChatRequest]
"""The upstream request of an attempt, given the messages to add after the history."""

NO_TOOLS_REASK = (
    "Tools are not available for this reply: do not call a tool and do not write a tool "
    "call. Answer the user in plain text."
)

RESULTS_WARNING = (
    "the model wrote a call it already had the result of where its answer was asked for; "
    "the answer is that result"
)


def _why(turn: Turn) -> str:
    if turn.request.choice.kind == "none":
        return "tool_choice is 'none'"
    return "this answer was asked for without tools"


def stripped_warning(turn: Turn) -> str:
    return f"removed a tool call from the text answer ({_why(turn)})"


def kept_warning(turn: Turn) -> str:
    return (
        "the answer is the text of a tool call the model wrote although no tool may be "
        f"called ({_why(turn)}); returned as written"
    )


def offers_called_tool(turn: Turn, calls: Sequence[ParsedCall]) -> bool:
    """True when one of ``calls`` names a tool the request offers."""
    if not calls:
        return False
    names = {t.name for t in turn.request.function_tools}
    return any(c.name in names for c in calls)


def writes_a_call(turn: Turn, calls: Sequence[ParsedCall], declined: bool) -> bool:
    """True when a streamed reply's ``calls`` (and its explicit "no tool", ``declined``)
    make it tool-call text rather than an answer (the streamed form of :func:`leak`)."""
    return offers_called_tool(turn, calls) or _nameless(calls) or (declined and not calls)


def _nameless(calls: Sequence[ParsedCall]) -> bool:
    """A call markup that names no tool: a ``<tool_call>`` or a ``{"name": "`` the reply's end
    cut off before the name (:mod:`toolshim.dialects._cut`), a list of a tool's values. Call
    text all the same, never the answer: the 0.5B's answer in BFCL's ``multi_turn_base_12``
    was ``{"name": "``."""
    return any(not c.name for c in calls)


def leak(turn: Turn, text: str) -> ParsedReply | None:
    """``text`` parsed, when it holds a call to an offered tool, call markup that names no
    tool, a model's marker token (``<|python_tag|>``) or an explicit "no tool"
    (``{"tool_calls": []}``: tool-call JSON too, never an answer); None when it does not."""
    tools = turn.request.function_tools
    if not tools or not text.strip():
        return None
    parsed = turn.dialect.parse(text, tools, markup=turn.markup)
    if parsed.declined or offers_called_tool(turn, parsed.calls) or _nameless(parsed.calls):
        return parsed
    return parsed if any(s.kind == "marker" for s in parsed.segments) else None


def repeated_results(turn: Turn, calls: Sequence[ParsedCall]) -> str | None:
    """A coding agent's answer when the reply asked for without tools is nothing but calls
    whose results the turn holds: those results, each under the call that gave it. None
    otherwise (not a coding agent's turn, or a call not made yet).

    Told "Tools are not available" after such a reply, with the tools left out of the prompt
    (which llama.cpp's cache then could not serve), the 0.5B wrote the call's JSON again in 4
    of 5 Claude Code and Codex tasks, and that JSON was the answer the client showed."""
    if not turn.one_step or not calls:
        return None
    parts = []
    for call in calls:
        if call.problem is not None:
            return None  # not a call that was made (its arguments are no JSON object)
        result = turn.answered_results.get(call_key(call.name, call.arguments_json))
        if result is None:
            return None
        shown = shown_arguments(call.arguments_json)
        parts.append(f"{call.name}({shown}) returned:\n{result.strip() or '(no output)'}")
    return "\n\n".join(dict.fromkeys(parts))


def _reask_once(turn: Turn, extra: Sequence[Message], reply: str) -> list[Message] | None:
    """The messages that ask again for a reply that was nothing but a call: once, within
    ``max_reasks``. None when it was asked again already or the re-asks are spent: the call's
    text is then the answer, with a warning."""
    if extra or turn.reasks >= turn.max_reasks:
        turn.warn(kept_warning(turn))
        return None
    turn.reasks += 1
    return [Message("assistant", reply), Message("user", NO_TOOLS_REASK)]


async def answer_without_calls(turn: Turn, body: Body) -> Completion:
    """Ask for an answer in which no call may be returned (see the module docstring); one
    that leaves out every number its results hold is asked for once more (:mod:`.left_out`)."""
    completion = await _without_calls(turn, body, first=False)
    assert completion is not None  # (only a first answer ends without one)
    return completion


async def first_answer(turn: Turn, body: Body) -> Completion | None:
    """:func:`answer_without_calls` for an answer asked for first (:mod:`.answer_first`): a
    first reply that is nothing but a call the turn has no result for ends it, and None is
    returned (the model wants a step: the tools are offered for it)."""
    return await _without_calls(turn, body, first=True)


async def _without_calls(turn: Turn, body: Body, *, first: bool) -> Completion | None:
    extra: list[Message] = []
    numbers = result_numbers(turn)
    while True:
        completion = drop_unoffered(turn, await turn.call(body(extra)), offered=())
        only_call = False
        choices = list(completion.choices)
        for position, choice in enumerate(choices):
            parsed = leak(turn, choice.message.text)
            if parsed is None:
                continue
            prose = parsed.text.strip()
            if prose:
                if parsed.calls or parsed.declined:  # not for a marker token alone
                    turn.warn(stripped_warning(turn))
                message = Message("assistant", prose, extra=choice.message.extra)
                choices[position] = replace(choice, message=message)
            elif position == 0:
                if first and not extra and new_step(turn, parsed.calls):
                    turn.wanted = tuple(parsed.calls)
                    return None
                answer = repeated_results(turn, parsed.calls)
                only_call = answer is None
                if answer is not None:
                    turn.warn(RESULTS_WARNING)
                    message = Message("assistant", answer, extra=choice.message.extra)
                    choices[position] = replace(choice, message=message)
            else:
                turn.warn(kept_warning(turn))
        completion = replace(completion, choices=tuple(choices))
        again = _reask_once(turn, extra, completion.message.text) if only_call else None
        if again is None and completion.choices[0].finish_reason != "length":
            again = _values_asked(turn, numbers, extra, completion.message.text)
            numbers = ()  # asked once at most
        if again is None:
            return completion
        extra = again


def _values_asked(
    turn: Turn, numbers: Sequence[str], extra: Sequence[Message], answer: str
) -> list[Message] | None:
    """The messages that ask once more for an answer that left out every number of its
    results (:mod:`.left_out`), or None."""
    if not left_out(numbers, answer):
        return None
    turn.warn(LEFT_OUT_WARNING)
    return [*extra, Message("assistant", answer), Message("user", left_out_note(numbers))]


def _gives_one(numbers: Sequence[str], held: Sequence[str], latest: str) -> bool:
    """Whether the answer held so far writes one of ``numbers`` (read again only when its
    latest piece has a digit)."""
    return any(c.isdigit() for c in latest) and not left_out(numbers, "".join(held))


def new_step(turn: Turn, calls: Sequence[ParsedCall]) -> bool:
    """Whether ``calls`` hold one whose result the turn does not have."""
    answered = turn.answered_results
    return any(
        c.problem is None and call_key(c.name, c.arguments_json) not in answered for c in calls
    )


async def stream_without_calls(
    turn: Turn, body: Body, *, first: bool = False
) -> AsyncIterator[StreamChunk]:
    """:func:`answer_without_calls`, streamed: prose as it comes, a possible call held back.
    ``first``: as there; a first reply that is nothing but a new call ends the stream before
    any chunk (the caller then offers the tools)."""
    tools = turn.request.function_tools
    extra: list[Message] = []
    numbers = result_numbers(turn)
    while True:
        reply = StreamedReply(turn.dialect.parser(tools, markup=turn.markup), TextGate())
        gate = reply.gate
        finish: str | None = None
        # Held until it is known to give one of the results' numbers, then sent as it comes.
        held: list[str] | None = [] if numbers else None
        async for chunk in first_choice(turn, body(extra)):
            finish = chunk.finish_reason or finish
            if not chunk.content:
                continue
            for text in reply.feed(chunk.content) if tools else (chunk.content,):
                if held is None:
                    yield StreamChunk(content=text)
                    continue
                held.append(text)
                if _gives_one(numbers, held, text):
                    yield StreamChunk(content="".join(held))
                    held = None
        if tools:
            for text in reply.finish():
                if held is None:
                    yield StreamChunk(content=text)
                else:
                    held.append(text)
            marker_only = reply.marked and not (gate.emitted + gate.tail).strip()
            if not writes_a_call(turn, reply.calls, reply.declined) and not marker_only:
                rest = gate.flush(gate.tail)
            elif (gate.emitted + gate.after_call).strip():
                turn.warn(stripped_warning(turn))
                rest = gate.flush(gate.after_call).rstrip()
            elif first and not extra and new_step(turn, reply.calls):
                turn.wanted = tuple(reply.calls)
                return
            elif (answer := repeated_results(turn, reply.calls)) is not None:
                turn.warn(RESULTS_WARNING)
                rest = answer
            elif (again := _reask_once(turn, extra, reply.parser.received)) is not None:
                extra = again
                continue
            else:
                rest = reply.parser.received
            if rest and held is not None:
                held.append(rest)
            elif rest:
                yield StreamChunk(content=rest)
        if held is not None:
            answer = "".join(held)
            asked = _values_asked(turn, numbers, extra, answer) if finish != "length" else None
            numbers = ()
            if asked is not None:
                extra = asked
                continue
            if answer:
                yield StreamChunk(content=answer)
        yield StreamChunk(finish_reason=finish or "stop")
        break
    async for chunk in usage_chunks(turn):
        yield chunk
