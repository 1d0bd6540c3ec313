"""Running an agent file: its phases in order, each phase's final answer the next one's input.

A phase that answers with nothing (an empty or blank final answer) stops the run with an
:class:`~toolshim.errors.AgentLimitError` (``reason="empty_output"``) naming it, instead of
sending the next phase an empty user message, which some providers reject (seed 002: "skip
empty messages"). When it is the last phase, the run's output is empty, with a warning.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from toolshim.agent.agentfile import AgentFile, PhaseSpec
from toolshim.agent.events import AgentEvent
from toolshim.agent.loop import Agent
from toolshim.agent.result import AgentResult, jsonable, usage_dict
from toolshim.engine.engine import Engine
from toolshim.errors import AgentLimitError
from toolshim.types import Mode, Usage

__all__ = ["PhaseResult", "RunResult", "arun_agent_file", "input_text"]

PhaseEventHandler = Callable[[PhaseSpec, int, AgentEvent], None]
"""Receives (phase, phase number from 1, event) for every event of every phase."""

DEFAULT_MAX_TURNS = 10


@dataclass(frozen=True, slots=True)
class PhaseResult:
    """One phase's input and its agent result."""

    name: str
    input: str
    result: AgentResult
    mode: str | None
    dialect: str | None
    tools: tuple[str, ...]
    duration: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "input": self.input,
            "mode": self.mode,
            "dialect": self.dialect,
            "tools": list(self.tools),
            "duration": round(self.duration, 6),
            **self.result.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class RunResult:
    """A whole agent-file run; ``output`` is the last phase's answer."""

    source: str
    input: Any
    phases: list[PhaseResult] = field(default_factory=list)

    @property
    def output(self) -> str:
        """The last phase's answer ("" when it is blank)."""
        text = self.phases[-1].result.output if self.phases else ""
        return text if text.strip() else ""

    @property
    def usage(self) -> Usage:
        total = Usage()
        for phase in self.phases:
            total = total + phase.result.usage
        return total

    @property
    def unanswered(self) -> list[str]:
        """The phases that stopped without an answer (turn limit, loop, budget)."""
        return [p.name for p in self.phases if not p.result.completed]

    @property
    def warnings(self) -> list[str]:
        out = [f"phase {p.name!r}: {w}" for p in self.phases for w in p.result.warnings]
        if self.phases and not self.output:
            out.append(f"phase {self.phases[-1].name!r} answered with nothing: the result is empty")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent_file": self.source,
            "input": jsonable(self.input),
            "output": self.output,
            "usage": usage_dict(self.usage),
            "phases": [p.to_dict() for p in self.phases],
        }


def input_text(value: Any) -> str:
    """A phase's user message: text as it is, anything else as indented JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=2)


async def arun_agent_file(
    spec: AgentFile,
    input: Any,
    *,
    engine: Engine,
    model: str | None = None,
    mode: str | Mode | None = None,
    dialect: str | None = None,
    max_turns: int | None = None,
    params: dict[str, Any] | None = None,
    on_event: PhaseEventHandler | None = None,
) -> RunResult:
    """Run every phase through ``engine``; ``model``/``mode``/``dialect``/``max_turns`` are the
    defaults for phases that do not set their own. A phase that stops without an answer (its
    turn limit, a loop) ends the run there: :attr:`RunResult.unanswered` names it."""
    run = RunResult(spec.source, input)
    text = input_text(input)
    for number, phase in enumerate(spec.phases, start=1):
        agent = Agent(
            phase.tools,
            mcp=phase.mcp or None,
            model=phase.model or model,
            upstream=engine,
            mode=phase.mode or mode,
            dialect=phase.dialect or dialect,
            system=phase.instructions or None,
            max_turns=phase.max_turns or max_turns or DEFAULT_MAX_TURNS,
            params=params,
        )

        def forward(event: AgentEvent, phase: PhaseSpec = phase, number: int = number) -> None:
            if on_event is not None:
                on_event(phase, number, event)

        started = time.perf_counter()
        result = await agent.arun(text, on_event=forward)
        run.phases.append(
            PhaseResult(
                name=phase.name,
                input=text,
                result=result,
                mode=agent.mode.value if agent.mode else None,
                dialect=agent.dialect,
                tools=tuple(t.name for t in phase.tools),
                duration=time.perf_counter() - started,
            )
        )
        text = result.output
        if not result.completed:
            break  # the next phase would take a stop notice for an answer (see ``unanswered``)
        if number < len(spec.phases) and not text.strip():
            raise AgentLimitError(
                _empty_message(spec, number, result), reason="empty_output", result=run
            )
    return run


def _empty_message(spec: AgentFile, number: int, result: AgentResult) -> str:
    phase, following = spec.phases[number - 1], spec.phases[number]
    why = f", stopped: {result.stopped}" if result.stopped else ""
    return (
        f"phase {phase.name!r} ({number} of {len(spec.phases)}) answered with nothing "
        f"({len(result.turns)} turn(s){why}), so phase {following.name!r} has no input; the run "
        "stops here rather than send an empty message (some providers reject those)"
    )
