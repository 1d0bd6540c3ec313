"""Check ``schema``: names, arguments against each tool's JSON Schema, and the tool_choice,
parallel and dialect limits (:func:`toolshim.engine.validate.validate_calls`); obvious scalar
drift is coerced, extra valid calls over a limit are cut with a warning.

A native reply is held to the request's limits only, not to the dialect's; so is a call the
reply was continued for (it is judged alone)."""

from __future__ import annotations

from toolshim.engine.checks.base import Check, CheckedReply, Outcome, Reask, revised
from toolshim.engine.validate import validate_calls

__all__ = ["CHECK"]


def _run(reply: CheckedReply) -> Outcome:
    turn, request = reply.turn, reply.turn.request
    verdict = validate_calls(
        reply.calls,
        request.function_tools,
        request.choice,
        parallel=request.allows_parallel,
        max_calls=None if reply.native or reply.continued else turn.dialect.max_calls,
        truncated=reply.finish == "length",
    )
    if not verdict.ok:
        for warning in verdict.warnings:
            reply.warn(warning)
        return Reask(verdict.problems, verdict.calls)
    return revised(reply, verdict.calls, verdict.warnings)


CHECK = Check("schema", _run, native=True, continued=True)
