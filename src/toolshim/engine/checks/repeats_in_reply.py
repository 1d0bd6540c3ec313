"""Check ``repeats_in_reply``: a call written several times in one reply is read once.

A reply that writes the same call several times (a small model looping on its own output
until ``max_tokens``) is read as that call once; the cut tail of the loop is not a call. To
spare the upstream that loop, a request made once results are in stops where the reply
writes an answered call again on the line after a call (:func:`repeat_stops`): Qwen2.5-
Coder-0.5B otherwise writes ``{"name": "get_weather", …}`` sixty times, minutes on a CPU.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from toolshim.dialects.interpret import ParsedCall
from toolshim.engine.checks.base import PASS, Check, CheckedReply, Outcome, Revise
from toolshim.engine.turn import Turn, call_key
from toolshim.types import ToolCall

__all__ = ["CHECK", "REPEAT_STOPS", "drop_repeats_in_reply", "repeat_stops"]

REPEAT_STOPS = 2
"""Answered calls (the latest ones) whose second writing ends a reply."""


def drop_repeats_in_reply(
    turn: Turn, calls: Sequence[ParsedCall], finish: str | None
) -> tuple[Sequence[ParsedCall], str | None]:
    """``calls`` with identical repeats dropped; a reply cut by ``max_tokens`` while it
    repeated itself keeps its complete calls and is no longer treated as cut off."""
    turn.trimmed_reply = None
    seen: set[tuple[str, str]] = set()
    unique: list[ParsedCall] = []
    dropped = 0
    for call in calls:
        if call.problem is None and isinstance(call.arguments, Mapping):
            key = call_key(call.name, call.arguments_json)
            if key in seen:
                dropped += 1
                continue
            seen.add(key)
        unique.append(call)
    if not dropped:
        return calls, finish
    turn.warn(f"dropped {dropped} identical repeat(s) of a call written again in the same reply")
    if finish == "length":
        complete = [c for c in unique if c.problem is None and not c.repaired]
        if complete:
            turn.trimmed_reply = turn.dialect.render_calls(
                [ToolCall(f"trimmed_{i}", c.name, c.arguments_json) for i, c in enumerate(complete)]
            )
            return complete, None
    return unique, finish


def repeat_stops(turn: Turn) -> tuple[str, ...]:
    """Stop sequences that end a reply where, right after a call, it writes an answered call
    again as a JSON line (``}\n{"name": …, "arguments": …}``: the shape small models loop
    in), for the latest :data:`REPEAT_STOPS` answered calls; the latest also with a blank line
    between (``}\n\n{…``: Qwen's hermes blocks once their special tags are stripped). The
    reply keeps its first call (less the closing brace the stop sequence begins with, which the
    tolerant parser restores). Most important first: a request carries at most four stops."""
    stops: list[str] = []
    for rank, (name, arguments) in enumerate(list(turn.answered_results)[-REPEAT_STOPS:][::-1]):
        try:
            value = json.loads(arguments)
        except ValueError:
            continue
        call = json.dumps({"name": name, "arguments": value}, ensure_ascii=False)
        stops += ["}\n" + call, "}\n\n" + call] if rank == 0 else ["}\n" + call]
    return tuple(stops)


def _run(reply: CheckedReply) -> Outcome:
    calls, finish = drop_repeats_in_reply(reply.turn, reply.calls, reply.finish)
    if calls is reply.calls and finish == reply.finish:
        return PASS
    return Revise(tuple(calls), finish)


CHECK = Check("repeats_in_reply", _run, native=True)
