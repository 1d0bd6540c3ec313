"""Native calls to tools the caller did not offer are dropped, whole and streamed alike.

A model may call a tool that was not offered (one it saw earlier in the conversation, one it
made up, or any tool at all under ``tool_choice: "none"`` or in an emulated request, which is
sent no tools). The caller asked for none of them: they are removed from the answer, with a
warning naming them, in every mode (in ``auto`` and ``fallback`` a native reply with such a
call is emulated instead, see :mod:`toolshim.engine.native`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from toolshim.engine.turn import Turn
from toolshim.types import Completion

__all__ = ["UnofferedFilter", "drop_unoffered", "unoffered_warning"]


def unoffered_warning(names: Sequence[str]) -> str:
    """The warning for native calls dropped because their tool was not offered."""
    return "dropped a native call to a tool that was not offered: " + ", ".join(
        repr(n) for n in names
    )


def drop_unoffered(
    turn: Turn, completion: Completion, *, offered: Sequence[str] | None = None
) -> Completion:
    """Each choice without its native calls to tools that were not ``offered`` (default: the
    request's tools, none under ``tool_choice: "none"``), with a warning; a choice left without
    calls finishes with ``stop``. A tool the caller did not offer is never called for it."""
    allowed = set(offered_names(turn) if offered is None else offered)
    choices = list(completion.choices)
    dropped: list[str] = []
    for position, choice in enumerate(choices):
        calls = choice.message.tool_calls
        kept = tuple(c for c in calls if c.name in allowed)
        if len(kept) == len(calls):
            continue
        dropped += [c.name for c in calls if c.name not in allowed]
        finish = choice.finish_reason
        if not kept and finish in ("tool_calls", "function_call"):
            finish = "stop"
        choices[position] = replace(
            choice, message=replace(choice.message, tool_calls=kept), finish_reason=finish
        )
    if not dropped:
        return completion
    turn.warn(unoffered_warning(dropped))
    return replace(completion, choices=tuple(choices))


def offered_names(turn: Turn) -> list[str]:
    """The tools a native reply may call: the request's, none under ``tool_choice: "none"``."""
    request = turn.request
    return [t.name for t in request.tools] if request.choice.kind != "none" else []


class UnofferedFilter:
    """:func:`drop_unoffered` for a native stream passed through as it came: each upstream
    chunk (a chat-completions chunk dict) without the deltas of calls to tools not offered.
    :meth:`finish` warns once, naming them."""

    def __init__(self, turn: Turn, offered: Sequence[str] | None = None) -> None:
        self.turn = turn
        self.allowed = set(offered_names(turn) if offered is None else offered)
        self._verdict: dict[tuple[int, int], bool] = {}
        self._kept: set[int] = set()
        self.dropped: list[str] = []

    def feed(self, data: dict[str, Any]) -> dict[str, Any]:
        choices = data.get("choices")
        if not isinstance(choices, list) or not any(_calls_of(c) for c in choices):
            return self._finished(data) if isinstance(choices, list) else data
        out = []
        for choice in choices:
            calls = _calls_of(choice)
            if not calls:
                out.append(choice)
                continue
            position = int(choice.get("index") or 0)
            kept = []
            for delta in calls:
                key = (position, int(delta.get("index") or 0))
                if key not in self._verdict:
                    function = delta.get("function")
                    name = function.get("name") if isinstance(function, Mapping) else None
                    self._verdict[key] = name in self.allowed
                    if not self._verdict[key]:
                        self.dropped.append(str(name))
                if self._verdict[key]:
                    kept.append(delta)
                    self._kept.add(position)
            out.append({**choice, "delta": {**choice["delta"], "tool_calls": kept}})
        return self._finished({**data, "choices": out})

    def _finished(self, data: dict[str, Any]) -> dict[str, Any]:
        """A choice whose every call was dropped finishes with ``stop``."""
        if not self.dropped:
            return data
        choices = data["choices"]
        if not any(
            c.get("finish_reason") == "tool_calls" and int(c.get("index") or 0) not in self._kept
            for c in choices
        ):
            return data
        return {
            **data,
            "choices": [
                {**c, "finish_reason": "stop"}
                if c.get("finish_reason") == "tool_calls"
                and int(c.get("index") or 0) not in self._kept
                else c
                for c in choices
            ],
        }

    def finish(self) -> None:
        if self.dropped:
            self.turn.warn(unoffered_warning(self.dropped))


def _calls_of(choice: Any) -> list[Any]:
    delta = choice.get("delta") if isinstance(choice, Mapping) else None
    calls = delta.get("tool_calls") if isinstance(delta, Mapping) else None
    return calls if isinstance(calls, list) else []
