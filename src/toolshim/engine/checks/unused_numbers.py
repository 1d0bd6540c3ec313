"""Check ``unused_numbers``: numbers the user gave that no call uses, while a call leaves out
a parameter they could fill.

Qwen2.5-Coder-1.5B, asked for three binomial probabilities "with a 0.3 probability of winning
any given round", called ``prob_dist_binomial(trials=20, successes=5)`` three times without
``p``; asked for "the top 5 chess players in San Francisco with a minimum rating of 2500", it
left out ``number_of_players``. Each call is valid, so nothing re-asked it, and each is wrong.

A reply is re-asked once when both hold:

* a number in the user's last message is used by no call (as itself, or as a percentage:
  ``5%`` is used by ``0.05``), in any argument, numbers inside strings included; and
* a call leaves out an optional parameter that takes a number, and no call of that tool sets
  it.

The correction names the numbers and the parameters, and asks for the same calls again when the
numbers are not arguments; whatever comes back is not re-asked for this again. Numbers that
are parts of words or units are not counted (``COVID19``, ``2nd``, ``m/s^2``). Only the turn's
first decision is judged (the last message is the user's): after tool results, numbers in the
question are often answered by the results, not passed on. Nor is a reply cut by ``max_tokens``,
nor a coding agent's step: the numbers in its message are its environment's (a date, a path),
not arguments left out.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from toolshim.dialects.interpret import ParsedCall
from toolshim.engine.checks.base import PASS, Check, CheckedReply, Outcome, Reask
from toolshim.engine.turn import Turn
from toolshim.json_walk import json_values
from toolshim.types import ToolSpec

__all__ = ["CHECK", "NAME", "SAID_NUMBER", "said_numbers", "unused_number_problems"]

NAME = "unused_numbers"

SAID_NUMBER = re.compile(
    r"(?<![\w.^/])(-?\d+(?:,\d{3})*(?:\.\d+)?(?:[eE]-?\d+)?)(%?)(?![\w^]|\.\d)"
)
"""A number written on its own (``0.3``, ``1,000``, ``1e-9``, ``5%``); not a word's digits
(``2nd``, ``B12``) nor an exponent (``m/s^2``)."""

_NUMERIC = frozenset({"integer", "number", "float"})
_MAX_SHOWN = 6


def unused_number_problems(turn: Turn, calls: Sequence[ParsedCall]) -> list[str]:
    """The re-ask for numbers the user gave that no call uses (see the module docstring)."""
    messages = turn.request.messages
    if NAME in turn.reasked or not calls or not messages or messages[-1].role != "user":
        return []
    if turn.request.choice.kind == "none":
        return []
    said = list(dict.fromkeys(said_numbers(messages[-1].text)))
    if not said:
        return []
    used = [n for call in calls for n in _numbers_in(call.arguments)]
    unused = [text for text, values in said if not any(_same(v, u) for v in values for u in used)]
    if not unused:
        return []
    left_out = _left_out(calls, turn.request.function_tools)
    if not left_out:
        return []
    shown = ", ".join(unused[:_MAX_SHOWN]) + (", …" if len(unused) > _MAX_SHOWN else "")
    where = ", ".join(f"{p!r} of {t!r}" for t, p in left_out[:_MAX_SHOWN])
    return [
        f"the user's message gives {shown}, which no call uses, and the calls leave out "
        f"{where}; if one of those numbers is meant for a parameter left out, add it to each "
        "call it belongs to; if not, write the same calls again"
    ]


def _run(reply: CheckedReply) -> Outcome:
    if reply.finish == "length" or reply.turn.one_step:
        return PASS
    problems = unused_number_problems(reply.turn, reply.calls)
    return Reask(tuple(problems)) if problems else PASS


CHECK = Check(NAME, _run)


def said_numbers(text: str) -> Iterator[tuple[str, tuple[float, ...]]]:
    """Each number written in ``text``, with the values it may be passed as."""
    for m in SAID_NUMBER.finditer(text):
        try:
            value = float(m.group(1).replace(",", ""))
        except ValueError:
            continue
        if not math.isfinite(value):
            continue
        yield m.group(0), (value, value / 100) if m.group(2) else (value,)


def _numbers_in(value: Any) -> Iterator[float]:
    for leaf in json_values(value):
        if isinstance(leaf, str):
            yield from (values[0] for _, values in said_numbers(leaf))
        else:
            yield float(leaf)


def _same(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def _left_out(calls: Sequence[ParsedCall], tools: Sequence[ToolSpec]) -> list[tuple[str, str]]:
    """(tool, parameter) for each optional numeric parameter no call of its tool sets."""
    by_name = {t.name: t for t in tools if t.is_function}
    out: list[tuple[str, str]] = []
    for name in dict.fromkeys(c.name for c in calls):
        tool = by_name.get(name)
        properties = tool.parameters.get("properties") if tool else None
        if tool is None or not isinstance(properties, Mapping):
            continue
        required = tool.required
        set_keys = {
            k
            for c in calls
            if c.name == name and isinstance(c.arguments, Mapping)
            for k in c.arguments
        }
        for parameter, spec in properties.items():
            if parameter in required or parameter in set_keys or not isinstance(spec, Mapping):
                continue
            kind = spec.get("type")
            kinds = set(kind) if isinstance(kind, list) else {kind}
            if kinds & _NUMERIC:
                out.append((name, parameter))
    return out
