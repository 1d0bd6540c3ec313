"""``toolshim serve``: run the OpenAI-compatible proxy in front of an upstream or the embedded model."""

from __future__ import annotations

import logging
import signal
import socket
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from toolshim.cli._caller_options import (
    AdminKeysOption,
    MaxChoicesOption,
    MaxOutputTokensOption,
    StoreKeyQuotaOption,
    StoreMaxSizeOption,
)
from toolshim.cli._common import (
    UpstreamTarget,
    check_upstream_choice,
    fail,
    fail_for,
    registry_and_target,
)
from toolshim.cli._listening import is_loopback, listen
from toolshim.cli._options import (
    BriefSystemOption,
    CompactToolsOption,
    ConnectTimeoutOption,
    CtxSizeOption,
    DefaultMaxTokensOption,
    DialectOption,
    LocalModelOption,
    ModelAliasOption,
    ModelFileOption,
    ModeOption,
    OfferToolsOption,
    RegistryOption,
    StrategyOption,
    TimeoutOption,
    TotalTimeoutOption,
    UpstreamApiKeyOption,
    UpstreamOption,
    UpstreamRetriesOption,
)
from toolshim.cli._serve_limits import (
    BodyTimeoutOption,
    DrainTimeoutOption,
    HeaderTimeoutOption,
    IdleTimeoutOption,
    MaxBodySizeOption,
    MaxConcurrentRequestsOption,
    MaxConnectionsOption,
    MaxMessagesOption,
    MaxToolsOption,
    build_limits,
)
from toolshim.engine.options import DEFAULT_MAX_TOKENS
from toolshim.errors import ConfigError, ToolshimError
from toolshim.redact import credential_values, redact, url_without_credentials

if TYPE_CHECKING:
    from toolshim.server import ProxyApp
    from toolshim.server.auth import AccessKeys

__all__ = ["register", "serve"]

_HELP = """Run the OpenAI-compatible proxy: point any OpenAI client at http://HOST:PORT/v1.

Requests with `tools` go to the upstream natively where the model supports them and are
emulated where it does not (tools described in the prompt, calls parsed out of the text,
validated, returned as real `tool_calls`). Without --upstream the embedded local model is
served (it is assembled on first use): the default qwen2.5-coder-0.5b, or --local-model
qwen2.5-coder-1.5b, at the context it was trained for (--ctx-size).

Endpoints: POST /v1/chat/completions (OpenAI), POST /v1/messages (Anthropic: Claude Code),
POST /v1/responses (OpenAI Responses: Codex CLI) with GET and DELETE /v1/responses/{id},
GET /v1/models and /v1/models/{id}, GET /healthz, GET /metrics.

Per request, a `toolshim` object in the body ({"mode", "strategy", "dialect", "max_reasks",
"constrain"}) or the headers x-toolshim-mode / -strategy / -dialect / -max-reasks override
these defaults.

Safe by default: it listens on 127.0.0.1; to listen on another address give it access keys
(--auth-keys FILE), or waive them with --allow-unauthenticated on a trusted network. Every
request is held to the limits below (sizes, counts, deadlines), each a flag.
"""


class _Stop(Exception):
    """SIGTERM arrived: shut down like Ctrl-C does."""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise _Stop


def serve(
    upstream: UpstreamOption = None,
    model_file: ModelFileOption = None,
    local_model: LocalModelOption = None,
    ctx_size: CtxSizeOption = None,
    model_alias: ModelAliasOption = None,
    offer_tools: OfferToolsOption = None,
    compact_tools: CompactToolsOption = None,
    brief_system: BriefSystemOption = None,
    mode: ModeOption = "auto",
    strategy: StrategyOption = None,
    dialect: DialectOption = None,
    registry: RegistryOption = None,
    default_max_tokens: DefaultMaxTokensOption = DEFAULT_MAX_TOKENS,
    host: Annotated[str, typer.Option(envvar="TOOLSHIM_HOST", help="Address to listen on.")] = (
        "127.0.0.1"
    ),
    port: Annotated[
        int,
        typer.Option(
            envvar="TOOLSHIM_PORT", help="Port to listen on (0: any free port).", min=0, max=65535
        ),
    ] = 8080,
    log_level: Annotated[
        str,
        typer.Option(
            envvar="TOOLSHIM_LOG_LEVEL",
            help="debug | info | warning | error. info logs one line per request (mode, "
            "emulated, LLM calls, time); debug also shows the messages sent upstream (roles, "
            "sizes) and the model's raw text.",
        ),
    ] = "info",
    upstream_api_key: UpstreamApiKeyOption = None,
    max_reasks: Annotated[
        int,
        typer.Option(
            envvar="TOOLSHIM_MAX_REASKS",
            help="Re-asks after an invalid emulated tool call before giving up.",
            min=0,
        ),
    ] = 2,
    timeout: TimeoutOption = 600.0,
    connect_timeout: ConnectTimeoutOption = 10.0,
    total_timeout: TotalTimeoutOption = 1800.0,
    upstream_retries: UpstreamRetriesOption = 2,
    constrain: Annotated[
        bool | None,
        typer.Option(
            "--constrain/--no-constrain",
            envvar="TOOLSHIM_CONSTRAIN",
            help="Hold emulated replies to a JSON Schema of the offered tools (json dialect). "
            "Default: where the registry says the upstream honours response_format.",
            show_default=False,
        ),
    ] = None,
    rescue: Annotated[
        bool,
        typer.Option(
            "--rescue/--no-rescue",
            envvar="TOOLSHIM_RESCUE",
            help="Turn a call a model wrote as text in a native reply (e.g. fenced JSON in "
            "`content`) into a real tool call, in off, fallback and auto. --no-rescue leaves "
            "native replies exactly as the upstream sent them.",
        ),
    ] = True,
    learn: Annotated[
        bool,
        typer.Option(
            "--learn/--no-learn",
            envvar="TOOLSHIM_LEARN",
            help="Store in the registry that a model rejected tools (source runtime_error). "
            "--no-learn acts on a rejection in this process only (10 minutes) and stores "
            "nothing.",
        ),
    ] = True,
    auth_keys: Annotated[
        Path | None,
        typer.Option(
            "--auth-keys",
            envvar="TOOLSHIM_AUTH_KEYS",
            help="File of access keys for the proxy, one a line, optionally `name:key`. Callers "
            "send one as `Authorization: Bearer KEY` or `x-api-key: KEY`; logs and metrics show "
            "its name. Every route but /healthz needs one. The caller's key is not forwarded "
            "upstream (--upstream-api-key is).",
            show_default=False,
        ),
    ] = None,
    admin_keys: AdminKeysOption = "",
    mcp_allow: Annotated[
        list[str] | None,
        typer.Option(
            "--mcp-allow",
            help="URL prefix of MCP servers the proxy may reach to run a Responses request's "
            "hosted mcp tools itself, for any model (repeatable; needs toolshim[mcp]). Others "
            "are dropped with a warning, never reached.",
            show_default=False,
        ),
    ] = None,
    allow_unauthenticated: Annotated[
        bool,
        typer.Option(
            "--allow-unauthenticated",
            envvar="TOOLSHIM_ALLOW_UNAUTHENTICATED",
            help="Listen on a non-loopback address without --auth-keys (a trusted network only).",
        ),
    ] = False,
    max_body_size: MaxBodySizeOption = "16M",
    max_tools: MaxToolsOption = 256,
    max_messages: MaxMessagesOption = 4096,
    max_concurrent_requests: MaxConcurrentRequestsOption = 256,
    max_connections: MaxConnectionsOption = 1000,
    header_timeout: HeaderTimeoutOption = 10.0,
    body_timeout: BodyTimeoutOption = 60.0,
    idle_timeout: IdleTimeoutOption = 15.0,
    drain_timeout: DrainTimeoutOption = 30.0,
    max_choices: MaxChoicesOption = 8,
    max_output_tokens: MaxOutputTokensOption = 0,
    store_max_size: StoreMaxSizeOption = "1G",
    store_key_quota: StoreKeyQuotaOption = "0",
) -> None:
    """Run the OpenAI-compatible proxy."""
    from toolshim.engine import Engine, EngineOptions
    from toolshim.server import configure_logging, create_app
    from toolshim.server.auth import AccessKeys, admin_names
    from toolshim.server.model_aliases import parse_model_aliases
    from toolshim.upstreams.aiohttp_upstream import AiohttpUpstream

    err = Console(stderr=True, highlight=False, soft_wrap=True)
    # The key and any user:pass@ of --upstream: masked in logs and in every message printed.
    secrets = (upstream_api_key or "", *credential_values(url=upstream or ""))
    try:
        configure_logging(log_level, secrets=secrets)
        EngineOptions.build(
            mode=mode,
            strategy=strategy,
            dialect=dialect,
            max_reasks=max_reasks,
            offer_tools=offer_tools,
        )
        check_upstream_choice(upstream, model_file, local_model)
        aliases = parse_model_aliases(model_alias or ())
        keys = AccessKeys.load(auth_keys) if auth_keys is not None else None
        admins = admin_names(admin_keys, keys)
        if mcp_allow:
            from toolshim.mcp.toolset import require_sdk

            require_sdk()
        limits = build_limits(
            err,
            max_body_size=max_body_size,
            max_connections=max_connections,
            store_max_size=store_max_size,
            store_key_quota=store_key_quota,
            header_timeout=header_timeout,
            body_timeout=body_timeout,
            idle_timeout=idle_timeout,
            max_concurrent_requests=max_concurrent_requests,
            max_tools=max_tools,
            max_messages=max_messages,
            drain_timeout=drain_timeout,
            max_choices=max_choices,
            max_output_tokens=max_output_tokens,
        )
    except ConfigError as exc:
        fail(err, redact(exc.message, secrets))
    if keys is None and not allow_unauthenticated and not is_loopback(host):
        fail(
            err,
            f"refusing to listen on {host} without access keys: anyone who can reach it could "
            "use your upstream (and its key)",
            "pass --auth-keys FILE (one key per line, optionally name:key), or "
            "--allow-unauthenticated if every client on that network is trusted",
        )
    sock = listen(host, port, err)
    previous_sigterm = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        with registry_and_target(
            registry, upstream, model_file, err, local_model=local_model, ctx_size=ctx_size
        ) as (store, target):
            client = AiohttpUpstream(
                target.base_url,
                key=target.key,
                api_key=upstream_api_key,
                timeout=timeout,
                connect_timeout=connect_timeout,
                total_timeout=total_timeout,
                retries=upstream_retries,
            )
            engine = Engine(
                client,
                mode=mode,
                strategy=strategy,
                dialect=dialect,
                max_reasks=max_reasks,
                constrain=constrain,
                rescue=rescue,
                registry=store,
                learn=learn,
                default_max_tokens=default_max_tokens or None,
                offer_tools=offer_tools or (EMBEDDED_OFFER if target.embedded else None),
                compact_tools=compact_tools,
                brief_system=brief_system,
            )
            app = create_app(
                engine,
                upstream_api_key=upstream_api_key,
                default_model=target.model,
                pin_model=target.embedded,
                model_aliases=aliases,
                context_hint=target.context_hint,
                limits=limits,
                auth_keys=keys,
                admin_keys=admins,
                mcp_allow=tuple(mcp_allow or ()),
            )
            _banner(host, sock.getsockname()[1], target, engine.options.mode.value, keys)
            for alias in aliases:
                typer.echo(f"  model alias: {alias.pattern} -> {alias.target}")
            if engine.options.offer_tools:
                shown = ", ".join(engine.options.offer_tools[:8])
                more = len(engine.options.offer_tools) - 8
                typer.echo(
                    f"  tools offered: {shown}{f' and {more} more' if more > 0 else ''} "
                    "(when a request has any of them; --offer-tools all for every tool)"
                )
            if not target.embedded:
                _warn_if_unreachable(target.base_url, upstream_api_key, err, secrets)
            _run(app, sock, log_level)
    except (KeyboardInterrupt, _Stop):
        pass
    except ToolshimError as exc:
        fail_for(err, exc, 2, secrets=secrets)
    finally:
        signal.signal(signal.SIGTERM, previous_sigterm)
        sock.close()
    typer.echo("toolshim: stopped", err=True)


EMBEDDED_OFFER = "coding"
"""What the embedded (small) models are offered when a request has coding tools (Claude Code,
Codex): the tools that read, write, edit and run; a sub-agent or a scheduler is beyond them."""


def _warn_if_unreachable(
    base_url: str, api_key: str | None, err: Console, secrets: tuple[str, ...]
) -> None:
    """One line on stderr when the upstream does not answer ``GET /models`` now: the proxy
    serves anyway (the upstream may come up later), but a typo in --upstream shows at once."""
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        httpx.get(f"{base_url}/models", headers=headers, timeout=3.0)
    except httpx.HTTPError as exc:
        err.print(
            f"[yellow]warning:[/] the upstream at {escape(url_without_credentials(base_url))} "
            f"does not answer ({escape(type(exc).__name__)}: "
            f"{escape(redact(str(exc), secrets) or 'no reply')}); serving anyway, "
            "requests get 502 until it does"
        )


def register(app: typer.Typer) -> None:
    """Add ``serve`` to the ``toolshim`` command."""
    app.command("serve", help=_HELP, no_args_is_help=False)(serve)


def _banner(
    host: str, port: int, target: UpstreamTarget, mode: str, keys: AccessKeys | None
) -> None:
    shown = f"[{host}]" if ":" in host else host
    typer.echo(f"toolshim proxy listening on http://{shown}:{port}/v1", color=False)
    if target.embedded:
        typer.echo(
            f"  upstream: embedded model {target.model!r} at {target.base_url} "
            f"(context {target.ctx_size} tokens; every model name is served by it)"
        )
    else:
        typer.echo(f"  upstream: {url_without_credentials(target.base_url)}")
    typer.echo(f"  mode: {mode}  (metrics: /metrics, health: /healthz)")
    if keys is not None:
        typer.echo(f"  access keys: {len(keys)} ({', '.join(keys.names)})")
    else:
        typer.echo("  access keys: none (any client that reaches the port is served)")


def _run(app: ProxyApp, sock: socket.socket, log_level: str) -> None:
    import uvicorn

    from toolshim.server.connections import guarded_protocol

    class Server(uvicorn.Server):
        """uvicorn, telling the app when shutdown begins so that it drains in its own way."""

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            app.drain()
            await super().shutdown(sockets)

    limits = app.limits
    config = uvicorn.Config(
        app,
        http=guarded_protocol(limits, app.limit_log),
        log_config=None,
        access_log=False,
        lifespan="on",
        timeout_keep_alive=max(1, round(limits.idle_timeout)),
        # The app answers what the drain cuts; uvicorn's own cut (a plain-text 500 or a
        # dropped stream) only comes if that answer itself hangs.
        timeout_graceful_shutdown=round(limits.drain_timeout) + 5,
        backlog=2048,
        server_header=False,
        proxy_headers=False,
    )
    if log_level.lower() == "debug":
        logging.getLogger("uvicorn.error").setLevel(logging.INFO)
    Server(config).run(sockets=[sock])
