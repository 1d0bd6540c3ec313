"""Native calls the caller did not ask for are dropped, whole and streamed alike.

A model may call a tool when none may be called: under ``tool_choice: "none"``, in a request
without tools, in an emulated request (sent no tools), in ``strip`` mode. Those calls are
removed from the answer, with a warning naming them, in every mode. A call to an unknown tool
in a request that offers tools is judged by the mode instead: emulated in ``auto`` and
``fallback`` (:mod:`toolshim.engine.native`), passed on in ``off``, whose callers (the agent)
answer it with the list of real tools.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

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
    came: each upstream chunk (every choice of it) without the deltas of calls to tools not
    offered. :meth:`finish` warns once, naming them."""

    def __init__(self, turn: Turn, offered: Sequence[str] | None = None) -> None:
        self.turn = turn
        self.passes = offered is None and turn.request.wants_tools
        self.allowed = set(offered or ())
        self._verdict: dict[tuple[int, int], bool] = {}
        self._kept: set[int] = set()
        self.dropped: list[str] = []

    def may_change(self, chunk: StreamChunk) -> bool:
        """Whether :meth:`feed` may change ``chunk`` (read inline by a stream: most chunks are
        text, passed on without a call more)."""
        return not self.passes and bool(chunk.tool_calls or chunk.other_choices or self.dropped)

    def feed(self, chunk: StreamChunk) -> StreamChunk:
        """``chunk`` without the deltas of calls to tools not offered, in each of its choices;
        once a call was dropped, a choice left without calls finishes with ``stop``."""
        if not self.may_change(chunk) or chunk.choiceless:
            return chunk
        choices = [self._calls(c) for c in (chunk, *chunk.other_choices)]
        if self.dropped:
            choices = [self._finished(c) for c in choices]
        first, *others = choices
        if first is chunk and all(a is b for a, b in zip(others, chunk.other_choices, strict=True)):
            return chunk
        return replace(first, other_choices=tuple(others))

    def _calls(self, choice: StreamChunk) -> StreamChunk:
        """One choice of a chunk without the deltas of calls to tools not offered."""
        if not choice.tool_calls:
            return choice
        kept = []
        for delta in choice.tool_calls:
            key = (choice.choice_index, delta.index)
            if key not in self._verdict:
                self._verdict[key] = delta.name in self.allowed
                if not self._verdict[key]:
                    self.dropped.append(str(delta.name))
            if self._verdict[key]:
                kept.append(delta)
                self._kept.add(choice.choice_index)
        if len(kept) == len(choice.tool_calls):
            return choice
        return replace(choice, tool_calls=tuple(kept))

    def _finished(self, choice: StreamChunk) -> StreamChunk:
        """A choice whose every call was dropped finishes with ``stop``."""
        if choice.finish_reason == "tool_calls" and choice.choice_index not in self._kept:
            return replace(choice, finish_reason="stop")
        return choice

    def finish(self) -> None:
        if self.dropped:
            self.turn.warn(unoffered_warning(self.dropped))
