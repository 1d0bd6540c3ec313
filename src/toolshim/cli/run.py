"""``toolshim run AGENT_FILE``: run a declarative agent (phases of instructions and Python tools)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel

from toolshim.agent.agentfile import AgentFile, PhaseSpec, load_agent_file
from toolshim.agent.events import (
    AgentEvent,
    RunFinished,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    TurnStarted,
)
from toolshim.agent.guards import call_signature
from toolshim.agent.phases import RunResult, arun_agent_file
from toolshim.agent.trace import TracingUpstream
from toolshim.cli._common import (
    check_upstream_choice,
    fail,
    fail_for,
    registry_and_target,
)
from toolshim.cli._options import (
    CtxSizeOption,
    DialectOption,
    LocalModelOption,
    RegistryOption,
    StrategyOption,
    TemperatureOption,
    UpstreamApiKeyOption,
    UpstreamOption,
)
from toolshim.dialects import get_dialect
from toolshim.engine.engine import Engine
from toolshim.engine.options import parse_mode, parse_strategy
from toolshim.errors import ConfigError, ToolshimError, UpstreamError
from toolshim.upstreams.openai_http import OpenAIUpstream

__all__ = ["register"]

_PREVIEW = 100
_REPLY_LIMIT = 4000

EPILOG = (
    "An agent file (TOML or JSON) holds a list of phases; each phase's final answer is the "
    "next one's input, and the last answer is printed on stdout. Example (TOML):\n\n"
    "    \\[\\[phases]]\n"
    '    name = "research"\n'
    '    instructions = "Find the weather for the city the user names."\n'
    '    tools = \\["weather_tools:get_weather", "calculate"]  # module:function, built-in\n'
    '    mode = "force"                                      # or use_native_tools = false\n'
    "    max_turns = 6\n\n"
    "Top-level keys: phases, name, description, and model, mode, dialect, max_turns as defaults "
    "for the phases, and mcp: MCP servers (\\[\\[mcp]] tables with command or url) whose tools "
    "every phase may call. Phase keys: name, instructions, tools, model, mode, "
    "use_native_tools, dialect, max_turns, mcp. A tool is a 'module:function' import path or a built-in tool's name "
    "(calculate, convert_units, current_time). Seed 002's cascade files load as they are: "
    "'cascade_id' is read as 'name' and 'tackle' as 'tools'. A phase that answers with nothing "
    "fails the run, since the next phase would get an empty message. "
    "Exit codes: 0 done, 1 the model or upstream failed, 2 a problem with the file or flags, "
    "3 a phase stopped on its turn limit (or a loop) without an answer."
)

UNANSWERED_EXIT = 3


def register(app: typer.Typer) -> None:
    app.command("run", epilog=EPILOG)(run_command)


def run_command(
    agent_file: Annotated[
        Path,
        typer.Argument(help="The agent file (.toml or .json) with its phases.", show_default=False),
    ],
    input: Annotated[
        str,
        typer.Option(
            "--input",
            "-i",
            help="The first phase's input: JSON (an object is shown to the model as JSON), or "
            "plain text; '-' reads it from stdin.",
        ),
    ] = "{}",
    upstream: UpstreamOption = None,
    local_model: LocalModelOption = None,
    ctx_size: CtxSizeOption = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model", "-m", help="Model for phases without one (default: the upstream's first)."
        ),
    ] = None,
    mode: Annotated[
        str | None,
        typer.Option(
            "--mode",
            envvar="TOOLSHIM_MODE",
            help="auto, off, fallback, force or strip, for phases without one (default: auto).",
        ),
    ] = None,
    dialect: DialectOption = None,
    strategy: StrategyOption = None,
    registry: RegistryOption = None,
    api_key: UpstreamApiKeyOption = None,
    temperature: TemperatureOption = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help="Print the whole run as JSON: phases, calls, results, metadata."
        ),
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            "-v",
            help="Show each turn on stderr: messages sent, raw reply, calls, tool results.",
        ),
    ] = False,
) -> None:
    """Run an agent file: each phase's instructions and Python tools, against any model."""
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        spec = load_agent_file(agent_file)
        first_input = _read_input(input)
        if mode is not None:
            parse_mode(mode)
        if strategy is not None:
            parse_strategy(strategy)
        if dialect is not None:
            get_dialect(dialect)
        check_upstream_choice(upstream, None, local_model)
    except ConfigError as exc:
        fail(err, exc.message)
    report = _Report(err, verbose=verbose, phases=len(spec.phases))
    params = {"temperature": temperature} if temperature is not None else None
    try:
        with registry_and_target(
            registry, upstream, None, err, local_model=local_model, ctx_size=ctx_size
        ) as (store, target):
            traced = TracingUpstream(
                OpenAIUpstream(target.base_url, key=target.key, api_key=api_key),
                on_request=report.request if verbose else None,
                on_reply=report.reply if verbose else None,
                on_error=report.upstream_error if verbose else None,
            )
            engine = Engine(
                traced, mode=mode or "auto", strategy=strategy, dialect=dialect, registry=store
            )
            result = asyncio.run(
                _run(spec, first_input, engine, model or target.model, params, report)
            )
    except ToolshimError as exc:
        fail_for(err, exc, 2 if isinstance(exc, ConfigError) else 1)
    for warning in result.warnings:
        err.print(f"[yellow]warning:[/] {escape(warning)}")
    if as_json:
        typer.echo(json.dumps(result.to_dict(), ensure_ascii=False, indent=2))
    else:
        typer.echo(result.output)
    if result.unanswered:
        names = ", ".join(repr(n) for n in result.unanswered)
        err.print(f"[red]error:[/] phase {escape(names)} stopped without an answer")
        raise typer.Exit(UNANSWERED_EXIT)


async def _run(
    spec: AgentFile,
    first_input: Any,
    engine: Engine,
    model: str | None,
    params: dict[str, Any] | None,
    report: _Report,
) -> RunResult:
    try:
        return await arun_agent_file(
            spec, first_input, engine=engine, model=model, params=params, on_event=report.event
        )
    finally:
        await engine.aclose()


def _read_input(text: str) -> Any:
    if text == "-":
        text = typer.get_text_stream("stdin").read()
    stripped = text.strip()
    try:
        return json.loads(stripped)
    except ValueError as exc:
        if stripped[:1] in ("{", "[", '"'):
            raise ConfigError(f"--input is not valid JSON: {exc}") from exc
        return text


class _Report:
    """Progress lines on stderr; with ``verbose``, every turn in detail (seed 002's debug view)."""

    def __init__(self, console: Console, *, verbose: bool, phases: int) -> None:
        self.console = console
        self.verbose = verbose
        self.phases = phases
        self.requests = 0

    def event(self, phase: PhaseSpec, number: int, event: AgentEvent) -> None:
        out = self.console
        if isinstance(event, TurnStarted) and event.turn == 1:
            names = [t.name for t in phase.tools] + [f"MCP {s.label}" for s in phase.mcp]
            tools = ", ".join(names) or "no tools"
            out.rule(f"phase {number}/{self.phases}: {escape(phase.name)} ({escape(tools)})")
            if self.verbose:
                out.print("[bold]turn 1[/]")
        elif isinstance(event, TurnStarted) and self.verbose:
            out.print(f"[bold]turn {event.turn}[/]")
        elif isinstance(event, ToolCallStarted) and self.verbose:
            signature = call_signature(event.name, event.arguments)
            out.print(f"  [cyan]→ call[/] {escape(signature)}")
        elif isinstance(event, ToolCallFinished):
            run = event.run
            mark = "[green]✔[/]" if not run.is_error else "[red]✘[/]"
            shown = _preview(run.result, _PREVIEW if not self.verbose else 600)
            signature = call_signature(run.name, run.arguments, limit=60)
            out.print(
                f"  {mark} {escape(signature)} → {escape(shown)} "
                f"[dim]({run.status}, {run.duration:.2f} s)[/]"
            )
        elif isinstance(event, TurnFinished) and self.verbose:
            meta = event.record.meta
            how = "no metadata"
            if meta is not None:
                how = (
                    f"mode {meta.mode}, {'emulated' if meta.emulated else 'native'}"
                    f"{f' ({meta.dialect})' if meta.dialect else ''}, {meta.llm_calls} LLM "
                    f"call(s), {meta.reasks} re-ask(s)"
                )
            calls = ", ".join(event.record.tool_calls) or "none (final answer)"
            out.print(f"  [dim]turn {event.turn}: calls: {escape(calls)}; {escape(how)}[/]")
        elif isinstance(event, RunFinished):
            result = event.result
            state = "answered" if result.completed else f"stopped: {result.stopped}"
            out.print(
                f"[dim]phase {escape(phase.name)}: {state}, {len(result.turns)} turn(s), "
                f"{len(result.tool_runs)} tool call(s), {result.usage.total_tokens} tokens[/]"
            )
            if self.verbose:
                out.print(Panel(escape(_preview(result.output, _REPLY_LIMIT)), title="answer"))

    def request(self, body: Mapping[str, Any]) -> None:
        self.requests += 1
        out = self.console
        tools = body.get("tools") or []
        kind = f"{len(tools)} native tool(s)" if tools else "no native tools"
        out.print(
            f"  [magenta]→ request {self.requests}[/] model={escape(repr(body.get('model')))}, "
            f"{kind}, {len(body.get('messages') or [])} message(s):"
        )
        for i, message in enumerate(body.get("messages") or []):
            out.print("    " + escape(_describe_message(i, message)))

    def reply(self, body: Mapping[str, Any], reply: Mapping[str, Any]) -> None:
        choices = reply.get("choices") or [{}]
        message = choices[0].get("message") or {}
        text = message.get("content") or ""
        calls = message.get("tool_calls") or []
        parts = [str(text)] if text else []
        for item in calls:
            function = item.get("function") or {}
            parts.append(f"[native tool call] {function.get('name')}({function.get('arguments')})")
        shown = _preview("\n".join(parts) or "(empty)", _REPLY_LIMIT)
        finish = choices[0].get("finish_reason")
        self.console.print(
            Panel(escape(shown), title=f"← raw reply (finish_reason={finish})", expand=False)
        )

    def upstream_error(self, body: Mapping[str, Any], exc: UpstreamError) -> None:
        self.console.print(f"  [yellow]← upstream error:[/] {escape(exc.message)}")


def _describe_message(index: int, message: Mapping[str, Any]) -> str:
    content = message.get("content")
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    text = text if content is not None else ""
    flags = []
    if message.get("tool_calls"):
        calls = message["tool_calls"]
        flags.append(
            "calls " + ", ".join(str((c.get("function") or {}).get("name")) for c in calls)
        )
    if message.get("tool_call_id"):
        flags.append(f"result of {message['tool_call_id']}")
    flag_text = f" [{'; '.join(flags)}]" if flags else ""
    role = str(message.get("role", "?"))
    return f"[{index}] {role:<9} {len(text):>6} chars{flag_text} | {_preview(text, _PREVIEW)}"


def _preview(text: str, limit: int) -> str:
    flat = " ".join(text.split()) if limit <= _PREVIEW else text.strip()
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
