"""``toolshim eval --categories multi_turn…``: BFCL's multi-turn categories, whole conversations
on BFCL's simulated APIs, scored by BFCL's multi-turn checker."""

from __future__ import annotations

import contextlib
from functools import partial
from pathlib import Path
from typing import Any

from rich.console import Console

from toolshim.cli import _eval_suite as suite
from toolshim.cli._eval_run import RunLog
from toolshim.cli._eval_setup import err_console
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
from toolshim.evaluation.runner import BASELINES, EvalConfig

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
    served: suite.Served,
    *,
    options: suite.Options,
    runner_options: dict[str, Any],
    configs: list[EvalConfig],
    cases: list[MultiTurnCase],
    limit: int,
) -> list[MultiTurnRecord]:
    output = options.output
    async with suite.client(served, options, budget=runner_options["budget"]) as (
        upstream,
        model_name,
    ):
        resumed = suite.resumed(options, load_multi_turn_report, cases, lambda r: r.case_id)
        runner = MultiTurnRunner(
            upstream, model_name, configs, served_facts=served.facts, **runner_options
        )
        meta = suite.meta(
            served,
            resumed.previous,
            runner,
            limit=limit,
            seed=options.seed,
            suite="bfcl-multi-turn",
            categories=list(dict.fromkeys(c.category for c in cases)),
            cases=len(cases),
            **{k: v for k, v in runner_options.items() if k not in ("max_reasks", "max_steps")},
            max_steps=runner.max_steps,
            max_reasks=runner_options["max_reasks"],
            parallel=options.parallel,
            bfcl_eval=load_bfcl().version,
        )

        def header(total: int, done: int) -> str:
            return (
                f"{len(cases)} BFCL multi-turn cases × {len(configs)} configurations on "
                f"{model_name!r}, {options.parallel} at a time: {total} runs to do"
                + (f" ({done} already in {output})" if done else "")
            )

        await suite.run_pending(
            runner,
            cases,
            resumed,
            parallel=options.parallel,
            log=RunLog(err_console, _line),
            meta=meta,
            write=partial(write_multi_turn_report, output),
            header=header,
            wall_before=float(resumed.previous.get("wall_s") or 0),
        )
        return resumed.records


def _line(record: MultiTurnRecord) -> str:
    mark = "✓" if record.valid else f"✗ {record.failure}"
    return (
        f"{record.case_id} {record.config} {mark}: "
        f"{record.turns} turn(s), {record.steps} step(s), {record.llm_calls} LLM "
        f"call(s), {record.prompt_tokens}+{record.completion_tokens} tokens, "
        f"{record.seconds:.1f}s"
    )


show_multi_turn = suite.ReportView(
    summarize_multi_turn,
    render_multi_turn_table,
    multi_turn_markdown,
    "The report has no cases yet.",
)
"""The multi-turn table (and Markdown) of a report's records."""


def _title(meta: dict[str, Any]) -> str:
    return (
        f"BFCL multi-turn on {meta.get('model', '?')} (temperature "
        f"{meta.get('temperature', '?')}, max_tokens {meta.get('max_tokens', '?')}, "
        f"{meta.get('max_steps', '?')} steps a turn)"
    )


def run_multi_turn_suite(
    options: suite.Options, *, categories: list[str], max_steps: int | None, budget: float | None
) -> None:
    """BFCL's multi-turn ``categories`` (``limit`` cases each, 0: all) under the
    configurations and the baselines (default: both); prints the tables, writes ``output``."""
    output = options.output
    with suite.errors():
        if options.report_only:
            meta, records = load_multi_turn_report(output)
            show_multi_turn(records, out_console, markdown=options.markdown, title=_title(meta))
            return
        chosen = options.eval_configs(list(BASELINES))
        limit = MULTI_TURN_DEFAULTS["limit"] if options.limit is None else options.limit
        cases = load_multi_turn_cases(categories, limit=limit or None, seed=options.seed)
        max_tokens = options.max_tokens
        runner_options = {
            "temperature": options.temperature,
            "max_tokens": (MULTI_TURN_DEFAULTS["max_tokens"] if max_tokens is None else max_tokens)
            or None,
            "max_steps": max_steps,
            "budget": budget or MULTI_TURN_DEFAULTS["budget"],
            "max_reasks": options.max_reasks,
        }
        run = partial(
            _evaluate,
            options=options,
            runner_options=runner_options,
            configs=chosen,
            cases=cases,
            limit=limit,
        )
        # BFCL's simulated APIs print; the tables and progress go elsewhere.
        with contextlib.redirect_stdout(None):
            records = suite.on_served(options, run, options.ctx_size)
        meta, _ = load_multi_turn_report(output)
    show_multi_turn(records, out_console, markdown=options.markdown, title=_title(meta))
    err_console.print(f"Report: {output}")
