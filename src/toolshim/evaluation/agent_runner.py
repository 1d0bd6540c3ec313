"""Running the agent suite: each task as a whole tool loop, scored on its final answer.

A task runs as an agent would run it: the question and the task's tools go to the model; each
tool call it makes is executed (:mod:`.agent_tools`) and its result sent back; this repeats until
the model answers in text, the turn limit is reached or the task's time budget runs out. The
``native`` baseline sends the tools straight to the upstream (llama-server's own template and
parser) and reads only ``message.tool_calls``; the toolshim configurations go through the
engine. Every configuration gets the same tasks, turn limit and time budget.

Failure kinds, first that applies: ``error`` (a request failed), ``hang`` (the time budget ran
out), ``runaway`` (the turn limit was reached, or the last reply was cut by ``max_tokens``),
``repeated_call`` (the run made the same call twice), ``invented_result`` (no tool was called
although the task needs one), ``wrong_answer``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from toolshim.engine.turn import call_key
from toolshim.errors import ConfigError, ToolshimError
from toolshim.evaluation.agent_tasks import AgentTask
from toolshim.evaluation.agent_tools import TOOLS, run_tool
from toolshim.evaluation.runner import EvalConfig, Record, SuiteRunner, SuiteSettings
from toolshim.upstreams.base import Upstream

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["FAILURE_KINDS", "NATIVE_MAX_TOKENS", "AgentRecord", "AgentRunner"]

FAILURE_KINDS = ("error", "hang", "runaway", "repeated_call", "invented_result", "wrong_answer")
NATIVE_MAX_TOKENS = 1024
"""The native baseline's ``max_tokens`` (llama-server has no cap of its own)."""


@dataclass
class AgentRecord(Record):
    """The outcome of one task under one configuration (a row of the JSON report)."""

    task_id: str
    kind: str
    style: str
    config: str
    correct: bool
    failure: str | None
    turns: int
    llm_calls: int
    tool_calls: list[str] = field(default_factory=list)
    """Each call made, as ``name(arguments)``."""
    answer: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)
    error: str | None = None


@dataclass
class _Run:
    messages: list[dict[str, Any]]
    calls: list[tuple[str, str]] = field(default_factory=list)
    turns: int = 0
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    warnings: list[str] = field(default_factory=list)
    answer: str | None = None
    finish: str | None = None


class AgentRunner(SuiteRunner[AgentTask, AgentRecord]):
    """Runs agent tasks through configurations against one upstream and one model."""

    def __init__(
        self,
        upstream: Upstream,
        model: str,
        configs: Iterable[EvalConfig],
        *,
        max_turns: int = 6,
        budget: float = 300.0,
        **settings: Unpack[SuiteSettings],
    ) -> None:
        configs = list(configs)
        for config in configs:
            if config.kind == "bfcl-prompt":
                raise ConfigError(
                    "the agent suite has no 'bfcl-prompt' baseline (BFCL's prompt is single-turn); "
                    "use native or MODE[:DIALECT[:STRATEGY]]",
                    param="config",
                )
        super().__init__(upstream, model, configs, settings)
        self.max_turns = max_turns
        self.budget = budget

    async def run_one(self, item: AgentTask, config: EvalConfig) -> AgentRecord:
        return await self.run_task(item, config)

    async def run_task(self, task: AgentTask, config: EvalConfig) -> AgentRecord:
        """One task under one configuration; a failure becomes a failed record."""
        run = _Run(
            messages=[
                *({"role": role, "content": text} for role, text in task.history),
                {"role": "user", "content": task.question},
            ]
        )
        started = time.perf_counter()
        failure: str | None = None
        error: str | None = None
        try:
            await asyncio.wait_for(self._loop(task, config, run), self.budget)
        except TimeoutError:
            failure = "hang"
        except ToolshimError as exc:
            failure, error = "error", f"{type(exc).__name__}: {exc.message}"
        seconds = time.perf_counter() - started
        called = bool(run.calls)
        correct = failure is None and run.answer is not None and task.correct(run.answer, called)
        if failure is None and not correct:
            failure = _failure_kind(task, run, self.max_turns)
        return AgentRecord(
            task_id=task.id,
            kind=task.kind,
            style=task.style,
            config=config.label,
            correct=correct,
            failure=failure,
            turns=run.turns,
            llm_calls=run.llm_calls,
            tool_calls=[f"{name}({arguments})" for name, arguments in run.calls],
            answer=run.answer,
            prompt_tokens=run.prompt_tokens,
            completion_tokens=run.completion_tokens,
            seconds=round(seconds, 3),
            warnings=run.warnings,
            error=error,
        )

    async def _loop(self, task: AgentTask, config: EvalConfig, run: _Run) -> None:
        tools = [TOOLS[name].spec() for name in task.tools]
        followups = list(task.followups)
        limit = self.max_turns * (1 + len(followups))  # each user turn gets max_turns
        while run.turns < limit:
            run.turns += 1
            message, finish = await self._ask(config, run, tools)
            run.finish = finish
            calls = message.get("tool_calls") or []
            if not calls:
                run.answer = message.get("content") or ""
                if not followups:
                    return
                run.messages.append({"role": "assistant", "content": run.answer})
                run.messages.append({"role": "user", "content": followups.pop(0)})
                continue
            run.messages.append(
                {"role": "assistant", "content": message.get("content"), "tool_calls": calls}
            )
            for call in calls:
                function = call.get("function") or {}
                name, arguments = str(function.get("name")), str(function.get("arguments") or "")
                run.calls.append((name, arguments))
                result, _ = run_tool(name, arguments, task.style)
                run.messages.append(
                    {"role": "tool", "tool_call_id": call.get("id"), "content": result}
                )

    async def _ask(
        self, config: EvalConfig, run: _Run, tools: list[dict[str, Any]]
    ) -> tuple[dict[str, Any], str | None]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": run.messages,
            "tools": tools,
            "temperature": self.temperature,
        }
        if config.kind != "toolshim":
            body["max_tokens"] = NATIVE_MAX_TOKENS
        return await self.ask(config, body, run, null_content=False)


def _failure_kind(task: AgentTask, run: _Run, max_turns: int) -> str:
    if run.answer is None or run.finish == "length":
        return "runaway" if run.turns >= max_turns or run.finish == "length" else "wrong_answer"
    keys = [call_key(name, arguments) for name, arguments in run.calls]
    if len(set(keys)) < len(keys):
        return "repeated_call"
    if task.needs and not run.calls:
        return "invented_result"
    return "wrong_answer"
