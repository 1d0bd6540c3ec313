"""``toolshim eval --categories multi_turn…``: BFCL's multi-turn categories, whole conversations
on BFCL's simulated APIs, scored by BFCL's multi-turn checker."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from functools import partial
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.text import Text

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
from toolshim.evaluation.bfcl import load_bfcl
from toolshim.evaluation.bfcl_multi_turn import MultiTurnCase, load_multi_turn_cases
from toolshim.evaluation.multi_turn_report import (
    load_multi_turn_report,
    multi_turn_markdown,
    render_multi_turn_table,
    summarize_multi_turn,
    write_multi_turn_report,
)
from toolshim.evaluation.multi_turn_runner import MultiTurnRecord, MultiTurnRunner
from toolshim.evaluation.pick import engine_settings
from toolshim.evaluation.runner import BASELINES, EvalConfig
from toolshim.upstreams.openai_http import OpenAIUpstream

__all__ = [
    "DEFAULT_MULTI_TURN_OUTPUT",
    "MULTI_TURN_DEFAULTS",
    "run_multi_turn_suite",
    "show_multi_turn",
]

DEFAULT_MULTI_TURN_OUTPUT = Path("toolshim-bfcl-multi-turn.json")
MULTI_TURN_DEFAULTS: dict[str, Any] = {"limit": 20, "max_tokens": 512, "budget": 1800.0}
"""What ``--limit`` (cases per category), ``--max-tokens`` and ``--budget`` (seconds a case)
default to for the multi-turn categories."""

out_console = Console()


async def _evaluate(
    *,
    base_url: str,
    model: str | None,
    api_key: str | None,
    runner_options: dict[str, Any],
    configs: list[EvalConfig],
    cases: list[MultiTurnCase],
    parallel: int,
    output: Path,
    resume: bool,
    meta_extra: dict[str, Any],
    served_facts: Any,
) -> list[MultiTurnRecord]:
    upstream = OpenAIUpstream(
        base_url,
        api_key=api_key,
        key=meta_extra.get("upstream_key"),
        timeout=runner_options["budget"],
    )
    try:
        model_name = model or await first_model(upstream)
        wanted = {c.id for c in cases}
        previous, records = resumed(
            output, resume, load_multi_turn_report, lambda r: r.case_id in wanted
        )
        runner = MultiTurnRunner(
            upstream, model_name, configs, served_facts=served_facts, **runner_options
        )
        meta = {
            **meta_extra,
            "suite": "bfcl-multi-turn",
            "model": model_name,
            "configs": list(
                dict.fromkeys([*previous.get("configs", []), *(c.label for c in configs)])
            ),
            "settings": {
                **previous.get("settings", {}),
                **engine_settings(runner.engines, model_name),
            },
            "categories": list(dict.fromkeys(c.category for c in cases)),
            "cases": len(cases),
            **{k: v for k, v in runner_options.items() if k != "max_reasks"},
            "max_steps": runner.max_steps,
            "max_reasks": runner_options["max_reasks"],
            "parallel": parallel,
            "bfcl_eval": load_bfcl().version,
            "started": previous.get("started")
            or dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "machine": machine(),
        }
        done = {(r.case_id, r.config) for r in records}
        total = runner.pending(cases, done)
        err_console.print(
            f"{len(cases)} BFCL multi-turn cases × {len(configs)} configurations on "
            f"{model_name!r}, {parallel} at a time: {total} runs to do"
            + (f" ({len(done)} already in {output})" if done else "")
        )
        run = partial(runner.run, cases, skip=done, parallel=parallel)
        write = partial(write_multi_turn_report, output)
        wall_before = float(previous.get("wall_s") or 0)
        try:
            await RunLog(err_console, _line).run(run, records, total, meta, write, wall_before)
        finally:
            await runner.aclose()
        return records
    finally:
        await upstream.aclose()


def _line(record: MultiTurnRecord) -> str:
    mark = "✓" if record.valid else f"✗ {record.failure}"
    return (
        f"{record.case_id} {record.config} {mark}: "
        f"{record.turns} turn(s), {record.steps} step(s), {record.llm_calls} LLM "
        f"call(s), {record.prompt_tokens}+{record.completion_tokens} tokens, "
        f"{record.seconds:.1f}s"
    )


def show_multi_turn(
    records: list[MultiTurnRecord], console: Console, *, markdown: bool, title: str
) -> None:
    summaries = summarize_multi_turn(records)
    if not summaries:
        console.print("The report has no cases yet.")
        return
    render_multi_turn_table(summaries, console, title)
    if markdown:
        console.print(multi_turn_markdown(summaries), markup=False, highlight=False, soft_wrap=True)


def _title(meta: dict[str, Any]) -> str:
    return (
        f"BFCL multi-turn on {meta.get('model', '?')} (temperature "
        f"{meta.get('temperature', '?')}, max_tokens {meta.get('max_tokens', '?')}, "
        f"{meta.get('max_steps', '?')} steps a turn)"
    )


def run_multi_turn_suite(
    *,
    categories: list[str],
    upstream: str | None,
    model: str | None,
    model_file: Path | None,
    local_model: str | None,
    ctx_size: int | None,
    threads: int | None,
    api_key: str | None,
    configs: list[str],
    modes: list[str],
    dialects: list[str],
    strategies: list[str],
    baselines: list[str],
    limit: int | None,
    seed: int | None,
    temperature: float,
    max_tokens: int | None,
    max_steps: int | None,
    max_reasks: int,
    budget: float | None,
    parallel: int,
    output: Path,
    resume: bool,
    report_only: bool,
    markdown: bool,
) -> None:
    """BFCL's multi-turn ``categories`` (``limit`` cases each, 0: all) under the
    configurations and the baselines (default: both); prints the tables, writes ``output``."""
    try:
        if report_only:
            meta, records = load_multi_turn_report(output)
            show_multi_turn(records, out_console, markdown=markdown, title=_title(meta))
            return
        chosen = build_configs(modes, dialects, strategies, configs, baselines or list(BASELINES))
        limit = MULTI_TURN_DEFAULTS["limit"] if limit is None else limit
        cases = load_multi_turn_cases(categories, limit=limit or None, seed=seed)
        runner_options = {
            "temperature": temperature,
            "max_tokens": MULTI_TURN_DEFAULTS["max_tokens"] if max_tokens is None else max_tokens,
            "max_steps": max_steps,
            "budget": budget or MULTI_TURN_DEFAULTS["budget"],
            "max_reasks": max_reasks,
        }
        runner_options["max_tokens"] = runner_options["max_tokens"] or None
        with (
            sigterm_as_interrupt(),
            upstream_for_eval(upstream, model_file, local_model, ctx_size, threads, parallel) as (
                base_url,
                served_model,
                described,
                served_facts,
            ),
            # BFCL's simulated APIs print; the tables and progress go elsewhere.
            contextlib.redirect_stdout(None),
        ):
            records = asyncio.run(
                _evaluate(
                    base_url=base_url,
                    model=model or served_model,
                    api_key=api_key,
                    runner_options=runner_options,
                    configs=chosen,
                    cases=cases,
                    parallel=parallel,
                    output=output,
                    resume=resume,
                    meta_extra={**described, "limit": limit, "seed": seed},
                    served_facts=served_facts,
                )
            )
        meta, _ = load_multi_turn_report(output)
    except ToolshimError as exc:
        err_console.print(Text.assemble(("error: ", "red"), exc.message))
        raise typer.Exit(2 if isinstance(exc, ConfigError) else 1) from None
    show_multi_turn(records, out_console, markdown=markdown, title=_title(meta))
    err_console.print(f"Report: {output}")
