"""Running an agent file: its phases in order, each phase's final answer the next one's input."""

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
        return self.phases[-1].result.output if self.phases else ""

    @property
    def usage(self) -> Usage:
        total = Usage()
        for phase in self.phases:
            total = total + phase.result.usage
        return total

    @property
    def warnings(self) -> list[str]:
        return [f"phase {p.name!r}: {w}" for p in self.phases for w in p.result.warnings]

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
    defaults for phases that do not set their own."""
    run = RunResult(spec.source, input)
    text = input_text(input)
    for number, phase in enumerate(spec.phases, start=1):
        agent = Agent(
            phase.tools,
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
    return run
