"""Native calls the caller did not ask for are dropped, whole and streamed alike.

A model may call a tool when none may be called: under ``tool_choice: "none"``, in a request
without tools, in an emulated request (sent no tools), in ``strip`` mode. Those calls are
removed from the answer, with a warning naming them, in every mode. A call to an unknown tool
in a request that offers tools is judged by the mode instead: emulated in ``auto`` and
``fallback`` (:mod:`toolshim.engine.native`), passed on in ``off``, whose callers (the agent)
answer it with the list of real tools.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from toolshim.engine.turn import Turn
from toolshim.types import Completion, StreamChunk

__all__ = ["UnofferedFilter", "drop_unoffered", "unoffered_warning"]


def unoffered_warning(names: Sequence[str]) -> str:
    """The warning for native calls dropped because their tool was not offered."""
    return "dropped a native call to a tool that was not offered: " + ", ".join(
        repr(n) for n in names
    )


def drop_unoffered(
    turn: Turn, completion: Completion, *, offered: Sequence[str] | None = None
) -> Completion:
    """Each choice without its native calls to tools not in ``offered`` (default: none when the
    request wants no calls, else every call is kept), with a warning; a choice left without
    calls finishes with ``stop``."""
    if offered is None and turn.request.wants_tools:
        return completion
    allowed = set(offered or ())
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


class UnofferedFilter:
    """:func:`drop_unoffered` (the same ``offered``) for a native stream passed through as it
    came: each upstream chunk (its first choice, and the chunk as sent in ``raw``) without the
    deltas of calls to tools not offered. :meth:`finish` warns once, naming them."""

    def __init__(self, turn: Turn, offered: Sequence[str] | None = None) -> None:
        self.turn = turn
        self.passes = offered is None and turn.request.wants_tools
        self.allowed = set(offered or ())
        self._verdict: dict[tuple[int, int], bool] = {}
        self._kept: set[int] = set()
        self.dropped: list[str] = []

    def feed(self, chunk: StreamChunk) -> StreamChunk:
        """``chunk`` without the deltas of calls to tools not offered, in its first choice and
        in the chunk it came as (``raw``)."""
        if self.passes or chunk.raw is None:
            return chunk
        data = self._filter(chunk.raw)
        if data is chunk.raw:
            return chunk
        before, after = chunk.raw["choices"][0], data["choices"][0]
        kept = _calls_of(after)
        calls = tuple(
            d
            for d, sent in zip(chunk.tool_calls, _calls_of(before), strict=False)
            if any(sent is k for k in kept)
        )
        return replace(chunk, tool_calls=calls, finish_reason=after.get("finish_reason"), raw=data)

    def _filter(self, data: Mapping[str, Any]) -> Mapping[str, Any]:
        choices = data.get("choices")
        if not isinstance(choices, list) or not any(_calls_of(c) for c in choices):
            return self._finished(data) if isinstance(choices, list) else data
        out = []
        for choice in choices:
            calls = _calls_of(choice)
            if not calls:
                out.append(choice)
                continue
            position = _index(choice)
            kept = []
            for delta in calls:
                key = (position, _index(delta))
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

    def _finished(self, data: Mapping[str, Any]) -> Mapping[str, Any]:
        """A choice whose every call was dropped finishes with ``stop``."""
        if not self.dropped:
            return data
        choices = data["choices"]
        emptied = [
            isinstance(c, Mapping)
            and c.get("finish_reason") == "tool_calls"
            and _index(c) not in self._kept
            for c in choices
        ]
        if not any(emptied):
            return data
        return {
            **data,
            "choices": [
                {**c, "finish_reason": "stop"} if gone else c
                for c, gone in zip(choices, emptied, strict=True)
            ],
        }

    def finish(self) -> None:
        if self.dropped:
            self.turn.warn(unoffered_warning(self.dropped))


def _calls_of(choice: Any) -> list[Any]:
    delta = choice.get("delta") if isinstance(choice, Mapping) else None
    calls = delta.get("tool_calls") if isinstance(delta, Mapping) else None
    return [c for c in calls if isinstance(c, Mapping)] if isinstance(calls, list) else []


def _index(item: Mapping[str, Any]) -> int:
    """A choice's or a call delta's ``index`` (0 when it has none, or not a number)."""
    value = item.get("index")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
