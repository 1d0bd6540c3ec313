"""Check ``placeholders``: a required parameter filled with a placeholder is re-asked.

A required parameter filled with a placeholder (``"..."``, ``"<city>"``, ``""``,
``"string"``, the parameter's own name) is an invalid call, re-asked like any other: it is
what a model writes when it copies the prompt's example instead of the conversation.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from toolshim.dialects.interpret import ParsedCall
from toolshim.engine.checks.base import PASS, Check, CheckedReply, Outcome, Reask
from toolshim.types import ToolSpec

__all__ = ["CHECK", "is_placeholder", "placeholder_problems"]

_PLACEHOLDER_WORDS = frozenset(
    {
        "",
        "...",
        "…",
        "..",
        "string",
        "str",
        "value",
        "example",
        "placeholder",
        "xxx",
        "tbd",
        "todo",
        "n/a",
        "none",
        "null",
        "undefined",
        "unknown",
        "<string>",
        "your_value",
    }
)
_BRACKETED = re.compile(r"^\s*(<[^<>]{0,40}>|\{[^{}]{0,40}\}|\[[^\[\]]{0,40}\])\s*$")
_YOUR = re.compile(r"^\s*(your|insert|enter)[ _-]\w+", re.IGNORECASE)


def is_placeholder(value: Any, name: str) -> bool:
    """True for a string that stands for a value rather than being one."""
    if not isinstance(value, str):
        return False
    text = value.strip()
    lowered = text.lower()
    if lowered in _PLACEHOLDER_WORDS or set(text) <= {".", "…", " ", "_", "-", "?"}:
        return True
    if lowered in (name.lower(), name.lower().replace("_", " ")):
        return True
    return bool(_BRACKETED.match(text) or _YOUR.match(text))


def placeholder_problems(calls: Sequence[ParsedCall], tools: Sequence[ToolSpec]) -> list[str]:
    """One problem per call whose required string parameters hold placeholders."""
    by_name = {t.name: t for t in tools}
    problems: list[str] = []
    for call in calls:
        tool = by_name.get(call.name)
        if tool is None or not isinstance(call.arguments, Mapping):
            continue
        needed = tool.required
        bad = [
            f"{key}={call.arguments[key]!r}"
            for key in needed
            if key in call.arguments and is_placeholder(call.arguments[key], key)
        ]
        if bad:
            problems.append(
                f"the arguments of {call.name!r} are placeholders, not values: {', '.join(bad)}. "
                "Use the real values the user gave; if the conversation does not give them, "
                "this tool does not fit"
            )
    return problems


def _run(reply: CheckedReply) -> Outcome:
    problems = placeholder_problems(reply.calls, reply.turn.request.function_tools)
    return Reask(tuple(problems)) if problems else PASS


CHECK = Check("placeholders", _run, continued=True)
