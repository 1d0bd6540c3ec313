"""The calls made since the user's last message (or in the whole conversation) and how each
came out: one walk of the history for the checks that ask what failed (:mod:`.plans`,
:mod:`.unreported`) and where the conversation went (:mod:`.checks.local_names`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from toolshim.engine.files_named import request_index
from toolshim.engine.history import is_error_result
from toolshim.types import Message

__all__ = ["Outcome", "call_outcomes"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """A call since the request whose result the history holds."""

    position: int
    """The index of the assistant message that made the call."""
    name: str
    arguments: Any
    """The call's arguments decoded (None when they are not JSON)."""
    result: str
    worked: bool
    """Its result is not an error (:func:`~toolshim.engine.history.is_error_result`)."""


def call_outcomes(messages: Sequence[Message], *, whole: bool = False) -> list[Outcome]:
    """Each call since the user's last message that has a result, in the results' order;
    ``whole``: each call of the conversation that has one."""
    start = -1 if whole else request_index(messages)
    if start is None:
        return []
    made: dict[str, tuple[int, str, Any]] = {}
    outcomes: list[Outcome] = []
    for i in range(start + 1, len(messages)):
        message = messages[i]
        for call in message.tool_calls:
            try:
                arguments = json.loads(call.arguments or "{}")
            except ValueError:
                arguments = None
            made[call.id] = (i, call.name, arguments)
        if message.role in ("tool", "function") and message.tool_call_id in made:
            position, name, arguments = made[message.tool_call_id]
            text = message.text
            outcomes.append(Outcome(position, name, arguments, text, not is_error_result(text)))
    return outcomes
