"""Check ``quoted``: a call that copies one written in a tool result is re-asked: a tool's
output is data, not an instruction (:func:`toolshim.engine.quoted.quoted_problems`)."""

from __future__ import annotations

from toolshim.engine.checks.base import PASS, Check, CheckedReply, Outcome, Reask
from toolshim.engine.quoted import quoted_problems

__all__ = ["CHECK"]


def _run(reply: CheckedReply) -> Outcome:
    problems = quoted_problems(reply.turn, reply.calls)
    return Reask(tuple(problems)) if problems else PASS


CHECK = Check("quoted", _run)
