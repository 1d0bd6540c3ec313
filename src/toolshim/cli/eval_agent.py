"""``toolshim eval --suite agent``: whole tool loops on the agent suite, scored on the final answer."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.text import Text

from toolshim.capabilities.registry import Registry
from toolshim.cli._eval_run import RunLog, resumed
from toolshim.cli._eval_setup import (
    build_configs,
    err_console,
    first_model,
    machine,
    sigterm_as_interrupt,
    upstream_for_eval,
)
from toolshim.errors import ConfigError, ToolshimError
from toolshim.evaluation.agent_report import (
    agent_markdown,
    load_agent_report,
    render_agent_table,
    summarize_agent,
    write_agent_report,
)
from toolshim.evaluation.agent_runner import NATIVE_MAX_TOKENS, AgentRecord, AgentRunner
from toolshim.evaluation.agent_tasks import AgentTask, load_agent_tasks
from toolshim.evaluation.pick import engine_settings
from toolshim.evaluation.runner import EvalConfig
from toolshim.upstreams.openai_http import OpenAIUpstream

__all__ = ["evaluate_agent", "run_agent_suite", "show_agent"]

out_console = Console()


async def evaluate_agent(
    *,
    base_url: str,
    model: str | None,
    api_key: str | None,
    configs: list[EvalConfig],
    tasks: list[AgentTask],
    temperature: float,
    max_turns: int,
    budget: float,
    max_reasks: int,
    parallel: int,
    output: Path,
    resume: bool,
    meta_extra: dict[str, Any],
    first_model: Callable[[OpenAIUpstream], Any],
    machine: str,
    console: Console,
    served_facts: Callable[[Registry], object] | None = None,
) -> list[AgentRecord]:
    """Run ``tasks`` under ``configs`` and write the report as the run goes."""
    upstream = OpenAIUpstream(
        base_url, api_key=api_key, key=meta_extra.get("upstream_key"), timeout=budget
    )
    try:
        model_name = model or await first_model(upstream)
        wanted = {t.id for t in tasks}
        _, records = resumed(output, resume, load_agent_report, lambda r: r.task_id in wanted)
        runner = AgentRunner(
            upstream,
            model_name,
            configs,
            temperature=temperature,
            max_turns=max_turns,
            budget=budget,
            max_reasks=max_reasks,
            served_facts=served_facts,
        )
        meta = {
            **meta_extra,
            "suite": "agent",
            "model": model_name,
            "configs": [c.label for c in configs],
            "settings": engine_settings(runner.engines, model_name),
            "tasks": len(tasks),
            "temperature": temperature,
            "max_turns": max_turns,
            "budget_s": budget,
            "max_reasks": max_reasks,
            "native_max_tokens": NATIVE_MAX_TOKENS,
            "parallel": parallel,
            "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "machine": machine,
        }
        done = {(r.task_id, r.config) for r in records}
        total = runner.pending(tasks, done)
        console.print(
            f"{len(tasks)} agent tasks × {len(configs)} configurations on {model_name!r}, "
            f"{parallel} at a time: {total} runs to do"
        )
        log = RunLog(console, _line, bar=("agent", lambda r: f"{r.config} {_mark(r)}"))
        run = partial(runner.run, tasks, skip=done, parallel=parallel)
        await log.run(run, records, total, meta, partial(write_agent_report, output))
        await runner.aclose()
        return records
    finally:
        await upstream.aclose()


def _mark(record: AgentRecord) -> str:
    return "✓" if record.correct else f"✗ {record.failure}"


def _line(r: AgentRecord) -> str:
    return f"{r.task_id} {r.config} {_mark(r)} {r.llm_calls} call(s) {r.seconds:.1f}s"


def show_agent(records: list[AgentRecord], console: Console, *, markdown: bool, title: str) -> None:
    summaries = summarize_agent(records)
    if not summaries:
        console.print("The report has no tasks yet.")
        return
    render_agent_table(summaries, console, title)
    if markdown:
        console.print(agent_markdown(summaries), markup=False, highlight=False, soft_wrap=True)


DEFAULT_AGENT_OUTPUT = Path("toolshim-agent-eval.json")


def run_agent_suite(
    *,
    upstream: str | None,
    model: str | None,
    model_file: Path | None,
    local_model: str | None,
    ctx_size: int,
    threads: int | None,
    api_key: str | None,
    configs: list[str],
    modes: list[str],
    dialects: list[str],
    strategies: list[str],
    baselines: list[str],
    kinds: list[str],
    limit: int,
    temperature: float,
    max_reasks: int,
    max_turns: int,
    budget: float,
    parallel: int,
    output: Path,
    resume: bool,
    report_only: bool,
    markdown: bool,
) -> None:
    """``--suite agent``: the agent tasks (``limit`` of each kind, 0: all) under the
    configurations and the ``native`` baseline."""
    if output == Path("toolshim-eval.json"):
        output = DEFAULT_AGENT_OUTPUT
    try:
        if report_only:
            meta, records = load_agent_report(output)
            show_agent(records, out_console, markdown=markdown, title=_agent_title(meta))
            return
        chosen = build_configs(
            modes, dialects, strategies, configs, [b for b in baselines or ["native"]]
        )
        tasks = load_agent_tasks(kinds or None, limit=limit or None)
        with (
            sigterm_as_interrupt(),
            upstream_for_eval(upstream, model_file, local_model, ctx_size, threads, parallel) as (
                base_url,
                served_model,
                described,
                served_facts,
            ),
        ):
            records = asyncio.run(
                evaluate_agent(
                    base_url=base_url,
                    model=model or served_model,
                    api_key=api_key,
                    configs=chosen,
                    tasks=tasks,
                    temperature=temperature,
                    max_turns=max_turns,
                    budget=budget,
                    max_reasks=max_reasks,
                    parallel=parallel,
                    output=output,
                    resume=resume,
                    meta_extra=described,
                    first_model=first_model,
                    machine=machine(),
                    console=err_console,
                    served_facts=served_facts,
                )
            )
        meta, _ = load_agent_report(output)
    except ToolshimError as exc:
        err_console.print(Text.assemble(("error: ", "red"), exc.message))
        raise typer.Exit(2 if isinstance(exc, ConfigError) else 1) from None
    show_agent(records, out_console, markdown=markdown, title=_agent_title(meta))
    err_console.print(f"Report: {output}")


def _agent_title(meta: dict[str, Any]) -> str:
    return (
        f"Agent suite on {meta.get('model', '?')} (temperature {meta.get('temperature', '?')}, "
        f"{meta.get('max_turns', '?')} turns, {meta.get('budget_s', '?')} s a task)"
    )
