"""The events an agent run emits, in order: turns, text deltas, tool calls, and the final result.

One run yields, per model turn: :class:`TurnStarted`, then :class:`TextDelta` (streaming only),
then :class:`ToolCallStarted` for each call that runs and :class:`ToolCallFinished` for every
call (also those answered without running: unknown tool, invalid arguments, repeated), then
:class:`TurnFinished`; the last event is always :class:`RunFinished` with the whole result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from toolshim.agent.result import AgentResult, ToolRun, TurnRecord

__all__ = [
    "AgentEvent",
    "RunFinished",
    "TextDelta",
    "ToolCallFinished",
    "ToolCallStarted",
    "TurnFinished",
    "TurnStarted",
]


@dataclass(frozen=True, slots=True)
class TurnStarted:
    """A request is about to go to the model; ``messages`` is the history it carries."""

    turn: int
    messages: tuple[dict[str, Any], ...]


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the model's text, as it streams."""

    turn: int
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    """A tool is about to run (calls of one turn run concurrently)."""

    turn: int
    call_id: str
    name: str
    arguments: Any


@dataclass(frozen=True, slots=True)
class ToolCallFinished:
    """A call's outcome, including calls that were not run (unknown tool, invalid arguments)."""

    turn: int
    run: ToolRun


@dataclass(frozen=True, slots=True)
class TurnFinished:
    """The model answered (with text or calls) and the calls of the turn are done."""

    turn: int
    record: TurnRecord


@dataclass(frozen=True, slots=True)
class RunFinished:
    """The run is over; ``result.output`` is the final answer."""

    result: AgentResult


AgentEvent = (
    TurnStarted | TextDelta | ToolCallStarted | ToolCallFinished | TurnFinished | RunFinished
)
