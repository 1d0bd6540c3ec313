"""Check ``first_step``: a coding agent's turn takes its plan's first call and the later ones
that need no result yet (:mod:`~toolshim.engine.steps_ahead`); the rest is left for the next
turn, when the results are in. Calls whose results the conversation holds are skipped first,
when others are left.

The 1.5B wrote a whole chain at once, ``[Read(file_path="config.ini"),
Write(file_path="port.txt", content=str(Bash(…)))]``, and wrote it again after each re-ask;
its first step alone was right.
"""

from __future__ import annotations

from collections.abc import Sequence

from toolshim.dialects.interpret import ParsedCall
from toolshim.engine.checks.base import Check, CheckedReply, Outcome, revised
from toolshim.engine.steps_ahead import calls_ready, conversation_text, skip_answered
from toolshim.engine.turn import Turn

__all__ = ["CHECK", "first_step"]


def first_step(turn: Turn, calls: Sequence[ParsedCall]) -> Sequence[ParsedCall]:
    """The calls up to the first that needs a result not in yet (see the module docstring)."""
    ready = calls_ready(calls, conversation_text(turn.request.messages))
    if len(ready) == len(calls):
        return ready
    later = ", ".join(repr(c.name) for c in calls[len(ready) :] if c.name) or "unnamed"
    kept = ", ".join(repr(c.name) for c in ready)
    turn.warn(
        f"one step at a time: kept {kept}; later call(s) {later} left for the next turn, "
        "once the results they may need are in"
    )
    return ready


def _run(reply: CheckedReply) -> Outcome:
    if not reply.turn.one_step or len(reply.calls) < 2:
        return revised(reply, reply.calls)
    return revised(reply, first_step(reply.turn, skip_answered(reply.turn, reply.calls)))


CHECK = Check("first_step", _run)
