"""``toolshim eval`` on BFCL's single-turn categories: every configuration and the two
baselines on the same cases, each reply scored by BFCL's AST checker."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from rich.console import Console

from toolshim.cli import _eval_suite as suite
from toolshim.cli._eval_run import RunLog
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

__all__ = ["BFCL_DEFAULTS", "run_bfcl_suite"]

BFCL_DEFAULTS: dict[str, Any] = {"limit": 50, "max_tokens": 256, "ctx_size": 4096}
"""What ``--limit`` (cases per category), ``--max-tokens`` and ``--ctx-size`` default to for
the single-turn categories."""

console = Console()
err_console = Console(stderr=True)


async def _evaluate(
    served: suite.Served,
    *,
    options: suite.Options,
    configs: list[EvalConfig],
    cases: list[BfclCase],
    limit: int | None,
    max_tokens: int | None,
) -> list[CaseRecord]:
    async with suite.client(served, options) as (upstream, model_name):
        resumed = suite.resumed(options, load_report, cases, lambda r: r.case_id)
        runner = EvalRunner(
            upstream,
            model_name,
            configs,
            max_tokens=max_tokens,
            **suite.runner_settings(options, served),
        )
        meta = suite.meta(
            served,
            resumed.previous,
            runner,
            categories=list(dict.fromkeys(c.category for c in cases)),
            limit=limit,
            seed=options.seed,
            temperature=options.temperature,
            max_tokens=max_tokens,
            max_reasks=options.max_reasks,
            parallel=options.parallel,
            bfcl_eval=load_bfcl().version,
        )

        def header(total: int, done: int) -> str:
            return (
                f"{len(cases)} cases × {len(configs)} configurations on {model_name!r}: "
                f"{total} runs to do" + (f" ({done} already in {options.output})" if done else "")
            )

        await suite.run_pending(
            runner,
            cases,
            resumed,
            parallel=options.parallel,
            log=RunLog(err_console, _line, bar=("eval", _progress)),
            meta=meta,
            write=partial(write_report, options.output),
            header=header,
        )
        return resumed.records


def _mark(record: CaseRecord) -> str:
    return "✓" if record.valid else "✗"


def _line(r: CaseRecord) -> str:
    return f"{r.case_id} {r.config} {_mark(r)} {r.llm_calls} call(s) {r.latency_s:.1f}s"


def _progress(r: CaseRecord) -> str:
    return f"{r.category} {r.config} {_mark(r)}"


def run_bfcl_suite(options: suite.Options, *, categories: list[str], chart: Path | None) -> None:
    """BFCL's single-turn ``categories`` (``limit`` cases each, 0: all; ``seed`` None: the
    first ones) under the configurations and the baselines; prints the tables, writes
    ``output`` and its chart."""
    limit = BFCL_DEFAULTS["limit"] if options.limit is None else options.limit
    max_tokens = BFCL_DEFAULTS["max_tokens"] if options.max_tokens is None else options.max_tokens
    output = options.output
    chart = chart or output.with_suffix(".png")
    if options.report_only:
        with suite.errors(code=2):
            meta, records = load_report(output)
            if options.modes or options.dialects or options.strategies or options.configs:
                # Only the named configurations (and the baselines): the tables then count
                # the cases these finished, not the fewer that every configuration did.
                labels = {c.label for c in options.eval_configs(list(BASELINES))}
                records = [r for r in records if r.config in labels]
        _show(records, chart, options.markdown, title=_title(meta))
        return
    with suite.errors():
        chosen = options.eval_configs(list(BASELINES))
        cases = load_cases(
            categories or list(DEFAULT_CATEGORIES), limit=limit or None, seed=options.seed
        )
        run = partial(
            _evaluate,
            options=options,
            configs=chosen,
            cases=cases,
            limit=limit or None,
            max_tokens=max_tokens or None,
        )
        records = suite.on_served(options, run, options.ctx_size or BFCL_DEFAULTS["ctx_size"])
    _show(records, chart, options.markdown, title=_title(meta_of(output)))
    err_console.print(f"Report: {output}")


def meta_of(path: Path) -> dict[str, Any]:
    return load_report(path)[0]


def _title(meta: dict[str, Any]) -> str:
    model = meta.get("model", "?")
    return f"BFCL on {model} (temperature {meta.get('temperature', '?')}, max_tokens {meta.get('max_tokens', '?')})"


_VIEW = suite.ReportView(
    summarize,
    lambda summaries, out, title: render_tables(summaries, out, title=title),
    markdown_table,
    "The report has no cases yet.",
)


def _show(records: list[CaseRecord], chart: Path, markdown: bool, *, title: str) -> None:
    """The tables, the chart and (optionally) the Markdown table of ``records``."""
    summaries = _VIEW(records, console, markdown=markdown, title=title, nothing_on=err_console)
    if summaries is None:
        return
    with suite.errors(code=1):
        path = write_chart(chart, summaries, title=title)
    err_console.print(f"Chart: {path}")
