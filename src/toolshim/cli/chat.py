"""``toolshim chat``: the interactive terminal client (seed 004) on any upstream or the embedded model."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from toolshim.cli._common import (
    ConsoleLogHandler,
    UpstreamTarget,
    check_upstream_choice,
    fail,
    fail_for,
    registry_and_target,
)
from toolshim.cli._options import (
    CtxSizeOption,
    DialectOption,
    LocalModelOption,
    ModelFileOption,
    ModeOption,
    RegistryOption,
    StrategyOption,
    TemperatureOption,
    TimeoutOption,
    UpstreamApiKeyOption,
    UpstreamOption,
)
from toolshim.errors import ConfigError, ToolshimError, UpstreamError

if TYPE_CHECKING:
    from toolshim.agent.tools import Tool
    from toolshim.capabilities.registry import Registry
    from toolshim.chat.session import ChatSettings
    from toolshim.mcp import MCPToolset
    from toolshim.upstreams.openai_http import OpenAIUpstream

__all__ = ["chat", "register"]

_HELP = """Chat with a model in the terminal, with tools, and swap models mid-conversation.

Every model gets tools: natively where it supports them, emulated (described in the prompt,
calls parsed from its text) where it does not. Each switch says which — `Tools: native`,
`Tools: emulated (json)` or `Tools: disabled` — and why (a profile, the upstream, a probe,
an upstream error, or you). For a model nothing is known about, the chat asks
`\\[y]es / \\[n]o / \\[a]uto-detect`; an upstream that rejects tools mid-session is answered with
emulation, then the chat asks whether to remember it.

Built-in demo tools: current_time, calculate (arithmetic, no eval), convert_units. Add your
own with --tools my_module:my_function (repeatable; the current directory is importable), and
the tools of MCP servers with --mcp "COMMAND ARGS" or --mcp URL (repeatable; needs
toolshim[mcp]), e.g. --mcp "npx -y @modelcontextprotocol/server-filesystem .".

Keys: Enter sends; Esc-Enter, or a line ending in a backslash, continues on a new line;
Ctrl-C cancels the reply being streamed (the upstream request is cancelled too); Ctrl-D
quits. Lines typed during a reply run after it (so /model use waits for the reply).
Commands: /model list, /model use NAME, /tools, /mcp, /mode MODE, /clear, /save FILE, /help,
/quit.

Environment: TOOLSHIM_CHAT_PROMPT_TIMEOUT (seconds a question waits, default 30),
TOOLSHIM_CHAT_HISTORY (input history file; default in the user data directory).
"""


def register(app: typer.Typer) -> None:
    """Add ``chat`` to the ``toolshim`` command."""
    app.command("chat", help=_HELP, no_args_is_help=False)(chat)


def chat(
    upstream: UpstreamOption = None,
    model_file: ModelFileOption = None,
    local_model: LocalModelOption = None,
    ctx_size: CtxSizeOption = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model", "-m", help="Model to start with. Default: the upstream's first model."
        ),
    ] = None,
    tools: Annotated[
        list[str] | None,
        typer.Option(
            "--tools",
            "-t",
            help="Your own tool as module:function (repeatable, or comma-separated).",
            show_default=False,
        ),
    ] = None,
    mcp: Annotated[
        list[str] | None,
        typer.Option(
            "--mcp",
            help='An MCP server whose tools the model may call: "COMMAND ARGS" (stdio) or an '
            "http(s):// URL (streamable HTTP). Repeatable.",
            show_default=False,
        ),
    ] = None,
    mcp_tools: Annotated[
        list[str] | None,
        typer.Option(
            "--mcp-tools",
            help="Offer only these tools of the --mcp servers (names as the servers list "
            "them; repeatable, or comma-separated). Small models pick better from a few.",
            show_default=False,
        ),
    ] = None,
    no_builtin_tools: Annotated[
        bool,
        typer.Option(
            "--no-builtin-tools", help="Leave out current_time, calculate and convert_units."
        ),
    ] = False,
    mode: ModeOption = "auto",
    dialect: DialectOption = None,
    strategy: StrategyOption = None,
    registry: RegistryOption = None,
    upstream_api_key: UpstreamApiKeyOption = None,
    temperature: TemperatureOption = None,
    max_turns: Annotated[
        int, typer.Option(help="Model turns per question (tool rounds included).", min=1)
    ] = 10,
    timeout: TimeoutOption = 600.0,
    refresh_models: Annotated[
        bool,
        typer.Option(
            "--refresh/--no-refresh",
            envvar="TOOLSHIM_REFRESH",
            help="At start, ask the upstream what its models can do (Ollama /api/show, at most "
            "5 s) and record it with source upstream.",
        ),
    ] = True,
) -> None:
    """Chat with a model in the terminal, with tools."""
    from toolshim.chat.builtin import load_tools
    from toolshim.chat.session import ChatSettings
    from toolshim.engine.options import EngineOptions

    err = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        options = EngineOptions.build(mode=mode, strategy=strategy, dialect=dialect)
        prompt_timeout = _prompt_timeout()
        loaded = load_tools(tools or (), builtin=not no_builtin_tools)
        servers = _mcp_servers(mcp or (), _names(mcp_tools or ()))
        check_upstream_choice(upstream, model_file, local_model)
    except ConfigError as exc:
        fail(err, exc.message)
    settings = ChatSettings(
        mode=options.mode,
        dialect=options.dialect,
        strategy=options.strategy.value if options.strategy else None,
        max_turns=max_turns,
        prompt_timeout=prompt_timeout,
        params={"temperature": temperature} if temperature is not None else {},
    )
    handler = ConsoleLogHandler(err)
    toolshim_log = logging.getLogger("toolshim")
    toolshim_log.addHandler(handler)
    toolshim_log.propagate = False
    try:
        with registry_and_target(
            registry, upstream, model_file, err, local_model=local_model, ctx_size=ctx_size
        ) as (store, target):
            code = asyncio.run(
                _session(
                    target,
                    upstream_api_key,
                    timeout,
                    store,
                    loaded,
                    settings,
                    model,
                    servers,
                    refresh_models=refresh_models,
                )
            )
    except ToolshimError as exc:
        fail_for(err, exc)
    finally:
        toolshim_log.removeHandler(handler)
        toolshim_log.propagate = True
    raise typer.Exit(code)


def _mcp_servers(texts: Sequence[str], only: Sequence[str]) -> MCPToolset | None:
    """The ``--mcp`` servers as one toolset (checked here: the SDK, each command line), each
    offering only the tools named in ``only`` when it is not empty."""
    if not texts:
        if only:
            raise ConfigError("--mcp-tools picks tools of --mcp servers; give --mcp too")
        return None
    from toolshim.mcp import MCPToolset, parse_server
    from toolshim.mcp.toolset import require_sdk

    require_sdk()
    servers = [parse_server(text) for text in texts]
    if only:
        servers = [dataclasses.replace(server, tools=tuple(only)) for server in servers]
    return MCPToolset(servers)


def _names(values: Sequence[str]) -> list[str]:
    return [name.strip() for value in values for name in value.split(",") if name.strip()]


def _prompt_timeout() -> float:
    text = os.environ.get("TOOLSHIM_CHAT_PROMPT_TIMEOUT", "").strip()
    if not text:
        return 30.0
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(
            f"TOOLSHIM_CHAT_PROMPT_TIMEOUT must be a number of seconds, not {text!r}"
        ) from None
    if value <= 0:
        raise ConfigError(f"TOOLSHIM_CHAT_PROMPT_TIMEOUT must be positive, not {text!r}")
    return value


async def _session(
    target: UpstreamTarget,
    api_key: str | None,
    read_timeout: float,
    store: Registry,
    tools: list[Tool],
    settings: ChatSettings,
    model: str | None,
    mcp: MCPToolset | None = None,
    *,
    refresh_models: bool = True,
) -> int:
    from toolshim.capabilities.discovery import refresh
    from toolshim.chat.session import ChatSession
    from toolshim.chat.terminal import make_terminal
    from toolshim.engine.engine import Engine
    from toolshim.upstreams.openai_http import OpenAIUpstream

    console = Console(highlight=False, soft_wrap=True)
    client = OpenAIUpstream(target.base_url, key=target.key, api_key=api_key, timeout=read_timeout)
    engine = Engine(
        client,
        mode=settings.mode,
        strategy=settings.strategy,
        dialect=settings.dialect,
        registry=store,
    )
    try:
        console.print(f"[bold]toolshim chat[/] · {client.key} · mode {settings.mode.value}")
        # Seed 004's startup refresh: what the upstream says about its models (bounded). The
        # embedded model's facts were just recorded from its own server, under its stable key.
        if refresh_models and not target.embedded:
            try:
                await asyncio.wait_for(refresh(store, target.base_url, api_key=api_key), 5.0)
            except TimeoutError:
                console.print("[dim](the upstream's model details took too long; skipped)[/]")
        chosen = model or target.model or await _first_model(client)
        async with contextlib.AsyncExitStack() as stack:
            if mcp:
                console.print(f"Starting {len(mcp.connections)} MCP server(s)…")
                await stack.enter_async_context(mcp)
                for warning in mcp.warnings:
                    console.print(f"[yellow]warning:[/] {escape(warning)}")
            session = ChatSession(engine, tools, make_terminal(console), settings, mcp=mcp)
            names = ", ".join(t.name for t in session.all_tools) or "none"
            console.print(f"Tools loaded: {escape(names)} (/tools for details)")
            return await session.run(chosen)
    finally:
        await engine.aclose()


async def _first_model(client: OpenAIUpstream) -> str:
    """The first model the upstream lists (ConfigError when it cannot be read or is empty)."""
    try:
        listing = await client.list_models()
    except UpstreamError as exc:
        raise ConfigError(
            f"cannot list the models at {client.base_url}: {exc.message}; pass --model NAME, or "
            "check that the upstream is running"
        ) from exc
    for entry in listing.get("data") or ():
        if isinstance(entry, dict) and entry.get("id"):
            return str(entry["id"])
    raise ConfigError(f"the upstream at {client.base_url} lists no models; pass --model NAME")
