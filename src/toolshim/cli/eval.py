"""``toolshim eval``: BFCL's cases through toolshim's configurations and two baselines, scored by BFCL's checker."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from toolshim.capabilities.registry import Registry
from toolshim.cli._eval_setup import (
    build_configs,
    first_model,
    machine,
    sigterm_as_interrupt,
    upstream_for_eval,
)
from toolshim.cli._options import RegistryOption, UpstreamApiKeyOption
from toolshim.cli.eval_apply import DEFAULT_BFCL_OUTPUT, apply_eval
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
from toolshim.evaluation.agent_tasks import KINDS
from toolshim.evaluation.pick import engine_settings
from toolshim.upstreams.openai_http import OpenAIUpstream

__all__ = ["register"]

HELP = """Score toolshim on the Berkeley Function Calling Leaderboard (BFCL).

Runs BFCL's cases through every configuration you name and through two baselines on the same cases: `native` (the tools sent straight to the upstream, only `tool_calls` read: what you get without toolshim) and `bfcl-prompt` (BFCL's own prompt-mode system prompt and decoder). Each reply is scored with BFCL's own AST checker; one table per category shows accuracy, well-formed rate (the reply decoded into calls to offered functions, right or wrong), mean LLM calls and mean latency per case. Writes a JSON report (every case, rewritten as the run goes; --resume continues it) and a PNG chart.

Configurations: --config MODE\\[:DIALECT\\[:STRATEGY]]\\[+constrain]\\[+served]\\[+doubt] (repeatable; +constrain: constrained emulation, +served: the registry seeded with the embedded model's own facts, as toolshim serve does, +doubt: fact doubt set, a call the model opened unsure of answered without tools), and/or --mode/--dialect/--strategy (each repeatable; every combination runs). Example:

toolshim eval --upstream http://127.0.0.1:8080/v1 --config force:json --config force:pythonic --config auto --limit 20

--apply then picks the best configuration for the model, judged on this report and the other suite's together (combined score: the mean of the BFCL and agent-suite overall accuracies, each on the cases every candidate ran), and stores its dialect, strategy and constraint in the capability registry (source eval), where serve, chat and run find them. Example: toolshim eval --report-only -o bfcl.json --other-report agent.json --apply

Without --upstream the embedded model runs (toolshim\\[local]); --model-file PATH.gguf or --local-model NAME picks another. Needs bfcl-eval: pip install 'toolshim\\[eval]' && pip install --no-deps bfcl-eval==2026.3.23
"""

CATEGORIES_HELP = (
    "BFCL categories, comma-separated \\[default: " + ",".join(DEFAULT_CATEGORIES) + "]."
)
DEFAULT_OUTPUT = DEFAULT_BFCL_OUTPUT

console = Console()
err_console = Console(stderr=True)


def _split(values: list[str] | None) -> list[str]:
    return [v.strip() for raw in values or [] for v in raw.split(",") if v.strip()]


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
        records: list[CaseRecord] = []
        previous: dict[str, Any] = {}
        if resume and output.is_file():  # noqa: ASYNC240 (a stat before any request)
            previous, records = load_report(output)
            wanted = {c.id for c in cases}
            records = [r for r in records if r.case_id in wanted]
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
        last_write = run_started = time.monotonic()
        with Progress(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=err_console,
        ) as progress:
            task = progress.add_task("eval", total=total)

            def on_record(record: CaseRecord) -> None:
                nonlocal last_write
                records.append(record)
                mark = "✓" if record.valid else "✗"
                progress.update(
                    task,
                    advance=1,
                    description=f"{record.category} {record.config} {mark}",
                )
                if not err_console.is_terminal:  # a log file: one line per run instead of a bar
                    finished = int(progress.tasks[0].completed)
                    err_console.print(
                        f"[{finished}/{total}] {record.case_id} {record.config} {mark} "
                        f"{record.llm_calls} call(s) {record.latency_s:.1f}s",
                        highlight=False,
                        markup=False,
                    )
                if time.monotonic() - last_write > 20:
                    write_report(output, meta, records)
                    last_write = time.monotonic()

            try:
                await runner.run(cases, skip=done, on_record=on_record, parallel=parallel)
            finally:
                meta["finished"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
                meta["wall_s"] = round(time.monotonic() - run_started, 1)
                write_report(output, meta, records)
        return records
    finally:
        await upstream.aclose()


def register(app: typer.Typer) -> None:
    """Add the ``eval`` command to ``app``."""

    @app.command("eval", help=HELP)
    def eval_command(
        upstream: Annotated[
            str | None,
            typer.Option(
                "--upstream",
                envvar="TOOLSHIM_UPSTREAM",
                help="Base URL of an OpenAI-compatible API, e.g. http://127.0.0.1:11434/v1 "
                "\\[default: the embedded model].",
            ),
        ] = None,
        model: Annotated[
            str | None,
            typer.Option(
                "--model", help="Model name to send \\[default: the upstream's first model]."
            ),
        ] = None,
        model_file: Annotated[
            Path | None,
            typer.Option("--model-file", help="Serve this GGUF with the embedded llama.cpp."),
        ] = None,
        local_model: Annotated[
            str | None,
            typer.Option(
                "--local-model",
                help="Serve a known embedded model by name, e.g. qwen2.5-coder-1.5b.",
            ),
        ] = None,
        ctx_size: Annotated[
            int | None,
            typer.Option(
                "--ctx-size",
                help="Context size of the embedded model \\[bfcl and agent: 4096 a slot; "
                "coding: what the model was trained for].",
                show_default=False,
            ),
        ] = None,
        threads: Annotated[
            int | None,
            typer.Option(
                "--threads", min=1, help="CPU threads of the embedded model \\[default: all cores]."
            ),
        ] = None,
        api_key: UpstreamApiKeyOption = None,
        mode: Annotated[
            list[str] | None,
            typer.Option("--mode", help="auto, off, fallback, force, strip (repeatable)."),
        ] = None,
        dialect: Annotated[
            list[str] | None,
            typer.Option("--dialect", help="json, hermes, compact, pythonic, … (repeatable)."),
        ] = None,
        strategy: Annotated[
            list[str] | None, typer.Option("--strategy", help="single, decision (repeatable).")
        ] = None,
        config: Annotated[
            list[str] | None,
            typer.Option(
                "--config",
                help="A toolshim configuration MODE\\[:DIALECT\\[:STRATEGY]], e.g. "
                "force:pythonic (repeatable).",
            ),
        ] = None,
        baseline: Annotated[
            list[str] | None,
            typer.Option(
                "--baseline",
                help="Baselines to run: native, bfcl-prompt, none \\[default: both].",
            ),
        ] = None,
        categories: Annotated[
            list[str] | None,
            typer.Option("--categories", help=CATEGORIES_HELP),
        ] = None,
        limit: Annotated[
            int, typer.Option("--limit", min=0, help="Cases per category (0: all).")
        ] = 50,
        seed: Annotated[
            int, typer.Option("--seed", help="Seed of the per-category sample of cases.")
        ] = 0,
        first: Annotated[
            bool,
            typer.Option(
                "--first", help="Take the first --limit cases instead of a seeded sample."
            ),
        ] = False,
        temperature: Annotated[
            float, typer.Option("--temperature", help="Sampling temperature.")
        ] = 0.0,
        max_tokens: Annotated[
            int,
            typer.Option("--max-tokens", min=0, help="Output token limit per request (0: none)."),
        ] = 256,
        max_reasks: Annotated[
            int, typer.Option("--max-reasks", min=0, help="toolshim's re-asks per case.")
        ] = 2,
        output: Annotated[
            Path, typer.Option("--output", "-o", help="The JSON report to write.")
        ] = DEFAULT_OUTPUT,
        chart: Annotated[
            Path | None,
            typer.Option(
                "--chart", help="The PNG chart to write \\[default: the report's name, .png]."
            ),
        ] = None,
        resume: Annotated[
            bool,
            typer.Option(
                "--resume", help="Keep the cases already in --output and run only the rest."
            ),
        ] = False,
        report_only: Annotated[
            bool,
            typer.Option(
                "--report-only",
                help="Run nothing: print the tables and write the chart of the report at --output "
                "(with --config/--mode/--dialect/--strategy: only those and the baselines).",
            ),
        ] = False,
        markdown: Annotated[
            bool,
            typer.Option("--markdown", help="Also print the accuracy table as Markdown."),
        ] = False,
        suite: Annotated[
            str,
            typer.Option(
                "--suite",
                help="bfcl (single-turn BFCL cases) | agent (whole tool loops: call, result, "
                "answer; --categories picks kinds: " + ", ".join(KINDS) + ") | coding (Claude "
                "Code and Codex CLI, headless, on small real tasks in fresh folders; --client, "
                "--task; --baseline native runs the client straight to the model server).",
            ),
        ] = "bfcl",
        parallel: Annotated[
            int,
            typer.Option(
                "--parallel",
                min=1,
                help="Runs at once (the embedded model gets as many request slots).",
            ),
        ] = 1,
        max_turns: Annotated[
            int, typer.Option("--max-turns", min=1, help="agent suite: model turns per task.")
        ] = 6,
        budget: Annotated[
            float | None,
            typer.Option(
                "--budget",
                min=1,
                help="agent and coding suites: seconds per task (else a hang) \\[agent 300, "
                "coding 900].",
                show_default=False,
            ),
        ] = None,
        client: Annotated[
            list[str] | None,
            typer.Option("--client", help="coding suite: claude, codex (repeatable) \\[both]."),
        ] = None,
        task: Annotated[
            list[str] | None,
            typer.Option("--task", help="coding suite: run only these task ids (repeatable)."),
        ] = None,
        keep: Annotated[
            Path | None,
            typer.Option(
                "--keep",
                help="coding suite: keep each task's folder and the client's log under this "
                "folder.",
            ),
        ] = None,
        apply: Annotated[
            bool,
            typer.Option(
                "--apply",
                help="Then store the best configuration for the model (BFCL and agent suite "
                "together) in the registry, source eval.",
            ),
        ] = False,
        other_report: Annotated[
            Path | None,
            typer.Option(
                "--other-report",
                help="--apply: the other suite's report \\[default: toolshim-agent-eval.json "
                "for bfcl, toolshim-eval.json for agent, when present].",
            ),
        ] = None,
        one_suite: Annotated[
            bool,
            typer.Option(
                "--one-suite",
                help="--apply: pick from one suite when the other's report is missing.",
            ),
        ] = False,
        registry: RegistryOption = None,
    ) -> None:
        def then_apply() -> None:
            if apply:
                apply_eval(
                    suite=suite.strip().lower(),
                    output=output,
                    other_report=other_report,
                    registry=registry,
                    one_suite=one_suite,
                )

        if suite.strip().lower() == "coding":
            from toolshim.cli.eval_coding import run_coding_suite

            routes = ["toolshim"] + [
                b.strip().lower() for b in _split(baseline) if b.strip().lower() != "none"
            ]
            if baseline is None:
                routes.append("native")
            coding_output = (
                output if output != DEFAULT_OUTPUT else Path("toolshim-coding-eval.json")
            )
            serve_options: dict[str, Any] = {"max_reasks": max_reasks}
            for name, values in (("mode", mode), ("dialect", dialect), ("strategy", strategy)):
                if values:
                    serve_options[name] = _split(values)[0]
            try:
                run_coding_suite(
                    upstream=upstream,
                    model_file=model_file,
                    local_model=local_model,
                    ctx_size=ctx_size,
                    threads=threads,
                    clients=_split(client),
                    routes=list(dict.fromkeys(routes)),
                    task_ids=_split(task),
                    limit=limit if limit != 50 else 0,
                    budget=budget or 900.0,
                    max_turns=max_turns if max_turns != 6 else 12,
                    output=coding_output,
                    resume=resume,
                    report_only=report_only,
                    markdown=markdown,
                    keep=keep,
                    serve_options=serve_options,
                )
            except ToolshimError as exc:
                err_console.print(Text.assemble(("error: ", "red"), exc.message))
                raise typer.Exit(2) from exc
            return
        if suite.strip().lower() == "agent":
            from toolshim.cli.eval_agent import run_agent_suite

            run_agent_suite(
                upstream=upstream,
                model=model,
                model_file=model_file,
                local_model=local_model,
                ctx_size=ctx_size or 4096,
                threads=threads,
                api_key=api_key,
                configs=_split(config),
                modes=_split(mode),
                dialects=_split(dialect),
                strategies=_split(strategy),
                baselines=_split(baseline),
                kinds=_split(categories),
                limit=limit,
                temperature=temperature,
                max_reasks=max_reasks,
                max_turns=max_turns,
                budget=budget or 300.0,
                parallel=parallel,
                output=output,
                resume=resume,
                report_only=report_only,
                markdown=markdown,
            )
            then_apply()
            return
        if suite.strip().lower() != "bfcl":
            err_console.print(
                Text.assemble(
                    ("error: ", "red"), f"unknown suite {suite!r}; use bfcl, agent or coding"
                )
            )
            raise typer.Exit(2)

        def named_configs() -> list[EvalConfig]:
            return build_configs(
                _split(mode),
                _split(dialect),
                _split(strategy),
                _split(config),
                _split(baseline) or list(BASELINES),
            )

        if report_only:
            try:
                meta, records = load_report(output)
            except ToolshimError as exc:
                err_console.print(Text.assemble(("error: ", "red"), exc.message))
                raise typer.Exit(2) from None
            if mode or dialect or strategy or config:
                # Only the named configurations (and the baselines): the tables then count
                # the cases these finished, not the fewer that every configuration did.
                try:
                    labels = {c.label for c in named_configs()}
                except ToolshimError as exc:
                    err_console.print(Text.assemble(("error: ", "red"), exc.message))
                    raise typer.Exit(2) from None
                records = [r for r in records if r.config in labels]
            _show(records, chart or output.with_suffix(".png"), markdown, title=_title(meta))
            then_apply()
            return
        try:
            configs = named_configs()
            cases = load_cases(
                _split(categories) or list(DEFAULT_CATEGORIES),
                limit=limit or None,
                seed=None if first else seed,
            )
            with (
                sigterm_as_interrupt(),
                upstream_for_eval(
                    upstream, model_file, local_model, ctx_size or 4096, threads, parallel
                ) as (
                    base_url,
                    served_model,
                    described,
                    served_facts,
                ),
            ):
                records = asyncio.run(
                    _evaluate(
                        base_url=base_url,
                        model=model or served_model,
                        api_key=api_key,
                        configs=configs,
                        cases=cases,
                        limit=limit or None,
                        seed=None if first else seed,
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
        then_apply()


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
