"""``toolshim eval``: BFCL's cases through toolshim's configurations and two baselines, scored by BFCL's checker."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from toolshim.cli._eval_suite import Options as SuiteOptions
from toolshim.cli._options import RegistryOption, UpstreamApiKeyOption
from toolshim.cli.eval_apply import DEFAULT_BFCL_OUTPUT, apply_eval
from toolshim.errors import ToolshimError
from toolshim.evaluation.agent_tasks import KINDS
from toolshim.evaluation.bfcl import DEFAULT_CATEGORIES
from toolshim.evaluation.bfcl_multi_turn import MULTI_TURN_ALIAS, is_multi_turn

__all__ = ["register"]

HELP = """Score toolshim on the Berkeley Function Calling Leaderboard (BFCL).

Runs BFCL's cases through every configuration you name and through two baselines on the same cases: `native` (the tools sent straight to the upstream, only `tool_calls` read: what you get without toolshim) and `bfcl-prompt` (BFCL's own prompt-mode system prompt and decoder). Each reply is scored with BFCL's own AST checker; one table per category shows accuracy, well-formed rate (the reply decoded into calls to offered functions, right or wrong), mean LLM calls and mean latency per case. Writes a JSON report (every case, rewritten as the run goes; --resume continues it) and a PNG chart.

Configurations: --config MODE\\[:DIALECT\\[:STRATEGY]]\\[+constrain]\\[+served]\\[+doubt] (repeatable; +constrain: constrained emulation, +served: the registry seeded with the embedded model's own facts, as toolshim serve does, +doubt: fact doubt set, a call the model opened unsure of answered without tools), and/or --mode/--dialect/--strategy (each repeatable; every combination runs). Example:

toolshim eval --upstream http://127.0.0.1:8080/v1 --config force:json --config force:pythonic --config auto --limit 20

--apply then picks the best configuration for the model, judged on this report and the other suite's together (combined score: the mean of the BFCL and agent-suite overall accuracies, each on the cases every candidate ran), and stores its dialect, strategy and constraint in the capability registry (source eval), where serve, chat and run find them. Example: toolshim eval --report-only -o bfcl.json --other-report agent.json --apply

BFCL's multi-turn categories (--categories multi_turn): whole conversations of several user turns on BFCL's simulated file system, Twitter, messaging, trading, travel and vehicle APIs; every call is executed and its result sent back, until the model answers or --max-steps runs out; scored by BFCL's multi-turn checker (the APIs' state and the results after every turn). The table adds turns, steps, LLM calls per case and per turn, tokens and seconds per case. Example: toolshim eval --categories multi_turn_base --first --limit 20 --config auto+served -o bfcl-multi-turn.json

Without --upstream the embedded model runs (toolshim\\[local]); --model-file PATH.gguf or --local-model NAME picks another. Needs bfcl-eval: pip install 'toolshim\\[eval]' && pip install --no-deps bfcl-eval==2026.3.23
"""

CATEGORIES_HELP = (
    "BFCL categories, comma-separated \\[default: "
    + ",".join(DEFAULT_CATEGORIES)
    + "]; multi_turn (or multi_turn_base, multi_turn_miss_func, multi_turn_miss_param, "
    "multi_turn_long_context) runs BFCL's multi-turn conversations instead."
)
DEFAULT_OUTPUT = DEFAULT_BFCL_OUTPUT

err_console = Console(stderr=True)


def _split(values: list[str] | None) -> list[str]:
    return [v.strip() for raw in values or [] for v in raw.split(",") if v.strip()]


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
            int | None,
            typer.Option(
                "--limit",
                min=0,
                help="Cases per category, 0: all \\[bfcl 50, multi-turn 20, agent 50 a kind, "
                "coding all].",
                show_default=False,
            ),
        ] = None,
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
            int | None,
            typer.Option(
                "--max-tokens",
                min=0,
                help="Output token limit per request, 0: none \\[bfcl 256, multi-turn 512].",
                show_default=False,
            ),
        ] = None,
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
            int | None,
            typer.Option(
                "--max-turns",
                min=1,
                help="agent and coding suites: model turns per task \\[agent 6, coding 12].",
                show_default=False,
            ),
        ] = None,
        max_steps: Annotated[
            int | None,
            typer.Option(
                "--max-steps",
                min=1,
                help="BFCL multi-turn: model steps a user turn may take before the case is "
                "force-quit (a fail) \\[BFCL's 20].",
                show_default=False,
            ),
        ] = None,
        budget: Annotated[
            float | None,
            typer.Option(
                "--budget",
                min=1,
                help="agent and coding suites, BFCL multi-turn: seconds per task or case (else "
                "a hang) \\[agent 300, coding 900, multi-turn 1800].",
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
        def fail(message: str) -> None:
            err_console.print(Text.assemble(("error: ", "red"), message))
            raise typer.Exit(2)

        def then_apply() -> None:
            if apply:
                apply_eval(
                    suite=suite.strip().lower(),
                    output=output,
                    other_report=other_report,
                    registry=registry,
                    one_suite=one_suite,
                )

        options = SuiteOptions(
            upstream=upstream,
            model=model,
            model_file=model_file,
            local_model=local_model,
            ctx_size=ctx_size,
            threads=threads,
            api_key=api_key,
            configs=_split(config),
            modes=_split(mode),
            dialects=_split(dialect),
            strategies=_split(strategy),
            baselines=_split(baseline),
            limit=limit,
            seed=None if first else seed,
            temperature=temperature,
            max_tokens=max_tokens,
            max_reasks=max_reasks,
            parallel=parallel,
            output=output,
            resume=resume,
            report_only=report_only,
            markdown=markdown,
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
                    dataclasses.replace(options, output=coding_output),
                    clients=_split(client),
                    routes=list(dict.fromkeys(routes)),
                    task_ids=_split(task),
                    budget=budget or 900.0,
                    max_turns=max_turns or 12,
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
                options,
                kinds=_split(categories),
                max_turns=max_turns or 6,
                budget=budget or 300.0,
            )
            then_apply()
            return
        if suite.strip().lower() != "bfcl":
            fail(f"unknown suite {suite!r}; use bfcl, agent or coding")
        cats = _split(categories)
        multi_turn = any(is_multi_turn(c) for c in cats)
        if multi_turn and not all(is_multi_turn(c) for c in cats):
            fail(
                "BFCL's multi-turn categories run apart from the single-turn ones (their "
                f"report differs); run --categories {MULTI_TURN_ALIAS} on its own"
            )

        if apply and multi_turn:
            fail("--apply weighs the single-turn BFCL and agent reports, not multi-turn ones")
        if multi_turn:
            from toolshim.cli.eval_multi_turn import (
                DEFAULT_MULTI_TURN_OUTPUT,
                run_multi_turn_suite,
            )

            if output == DEFAULT_OUTPUT:
                options = dataclasses.replace(options, output=DEFAULT_MULTI_TURN_OUTPUT)
            run_multi_turn_suite(options, categories=cats, max_steps=max_steps, budget=budget)
            return
        from toolshim.cli.eval_bfcl import run_bfcl_suite

        run_bfcl_suite(options, categories=cats, chart=chart)
        then_apply()
