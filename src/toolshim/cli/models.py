"""``toolshim models``: see, correct, probe and refresh what toolshim knows about each model."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from toolshim.capabilities.discovery import (
    DEFAULT_TIMEOUT,
    DiscoveredModel,
    apply_discovery,
    discover,
    list_upstream_models,
)
from toolshim.capabilities.facts import (
    Source,
    coerce_value,
)
from toolshim.capabilities.probe import DEFAULT_PROBE_TIMEOUT, probe_tools, record_probe
from toolshim.capabilities.registry import ANY_UPSTREAM, fact_dict
from toolshim.cli._common import registry_key
from toolshim.cli._models_common import (
    ApiKeyOpt,
    JsonOpt,
    ModelArg,
    UpstreamOpt,
    err,
    flag,
    guard,
    need_upstream,
    readable,
)
from toolshim.cli._models_render import (
    ago,
    footer,
    out,
    print_json,
    print_report,
    report_json,
    support_markup,
)
from toolshim.cli._options import RegistryOption
from toolshim.errors import ConfigError
from toolshim.local.server import EMBEDDED_KEY_PREFIX
from toolshim.upstreams.openai_http import OpenAIUpstream

__all__ = ["models_app", "register"]

models_app = typer.Typer(
    name="models",
    help=(
        "What toolshim knows about each model: native tool support, preferred dialect, "
        "strategy and constraint, context window, each with the source it came from (user > "
        "probe > runtime_error > eval > upstream > profile) and when it was learned.\n\n"
        "Facts are kept per upstream in a SQLite file, or in PostgreSQL or Redis shared by "
        "several replicas (--registry, TOOLSHIM_REGISTRY)."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def register(app: typer.Typer) -> None:
    """Add the ``models`` command group to the ``toolshim`` app."""
    app.add_typer(models_app, name="models")


# -- commands ---------------------------------------------------------------------------------


@models_app.command("list")
def list_models(
    upstream: UpstreamOpt = None,
    registry: RegistryOption = None,
    api_key: ApiKeyOpt = None,
    as_json: JsonOpt = False,
    timeout: Annotated[
        float, typer.Option(help="Seconds to wait for the upstream's model list.")
    ] = DEFAULT_TIMEOUT,
) -> None:
    """The upstream's models with their tool status and its source, plus stored facts.

    Without --upstream, lists every model the store has facts about.
    """

    def run() -> None:
        with readable(registry) as reg:
            key = registry_key(upstream) if upstream else None
            # An embedded model's key names no server to ask (it runs only inside a command).
            asks = key is not None and not key.startswith(EMBEDDED_KEY_PREFIX)
            rows: list[dict[str, Any]] = []
            server = None
            if key is not None and asks:
                listing = asyncio.run(
                    list_upstream_models(key, request_timeout=timeout, api_key=api_key)
                )
                server = listing.server
                reg.record_seen(key, listing.models)
                listed = set(listing.models)
                stored = {m for u, m, _ in reg.known(key)} - listed
                for model in [*listing.models, *sorted(stored)]:
                    rows.append({**reg.summary(key, model), "listed": model in listed})
            else:
                server = "the embedded model; stored facts only" if key else None
                for scope, model, _ in reg.known(key):
                    rows.append({**reg.summary(scope, model), "listed": None})
            if as_json:
                print_json(
                    {"upstream": key, "server": server, "registry": reg.location, "models": rows}
                )
                return
            title = f"{len(rows)} models" + (f" at {key} ({server})" if key else " in the store")
            table = Table(title=title, title_justify="left")
            for column in ("model", "tools", "source", "learned", "dialect", "context"):
                table.add_column(column)
            if not upstream:
                table.add_column("upstream")
            for row in rows:
                tools = row["native_tools"]
                cells = [
                    row["model"]
                    + ("" if row["listed"] in (None, True) else " [dim](not listed)[/]"),
                    support_markup(tools["value"]),
                    tools["source"] or "-",
                    ago(tools["learned_at"]),
                    row["dialect"],
                    str(row["context_window"] or "-"),
                ]
                if not upstream:
                    cells.append(row["upstream"])
                table.add_row(*cells)
            out.print(table)
            footer(reg)
            if asks and any(r["native_tools"]["value"] == "unknown" for r in rows):
                out.print(
                    "[dim]unknown: run `toolshim models refresh` (asks the upstream) or "
                    "`toolshim models probe MODEL` (one test request).[/]"
                )

    guard(run)


@models_app.command("local")
def local_models(as_json: JsonOpt = False) -> None:
    """The embedded models toolshim can serve by name (`serve --local-model NAME`): size,
    context, whether their parts are installed and assembled, and how to install them."""

    def run() -> None:
        from toolshim.local.model import DEFAULT_MODEL, KNOWN_MODELS, missing_packages, model_path

        rows: list[dict[str, Any]] = []
        for name, known in KNOWN_MODELS.items():
            missing = missing_packages(name)
            rows.append(
                {
                    "name": name,
                    "description": known.description,
                    "size_mb": round(known.size / 1e6),
                    "context": known.context,
                    "default": name == DEFAULT_MODEL,
                    "installed": not missing,
                    "assembled": model_path(name).is_file(),
                    "install": known.install_hint,
                }
            )
        if as_json:
            print_json({"models": rows})
            return
        table = Table(
            title="embedded models (toolshim serve --local-model NAME)", title_justify="left"
        )
        table.add_column("name", no_wrap=True)
        for column in ("size", "context", "state", "about"):
            table.add_column(column)
        for row in rows:
            if row["assembled"]:
                state = "[green]ready[/]"
            elif row["installed"]:
                state = "installed (assembled on first use)"
            else:
                state = f"[yellow]{escape(row['install'])}[/]"
            name = row["name"] + (" [dim](default)[/]" if row["default"] else "")
            table.add_row(
                name, f"{row['size_mb']} MB", str(row["context"]), state, row["description"]
            )
        out.print(table)

    guard(run)


@models_app.command("show")
def show(
    model: ModelArg,
    upstream: UpstreamOpt = None,
    registry: RegistryOption = None,
    as_json: JsonOpt = False,
) -> None:
    """Why toolshim treats MODEL as it does: every fact, its source, its time, what it overrides."""

    def run() -> None:
        with readable(registry) as reg:
            key = registry_key(upstream) if upstream else ANY_UPSTREAM
            report = reg.explain(key, model)
            if as_json:
                print_json(report_json(report, reg))
                return
            print_report(report, reg)

    guard(run)


@models_app.command("set")
def set_facts(
    model: ModelArg,
    tools: Annotated[
        str | None, flag("--tools", "Native tool calling: yes, no or unknown.")
    ] = None,
    dialect: Annotated[
        str | None, flag("--dialect", "Preferred emulation dialect (json, hermes, ...).")
    ] = None,
    strategy: Annotated[
        str | None, flag("--strategy", "Preferred emulation strategy: single or decision.")
    ] = None,
    constrain: Annotated[
        str | None,
        flag("--constrain", "Hold emulated replies to a JSON Schema: yes/no/unknown."),
    ] = None,
    parallel_calls: Annotated[
        str | None, flag("--parallel-calls", "Several calls in one reply: yes/no/unknown.")
    ] = None,
    structured_output: Annotated[
        str | None, flag("--structured-output", "JSON-Schema response_format: yes/no/unknown.")
    ] = None,
    tool_choice: Annotated[
        str | None, flag("--tool-choice", "tool_choice honoured: yes/no/unknown.")
    ] = None,
    context_window: Annotated[
        int | None, flag("--context-window", "Context window in tokens.")
    ] = None,
    prefill: Annotated[
        str | None,
        flag(
            "--prefill",
            "The upstream continues an assistant message that ends a request (emulation then "
            "asks for more calls by continuing a reply of one): yes/no/unknown.",
        ),
    ] = None,
    doubt: Annotated[
        str | None,
        flag(
            "--doubt",
            "Read a reply that opens with a call the model was unsure of as no call (the "
            "upstream must return logprobs; the bar was measured on Qwen2.5-Coder-0.5B): "
            "yes/no/unknown.",
        ),
    ] = None,
    note: Annotated[
        str, typer.Option("--note", help="Why (kept with the fact).")
    ] = "set with `toolshim models set`",
    upstream: UpstreamOpt = None,
    registry: RegistryOption = None,
    as_json: JsonOpt = False,
) -> None:
    """Store facts about MODEL with source `user` (the strongest): they win over everything.

    Without --upstream (and TOOLSHIM_UPSTREAM) the facts hold at every upstream.
    """

    def run() -> None:
        from toolshim.dialects import available_dialects

        wanted = {
            "native_tools": tools,
            "dialect": dialect,
            "strategy": strategy,
            "constrain": constrain,
            "parallel_calls": parallel_calls,
            "structured_output": structured_output,
            "tool_choice": tool_choice,
            "context_window": context_window,
            "prefill": prefill,
            "doubt": doubt,
        }
        chosen = {k: coerce_value(k, v) for k, v in wanted.items() if v is not None}
        if not chosen:
            raise ConfigError(
                "nothing to set: pass --tools yes|no|unknown, --dialect D, --strategy S, "
                "--constrain, --parallel-calls, --structured-output, --tool-choice, "
                "--context-window, --prefill or --doubt"
            )
        if "dialect" in chosen and chosen["dialect"] not in available_dialects():
            raise ConfigError(
                f"unknown dialect {chosen['dialect']!r}; available: "
                f"{', '.join(available_dialects())}",
                param="dialect",
            )
        with readable(registry) as reg:
            key = registry_key(upstream) if upstream else ANY_UPSTREAM
            for name, value in chosen.items():
                reg.learn(key, model, name, value, Source.USER, detail=note)
            reg.flush()  # "stored" is said only once the store has it
            report = reg.explain(key, model)
            if as_json:
                print_json(report_json(report, reg))
                return
            scope = "every upstream" if key == ANY_UPSTREAM else key
            settled = ", ".join(f"{k}={v}" for k, v in chosen.items())
            out.print(f"stored for {model} at {scope} (source user): {settled}")
            print_report(report, reg)

    guard(run)


@models_app.command("probe")
def probe(
    model: ModelArg,
    upstream: UpstreamOpt = None,
    registry: RegistryOption = None,
    api_key: ApiKeyOpt = None,
    timeout: Annotated[
        float, typer.Option(help="Seconds to wait for the answer; no answer is inconclusive.")
    ] = DEFAULT_PROBE_TIMEOUT,
    save: Annotated[
        bool, typer.Option("--save/--no-save", help="Store a conclusive result (source probe).")
    ] = True,
    as_json: JsonOpt = False,
) -> None:
    """Send MODEL one request with a dummy tool and classify the answer.

    supported: native tool_calls came back. unsupported: the upstream rejected tools, or the
    model wrote the call as text that the server did not parse. inconclusive: a timeout, a
    network error, another error, or a plain text answer; nothing is stored then.
    """

    def run() -> None:
        url = need_upstream(upstream, "probe")
        with readable(registry) as reg:

            async def go() -> Any:
                client = OpenAIUpstream(url, api_key=api_key, timeout=timeout + 1)
                try:
                    return await probe_tools(client, model, time_limit=timeout)
                finally:
                    await client.aclose()

            if not as_json:
                err.print(f"probing {model} at {url} (up to {timeout:g} s)…")
            result = asyncio.run(go())
            standing = record_probe(reg, url, result) if save else None
            if as_json:
                print_json(
                    {
                        "model": model,
                        "upstream": url,
                        "outcome": result.outcome.value,
                        "detail": result.detail,
                        "seconds": round(result.seconds, 3),
                        "saved": standing is not None,
                        "native_tools": fact_dict(standing) if standing else None,
                    }
                )
                return
            colour = {"supported": "green", "unsupported": "red"}.get(
                result.outcome.value, "yellow"
            )
            out.print(
                f"[{colour}]{result.outcome.value}[/] — {result.detail} ({result.seconds:.1f} s)"
            )
            if standing is not None:
                out.print(
                    f"native_tools is now {standing.value} (from {standing.source.value})"
                    + ("" if standing.source is Source.PROBE else "; a stronger source still wins")
                )
            elif save:
                out.print("nothing stored (an inconclusive probe says nothing about the model).")

    guard(run)


@models_app.command("forget")
def forget(
    model: ModelArg,
    source: Annotated[
        list[str] | None, flag("--source", "Only facts from this source (repeatable).")
    ] = None,
    fact: Annotated[
        list[str] | None, flag("--fact", "Only this fact, e.g. native_tools (repeatable).")
    ] = None,
    upstream: UpstreamOpt = None,
    registry: RegistryOption = None,
    as_json: JsonOpt = False,
) -> None:
    """Delete stored facts about MODEL (at --upstream, or at every upstream).

    Shipped profiles stay: after forgetting, the profile (if any) is what toolshim knows.
    """

    def run() -> None:
        sources = [Source.parse(s) for s in source] if source else None
        names = [n.replace("-", "_") for n in fact] if fact else None
        for name in names or ():
            coerce_value(name, "unknown" if name != "context_window" else 1)
        with readable(registry) as reg:
            key = registry_key(upstream) if upstream else None
            removed = reg.forget(key, model, names=names, sources=sources)
            reg.flush()
            if as_json:
                print_json({"model": model, "upstream": key, "removed": removed})
                return
            where = key or "every upstream"
            out.print(
                f"forgot {removed} fact{'s' if removed != 1 else ''} about {model} at {where}"
            )

    guard(run)


@models_app.command("refresh")
def refresh(
    upstream: UpstreamOpt = None,
    registry: RegistryOption = None,
    api_key: ApiKeyOpt = None,
    model: Annotated[list[str] | None, flag("--model", "Only this model (repeatable).")] = None,
    timeout: Annotated[float, typer.Option(help="Seconds per upstream request.")] = DEFAULT_TIMEOUT,
    as_json: JsonOpt = False,
) -> None:
    """Re-read what the upstream says about its models and store it (source upstream).

    Ollama: /api/tags, then /api/show for each model (capabilities, context length, size).
    LM Studio, llama-server, vLLM, OpenRouter: what their model listings carry. A model that
    cannot be read is reported and skipped.
    """

    def run() -> None:
        url = need_upstream(upstream, "refresh")
        with readable(registry) as reg:
            done = 0

            def progress(found: DiscoveredModel) -> None:
                nonlocal done
                done += 1
                if not as_json:
                    state = (
                        f"[red]failed: {found.error}[/]"
                        if found.error
                        else f"{len(found.facts)} facts"
                    )
                    err.print(f"  [{done}] {found.name}: {state}")

            if not as_json:
                err.print(f"reading models at {url}…")
            started = time.perf_counter()
            discovery = asyncio.run(
                discover(
                    url, models=model, request_timeout=timeout, api_key=api_key, on_model=progress
                )
            )
            stored = apply_discovery(reg, url, discovery)
            if as_json:
                print_json({**discovery.as_dict(), "stored": stored})
                return
            seconds = time.perf_counter() - started
            out.print(
                f"{discovery.server} at {url}: {len(discovery.models)} models, {stored} facts stored "
                f"(source upstream) in {seconds:.1f} s"
            )
            for problem in discovery.problems:
                out.print(f"[yellow]could not read[/] {problem}")
            footer(reg)

    guard(run)
