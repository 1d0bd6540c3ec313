"""``toolshim eval`` on BFCL's single-turn categories: every configuration and the two
baselines on the same cases, each reply scored by BFCL's AST checker."""

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
    first_model,
    machine,
    sigterm_as_interrupt,
    upstream_for_eval,
)
from toolshim.errors import ConfigError, ToolshimError
from toolshim.evaluation import (
    BASELINES,
    DEFAULT_CATEGORIES,
    BfclCase,
    CaseRecord,
    EvalConfig,
    EvalRunner,
    load_bfcl,
    load_cases,
    load_report,
    markdown_table,
    render_tables,
    summarize,
    write_chart,
    write_report,
)
from toolshim.evaluation.pick import engine_settings
from toolshim.upstreams.openai_http import OpenAIUpstream

__all__ = ["BFCL_DEFAULTS", "run_bfcl_suite"]

BFCL_DEFAULTS: dict[str, Any] = {"limit": 50, "max_tokens": 256, "ctx_size": 4096}
"""What ``--limit`` (cases per category), ``--max-tokens`` and ``--ctx-size`` default to for
the single-turn categories."""

console = Console()
err_console = Console(stderr=True)


async def _evaluate(
    *,
    base_url: str,
    model: str | None,
    api_key: str | None,
    configs: list[EvalConfig],
    cases: list[BfclCase],
    limit: int | None,
    seed: int | None,
    temperature: float,
    max_tokens: int | None,
    max_reasks: int,
    output: Path,
    resume: bool,
    meta_extra: dict[str, Any],
    served_facts: Callable[[Registry], object] | None = None,
    parallel: int = 1,
) -> list[CaseRecord]:
    # The embedded model's facts live under its stable key (its port changes every run).
    upstream = OpenAIUpstream(base_url, api_key=api_key, key=meta_extra.get("upstream_key"))
    try:
        model_name = model or await first_model(upstream)
        wanted = {c.id for c in cases}
        previous, records = resumed(output, resume, load_report, lambda r: r.case_id in wanted)
        runner = EvalRunner(
            upstream,
            model_name,
            configs,
            temperature=temperature,
            max_tokens=max_tokens,
            max_reasks=max_reasks,
            served_facts=served_facts,
        )
        meta = {
            **meta_extra,
            "model": model_name,
            "configs": list(
                dict.fromkeys([*previous.get("configs", []), *(c.label for c in configs)])
            ),
            "settings": {
                **previous.get("settings", {}),
                **engine_settings(runner.engines, model_name),
            },
            "categories": list(dict.fromkeys(c.category for c in cases)),
            "limit": limit,
            "seed": seed,
            "temperature": temperature,
            "max_tokens": max_tokens,
            "max_reasks": max_reasks,
            "parallel": parallel,
            "bfcl_eval": load_bfcl().version,
            "started": previous.get("started")
            or dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "machine": machine(),
        }
        done = {(r.case_id, r.config) for r in records}
        total = runner.pending(cases, done)
        err_console.print(
            f"{len(cases)} cases × {len(configs)} configurations on {model_name!r}: "
            f"{total} runs to do" + (f" ({len(done)} already in {output})" if done else "")
        )
        log = RunLog(err_console, _line, bar=("eval", _progress))
        run = partial(runner.run, cases, skip=done, parallel=parallel)
        await log.run(run, records, total, meta, partial(write_report, output))
        return records
    finally:
        await upstream.aclose()


def _mark(record: CaseRecord) -> str:
    return "✓" if record.valid else "✗"


def _line(r: CaseRecord) -> str:
    return f"{r.case_id} {r.config} {_mark(r)} {r.llm_calls} call(s) {r.latency_s:.1f}s"


def _progress(r: CaseRecord) -> str:
    return f"{r.category} {r.config} {_mark(r)}"


def run_bfcl_suite(
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
    max_reasks: int,
    parallel: int,
    output: Path,
    chart: Path | None,
    resume: bool,
    report_only: bool,
    markdown: bool,
) -> None:
    """BFCL's single-turn ``categories`` (``limit`` cases each, 0: all; ``seed`` None: the
    first ones) under the configurations and the baselines; prints the tables, writes
    ``output`` and its chart."""
    limit = BFCL_DEFAULTS["limit"] if limit is None else limit
    max_tokens = BFCL_DEFAULTS["max_tokens"] if max_tokens is None else max_tokens

    def named_configs() -> list[EvalConfig]:
        return build_configs(modes, dialects, strategies, configs, baselines or list(BASELINES))

    if report_only:
        try:
            meta, records = load_report(output)
        except ToolshimError as exc:
            err_console.print(Text.assemble(("error: ", "red"), exc.message))
            raise typer.Exit(2) from None
        if modes or dialects or strategies or configs:
            # Only the named configurations (and the baselines): the tables then count
            # the cases these finished, not the fewer that every configuration did.
            try:
                labels = {c.label for c in named_configs()}
            except ToolshimError as exc:
                err_console.print(Text.assemble(("error: ", "red"), exc.message))
                raise typer.Exit(2) from None
            records = [r for r in records if r.config in labels]
        _show(records, chart or output.with_suffix(".png"), markdown, title=_title(meta))
        return
    try:
        chosen = named_configs()
        cases = load_cases(categories or list(DEFAULT_CATEGORIES), limit=limit or None, seed=seed)
        with (
            sigterm_as_interrupt(),
            upstream_for_eval(
                upstream,
                model_file,
                local_model,
                ctx_size or BFCL_DEFAULTS["ctx_size"],
                threads,
                parallel,
            ) as (base_url, served_model, described, served_facts),
        ):
            records = asyncio.run(
                _evaluate(
                    base_url=base_url,
                    model=model or served_model,
                    api_key=api_key,
                    configs=chosen,
                    cases=cases,
                    limit=limit or None,
                    seed=seed,
                    temperature=temperature,
                    max_tokens=max_tokens or None,
                    max_reasks=max_reasks,
                    output=output,
                    resume=resume,
                    meta_extra=described,
                    served_facts=served_facts,
                    parallel=parallel,
                )
            )
    except ToolshimError as exc:
        err_console.print(Text.assemble(("error: ", "red"), exc.message))
        raise typer.Exit(2 if isinstance(exc, ConfigError) else 1) from None
    _show(records, chart or output.with_suffix(".png"), markdown, title=_title(meta_of(output)))
    err_console.print(f"Report: {output}")


def meta_of(path: Path) -> dict[str, Any]:
    return load_report(path)[0]


def _title(meta: dict[str, Any]) -> str:
    model = meta.get("model", "?")
    return f"BFCL on {model} (temperature {meta.get('temperature', '?')}, max_tokens {meta.get('max_tokens', '?')})"


def _show(records: list[CaseRecord], chart: Path, markdown: bool, *, title: str) -> None:
    """The tables, the chart and (optionally) the Markdown table of ``records``."""
    summaries = summarize(records)
    if not summaries:
        err_console.print("The report has no cases yet.")
        return
    render_tables(summaries, console, title=title)
    if markdown:
        console.print(markdown_table(summaries), markup=False, highlight=False, soft_wrap=True)
    try:
        path = write_chart(chart, summaries, title=title)
    except ConfigError as exc:
        err_console.print(Text.assemble(("error: ", "red"), exc.message))
        raise typer.Exit(1) from None
    err_console.print(f"Chart: {path}")
