"""Check ``example_copies``: a call that is the prompt's own example is re-asked.

A call that is the prompt's own example (:func:`example_copies`): every dialect shows the
first tool called with placeholder values (``"..."``, ``1``, ``1.5``), and a small model
asked something no tool fits copies it (``calculate_ROI(investment_amount=1.5,
net_profit=1.5)`` for a profit margin, BFCL's irrelevance cases) — re-asked like a
placeholder, unless the conversation gives those numbers (``add(a=1, b=1)`` for "1 + 1").
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from toolshim.dialects.base import example_arguments
from toolshim.dialects.interpret import ParsedCall
from toolshim.engine.checks.base import PASS, Check, CheckedReply, Outcome, Reask
from toolshim.engine.turn import Turn

__all__ = ["CHECK", "NUMBER", "example_copies"]

NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def example_copies(turn: Turn, calls: Sequence[ParsedCall]) -> list[str]:
    """One problem per call that is the prompt's example call of its tool (the placeholder
    arguments every dialect shows) with a number nobody said: a copy, not a call. Only under
    ``tool_choice: "auto"``, where declining is allowed."""
    if turn.request.choice.kind != "auto":
        return []
    by_name = {t.name: t for t in turn.request.function_tools}
    said: set[float] | None = None
    problems: list[str] = []
    for call in calls:
        tool = by_name.get(call.name)
        if tool is None or not call.arguments:
            continue
        example = example_arguments(tool)
        numbers = [
            v for v in example.values() if isinstance(v, int | float) and not isinstance(v, bool)
        ]
        if not numbers or dict(call.arguments) != example:
            continue
        if said is None:
            said = {
                float(n) for message in turn.request.messages for n in NUMBER.findall(message.text)
            }
        if all(float(n) in said for n in numbers):
            continue
        shown = ", ".join(f"{k}={v!r}" for k, v in example.items())
        problems.append(
            f"your call {call.name}({shown}) is the example from the instructions, not a call "
            "for this request: nothing in the conversation gives these values. Call a tool "
            "only with values the user gave; if no tool fits the request, answer the user "
            "directly"
        )
    return problems


def _run(reply: CheckedReply) -> Outcome:
    problems = example_copies(reply.turn, reply.calls)
    return Reask(tuple(problems)) if problems else PASS


CHECK = Check("example_copies", _run)
