"""What a native reply becomes: kept, trimmed, rescued from its text, or sent to emulation.

One decision, used by the non-streaming engine and by the held and relayed streams alike:

* a reply whose text holds valid calls to offered tools (the llama-server habit of answering
  with fenced JSON) is turned into tool calls — the *rescue*;
* a reply whose native calls break the rules (a tool that does not exist, arguments against
  its schema, ``tool_choice``) goes to emulation, except in ``off``; so does a reply that is
  nothing but a call to an offered tool written as text, unusable (prose around it, or a
  made-up tool name, keeps the reply as an answer);
* a reply with more calls than ``parallel_tool_calls: false`` (or a named function) allows
  keeps the first ones, with a warning;
* in ``fallback``, a reply without calls to a request that offers tools goes to emulation;
* under ``tool_choice: "none"``, a call written as text is cut out of the answer, and a reply
  that is nothing but such a call goes to emulation (which asks again without tools).

A call written as text that the conversation already held (the same tool and arguments in a
tool result or a user message: a fetched page that says ``{"name": "send_email", …}``) is
never rescued, nor emulated: the reply stays text, with :data:`QUOTED_WARNING`. Text a tool
returned cannot make the next call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from toolshim.dialects import ParsedReply
from toolshim.dialects.interpret import ParsedCall
from toolshim.engine.emulate import check, tool_call_message
from toolshim.engine.nocalls import leak, stripped_warning
from toolshim.engine.quoted import QUOTING_ROLES, quotes_the_conversation
from toolshim.engine.turn import RESCUED_WARNING, Turn
from toolshim.engine.unoffered import drop_unoffered
from toolshim.engine.validate import Verdict, validate_calls
from toolshim.types import Completion, Message, Mode

__all__ = [
    "QUOTED_WARNING",
    "WROTE_A_CALL",
    "emulates_text_calls",
    "native_calls",
    "native_verdict",
    "rescue",
    "settle_native",
    "unusable_text_call",
]

WROTE_A_CALL = "native reply rejected: its text is a tool call although tool_choice is 'none'"
UNUSABLE_TEXT_CALL = "native reply rejected: its text is a tool call that cannot be used: "
QUOTED_WARNING = (
    "a tool call in the reply's text repeats one written in a tool result or user message: "
    "kept as text, not turned into a call"
)


def native_calls(message: Message) -> list[ParsedCall]:
    """A message's native tool calls as parsed calls (arguments decoded from JSON)."""
    out = []
    for call in message.tool_calls:
        try:
            arguments: Any = call.parsed_arguments()
            problem = None
        except ValueError:
            arguments, problem = call.arguments, "the arguments are not valid JSON"
        out.append(ParsedCall(call.name, arguments, call.arguments, problem))
    return out


def native_verdict(turn: Turn, message: Message) -> Verdict:
    """The native calls of ``message`` checked against the tools and the request's rules."""
    request = turn.request
    if request.choice.kind == "none":
        problems = ("the model called tools although tool_choice is 'none'",)
        return Verdict((), problems if message.tool_calls else ())
    if not request.wants_tools or (not message.tool_calls and request.choice.kind == "auto"):
        return Verdict(tuple(native_calls(message)), ())
    return validate_calls(
        native_calls(message),
        request.function_tools,
        request.choice,
        parallel=request.allows_parallel,
    )


def _text_calls(turn: Turn, completion: Completion) -> tuple[ParsedReply, Verdict] | None:
    """The calls a native reply without ``tool_calls`` writes in its text, checked; None when
    it writes none."""
    request = turn.request
    if not completion.choices or not request.wants_tools:
        return None
    message = completion.message
    if message.tool_calls or not message.text.strip():
        return None
    parsed = turn.dialect.parse(message.text, request.function_tools, markup=turn.markup)
    if not parsed.calls:
        return None
    if quotes_the_conversation(turn, parsed.calls, QUOTING_ROLES):
        turn.warn(QUOTED_WARNING)
        return None
    return parsed, check(turn, parsed.calls, completion.finish_reason, native=True)


def _rescued(turn: Turn, completion: Completion, verdict: Verdict) -> Completion:
    turn.warn(RESCUED_WARNING)
    calls = replace(tool_call_message(verdict.calls), extra=completion.message.extra)
    return _with_message(completion, calls, "tool_calls")


def rescue(turn: Turn, completion: Completion) -> Completion | None:
    """A native reply whose text holds valid calls to offered tools, turned into tool calls."""
    read = _text_calls(turn, completion)
    if read is None or not read[1].ok:
        return None
    return _rescued(turn, completion, read[1])


def emulates_text_calls(turn: Turn, calls: Sequence[ParsedCall], prose: str) -> bool:
    """Is a native reply whose text holds ``calls`` (which failed the checks) emulated?

    Only in ``auto`` and ``fallback`` (``off`` never emulates), only when the reply is nothing
    but the calls, and only when they name offered tools: the model meant that tool and got
    its arguments wrong, which emulation's corrections fix. A made-up tool name is left as
    text: measured on BFCL (Qwen2.5-Coder-0.5B, docs/results.md), emulating those turned
    replies to questions no tool fits into calls of the wrong tool.
    """
    offered = {t.name for t in turn.request.function_tools}
    return (
        turn.mode is not Mode.OFF
        and turn.request.choice.kind != "none"
        and not prose.strip()
        and bool(calls)
        and all(c.name in offered for c in calls)
    )


def unusable_text_call(problems: Sequence[str]) -> str:
    """The warning for a native reply that is nothing but a call to an offered tool written as
    text, its arguments unusable (see :func:`emulates_text_calls`): the turn is emulated."""
    return UNUSABLE_TEXT_CALL + "; ".join(problems)


def settle_native(turn: Turn, completion: Completion, *, rescue_text: bool) -> Completion | None:
    """The native reply as it should be returned, or None when the turn must be emulated."""
    if not completion.choices:
        return completion
    if turn.mode is Mode.OFF or not turn.request.tools:
        completion = drop_unoffered(turn, completion)  # elsewhere such calls are emulated
    read = _text_calls(turn, completion) if rescue_text else None
    if read is not None and read[1].ok:
        return _rescued(turn, completion, read[1])
    if turn.mode is Mode.OFF:
        return completion
    message = completion.message
    verdict = native_verdict(turn, message)
    if verdict.problems:
        turn.warn("native reply rejected: " + "; ".join(verdict.problems))
        return None
    if read is not None and emulates_text_calls(turn, read[0].calls, read[0].text):
        # Tool-call JSON in content that cannot be used as it is: emulation (with its
        # corrections) rather than handing the caller the broken call as the answer.
        turn.warn(unusable_text_call(read[1].problems))
        return None
    if rescue_text and turn.request.choice.kind == "none" and not message.tool_calls:
        parsed = leak(turn, message.text)
        if parsed is not None:
            prose = parsed.text.strip()
            if not prose:
                turn.warn(WROTE_A_CALL)
                return None
            if parsed.calls or parsed.declined:  # not for a marker token alone
                turn.warn(stripped_warning(turn))
            answer = Message("assistant", prose, extra=message.extra)
            return _with_message(completion, answer, completion.finish_reason)
    if turn.mode is Mode.FALLBACK and not message.tool_calls and turn.request.wants_tools:
        return None
    if len(verdict.calls) < len(message.tool_calls):
        for warning in verdict.warnings:
            turn.warn(warning)
        kept = message.tool_calls[: len(verdict.calls)]
        return _with_message(
            completion, replace(message, tool_calls=kept), completion.finish_reason
        )
    return completion


def _with_message(completion: Completion, message: Message, finish: str | None) -> Completion:
    first = replace(completion.choices[0], message=message, finish_reason=finish)
    return replace(completion, choices=(first, *completion.choices[1:]))
