"""Check ``undeclared_arguments``: arguments the tool's schema does not declare are dropped
(or renamed), optional ones given as ``null`` left out, each kind of change said in a warning
(:func:`toolshim.engine.arguments.drop_undeclared_arguments`)."""

from __future__ import annotations

from toolshim.engine.arguments import drop_undeclared_arguments
from toolshim.engine.checks.base import Check, CheckedReply, Outcome, revised

__all__ = ["CHECK"]


def _run(reply: CheckedReply) -> Outcome:
    calls, dropped = drop_undeclared_arguments(reply.calls, reply.turn.request.function_tools)
    return revised(reply, calls, dropped)


CHECK = Check("undeclared_arguments", _run, continued=True)
