"""What an agent run produced: each tool run, each model turn, and the run's result."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic_core import to_jsonable_python

from toolshim.types import Metadata, Usage

__all__ = ["AgentResult", "RunStatus", "StopReason", "ToolRun", "TurnRecord", "usage_dict"]

RunStatus = Literal["ok", "error", "invalid_arguments", "unknown_tool", "repeated", "not_run"]
"""What happened to one tool call.

``ok``/``error``: the function ran and returned / raised. ``invalid_arguments``: the arguments
did not fit (the function was not called). ``unknown_tool``: no tool has that name.
``repeated``: the same call was answered earlier, so its result was reused instead of calling
again. ``not_run``: the run stopped (a limit or a loop) before this call could run.
"""

StopReason = Literal["max_turns", "loop", "unknown_tool", "tool_call_budget", "token_budget"]
"""Why a run ended without the model's own final answer (None on the result when it answered)."""


@dataclass(frozen=True, slots=True)
class ToolRun:
    """One tool call the model made, with the text it got back."""

    call_id: str
    name: str
    arguments: Any
    """The arguments as the model sent them (decoded JSON; the raw text if it was not JSON)."""
    result: str
    """The text sent back to the model as the tool's result."""
    status: RunStatus = "ok"
    value: Any = None
    """The function's return value (ok), or the exception it raised (error)."""
    error_type: str | None = None
    duration: float = 0.0
    """Seconds the function ran (0 when it did not run)."""
    turn: int = 0

    @property
    def is_error(self) -> bool:
        return self.status not in ("ok", "repeated")

    @property
    def ran(self) -> bool:
        return self.status in ("ok", "error")

    def to_dict(self) -> dict[str, Any]:
        return {
            "call_id": self.call_id,
            "name": self.name,
            "arguments": self.arguments,
            "result": self.result,
            "status": self.status,
            "is_error": self.is_error,
            "error_type": self.error_type,
            "duration": round(self.duration, 6),
            "turn": self.turn,
        }


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """One request to the model through the engine, and what came back."""

    index: int
    text: str
    tool_calls: tuple[str, ...]
    """The names of the tools the model called in this turn."""
    finish_reason: str | None
    usage: Usage | None
    meta: Metadata | None
    duration: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "text": self.text,
            "tool_calls": list(self.tool_calls),
            "finish_reason": self.finish_reason,
            "usage": usage_dict(self.usage),
            "toolshim": self.meta.to_dict() if self.meta else None,
            "duration": round(self.duration, 6),
        }


@dataclass(frozen=True, slots=True)
class AgentResult:
    """The outcome of :meth:`Agent.run`: the answer, the history, the calls, the usage.

    ``stopped`` is None when the model gave its own final answer; otherwise it names the
    safeguard that ended the run, and ``output`` is the answer built in the model's place.
    """

    output: str
    messages: list[dict[str, Any]]
    tool_runs: list[ToolRun]
    turns: list[TurnRecord]
    usage: Usage
    warnings: list[str] = field(default_factory=list)
    stopped: StopReason | None = None
    model: str = ""

    @property
    def completed(self) -> bool:
        """True when the model itself gave the final answer."""
        return self.stopped is None

    @property
    def metadata(self) -> list[Metadata]:
        """The engine metadata of each turn."""
        return [t.meta for t in self.turns if t.meta is not None]

    @property
    def emulated(self) -> bool:
        """True when any turn's tool calling was emulated."""
        return any(m.emulated for m in self.metadata)

    def __str__(self) -> str:
        return self.output

    def to_dict(self) -> dict[str, Any]:
        """The whole run as JSON-ready data."""
        return {
            "output": self.output,
            "stopped": self.stopped,
            "model": self.model,
            "warnings": list(self.warnings),
            "usage": usage_dict(self.usage),
            "turns": [t.to_dict() for t in self.turns],
            "tool_runs": [r.to_dict() for r in self.tool_runs],
            "messages": to_jsonable_python(self.messages, fallback=str),
        }


def usage_dict(usage: Usage | None) -> dict[str, int] | None:
    if usage is None:
        return None
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    }


def jsonable(value: Any) -> Any:
    """``value`` as JSON-ready data (unknown objects become their ``str``)."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    return to_jsonable_python(value, fallback=str)
