"""Check ``paths``: in a coding agent's turn, a file path above the working directory that
nobody wrote is pointed at its place in the working directory
(:func:`toolshim.engine.focus.repair_paths`)."""

from __future__ import annotations

from toolshim.engine.checks.base import PASS, Check, CheckedReply, Outcome, revised
from toolshim.engine.focus import repair_paths

__all__ = ["CHECK"]


def _run(reply: CheckedReply) -> Outcome:
    if not reply.turn.one_step:
        return PASS
    calls, moved = repair_paths(reply.turn.request, reply.calls)
    return revised(reply, calls, moved)


CHECK = Check("paths", _run)
