"""``toolshim eval --suite agent``: whole tool loops on the agent suite, scored on the final answer."""

from __future__ import annotations

import dataclasses
from functools import partial
from pathlib import Path
from typing import Any

from rich.console import Console

from toolshim.cli import _eval_suite as suite
from toolshim.cli._eval_run import RunLog
from toolshim.cli._eval_setup import err_console
from toolshim.evaluation.agent_report import (
    agent_markdown,
    load_agent_report,
    render_agent_table,
    summarize_agent,
    write_agent_report,
)
from toolshim.evaluation.agent_runner import NATIVE_MAX_TOKENS, AgentRecord, AgentRunner
from toolshim.evaluation.agent_tasks import AgentTask, load_agent_tasks
from toolshim.evaluation.runner import EvalConfig

__all__ = ["evaluate_agent", "run_agent_suite", "show_agent"]

out_console = Console()


async def evaluate_agent(
    served: suite.Served,
    *,
    options: suite.Options,
    configs: list[EvalConfig],
    tasks: list[AgentTask],
    max_turns: int,
    budget: float,
) -> list[AgentRecord]:
    """Run ``tasks`` under ``configs`` and write the report as the run goes."""
    async with suite.client(served, options, budget=budget) as (upstream, model_name):
        resumed = suite.resumed(options, load_agent_report, tasks, lambda r: r.task_id)
        runner = AgentRunner(
            upstream,
            model_name,
            configs,
            max_turns=max_turns,
            budget=budget,
            **suite.runner_settings(options, served),
        )
        meta = suite.meta(
            served,
            {},  # a resumed run's report starts again
            runner,
            suite="agent",
            tasks=len(tasks),
            temperature=options.temperature,
            max_turns=max_turns,
            budget_s=budget,
            max_reasks=options.max_reasks,
            native_max_tokens=NATIVE_MAX_TOKENS,
            parallel=options.parallel,
        )

        def header(total: int, done: int) -> str:
            return (
                f"{len(tasks)} agent tasks × {len(configs)} configurations on {model_name!r}, "
                f"{options.parallel} at a time: {total} runs to do"
            )

        await suite.run_pending(
            runner,
            tasks,
            resumed,
            parallel=options.parallel,
            log=RunLog(err_console, _line, bar=("agent", lambda r: f"{r.config} {_mark(r)}")),
            meta=meta,
            write=partial(write_agent_report, options.output),
            header=header,
        )
        return resumed.records


def _mark(record: AgentRecord) -> str:
    return "✓" if record.correct else f"✗ {record.failure}"


def _line(r: AgentRecord) -> str:
    return f"{r.task_id} {r.config} {_mark(r)} {r.llm_calls} call(s) {r.seconds:.1f}s"


show_agent = suite.ReportView(
    summarize_agent, render_agent_table, agent_markdown, "The report has no tasks yet."
)
"""The agent suite's tables (and Markdown) of a report's records."""


DEFAULT_AGENT_OUTPUT = Path("toolshim-agent-eval.json")
AGENT_DEFAULTS: dict[str, Any] = {"limit": 50, "ctx_size": 4096}
"""What ``--limit`` (tasks of each kind) and ``--ctx-size`` default to for the agent suite."""


def run_agent_suite(
    options: suite.Options, *, kinds: list[str], max_turns: int, budget: float
) -> None:
    """``--suite agent``: the agent tasks (``limit`` of each kind, 0: all) under the
    configurations and the ``native`` baseline."""
    if options.output == Path("toolshim-eval.json"):
        options = dataclasses.replace(options, output=DEFAULT_AGENT_OUTPUT)
    output = options.output
    limit = AGENT_DEFAULTS["limit"] if options.limit is None else options.limit
    with suite.errors():
        if options.report_only:
            meta, records = load_agent_report(output)
            show_agent(records, out_console, markdown=options.markdown, title=_agent_title(meta))
            return
        chosen = options.eval_configs(["native"])
        tasks = load_agent_tasks(kinds or None, limit=limit or None)
        run = partial(
            evaluate_agent,
            options=options,
            configs=chosen,
            tasks=tasks,
            max_turns=max_turns,
            budget=budget,
        )
        records = suite.on_served(options, run, options.ctx_size or AGENT_DEFAULTS["ctx_size"])
        meta, _ = load_agent_report(output)
    show_agent(records, out_console, markdown=options.markdown, title=_agent_title(meta))
    err_console.print(f"Report: {output}")


def _agent_title(meta: dict[str, Any]) -> str:
    return (
        f"Agent suite on {meta.get('model', '?')} (temperature {meta.get('temperature', '?')}, "
        f"{meta.get('max_turns', '?')} turns, {meta.get('budget_s', '?')} s a task)"
    )
