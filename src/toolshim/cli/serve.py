"""``toolshim serve``: run the OpenAI-compatible proxy in front of an upstream or the embedded model."""

from __future__ import annotations

import logging
import signal
import socket
from types import FrameType
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from toolshim.cli._common import (
    EMBEDDED_HINT,
    UpstreamTarget,
    check_upstream_choice,
    fail,
    open_registry,
    upstream_target,
)
from toolshim.cli._options import (
    ConnectTimeoutOption,
    DefaultMaxTokensOption,
    DialectOption,
    ModelFileOption,
    ModeOption,
    RegistryOption,
    StrategyOption,
    TimeoutOption,
    TotalTimeoutOption,
    UpstreamApiKeyOption,
    UpstreamOption,
    UpstreamRetriesOption,
)
from toolshim.engine.options import DEFAULT_MAX_TOKENS
from toolshim.errors import ConfigError, LocalModelError, ToolshimError

__all__ = ["register", "serve"]

_HELP = """Run the OpenAI-compatible proxy: point any OpenAI client at http://HOST:PORT/v1.

Requests with `tools` go to the upstream natively where the model supports them and are
emulated where it does not (tools described in the prompt, calls parsed out of the text,
validated, returned as real `tool_calls`). Without --upstream the embedded local model is
served (it is assembled on first use).

Per request, a `toolshim` object in the body ({"mode", "strategy", "dialect", "max_reasks",
"constrain"}) or the headers x-toolshim-mode / -strategy / -dialect / -max-reasks override
these defaults.

Endpoints: POST /v1/chat/completions, GET /v1/models, GET /healthz, GET /metrics.
"""


class _Stop(Exception):
    """SIGTERM arrived: shut down like Ctrl-C does."""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise _Stop


def serve(
    upstream: UpstreamOption = None,
    model_file: ModelFileOption = None,
    mode: ModeOption = "auto",
    strategy: StrategyOption = "single",
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
) -> None:
    """Run the OpenAI-compatible proxy."""
    from toolshim.engine import Engine, EngineOptions
    from toolshim.server import configure_logging, create_app
    from toolshim.upstreams.aiohttp_upstream import AiohttpUpstream

    err = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        configure_logging(log_level, secrets=[upstream_api_key or ""])
        EngineOptions.build(mode=mode, strategy=strategy, dialect=dialect, max_reasks=max_reasks)
        check_upstream_choice(upstream, model_file)
    except ConfigError as exc:
        fail(err, exc.message)
    sock = _listen(host, port, err)
    previous_sigterm = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        store = open_registry(registry, err)
        with upstream_target(upstream, model_file, store, err) as target:
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
            )
            app = create_app(
                engine,
                upstream_api_key=upstream_api_key,
                default_model=target.model,
                pin_model=target.embedded,
            )
            _banner(host, sock.getsockname()[1], target, engine.options.mode.value)
            if not target.embedded:
                _warn_if_unreachable(target.base_url, upstream_api_key, err)
            _run(app, sock, log_level)
    except (KeyboardInterrupt, _Stop):
        pass
    except LocalModelError as exc:
        fail(err, exc.message, EMBEDDED_HINT)
    except ToolshimError as exc:
        fail(err, exc.message)
    finally:
        signal.signal(signal.SIGTERM, previous_sigterm)
        sock.close()
    typer.echo("toolshim: stopped", err=True)


def _warn_if_unreachable(base_url: str, api_key: str | None, err: Console) -> None:
    """One line on stderr when the upstream does not answer ``GET /models`` now: the proxy
    serves anyway (the upstream may come up later), but a typo in --upstream shows at once."""
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        httpx.get(f"{base_url}/models", headers=headers, timeout=3.0)
    except httpx.HTTPError as exc:
        err.print(
            f"[yellow]warning:[/] the upstream at {escape(base_url)} does not answer "
            f"({escape(type(exc).__name__)}: {escape(str(exc) or 'no reply')}); serving anyway, "
            "requests get 502 until it does"
        )


def register(app: typer.Typer) -> None:
    """Add ``serve`` to the ``toolshim`` command."""
    app.command("serve", help=_HELP, no_args_is_help=False)(serve)


def _listen(host: str, port: int, err: Console) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        reason = exc.strerror or str(exc)
        fail(
            err,
            f"cannot listen on {host}:{port}: {reason}",
            "pick another --port (or stop what is using it)" if exc.errno == 98 else None,
        )
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _banner(host: str, port: int, target: UpstreamTarget, mode: str) -> None:
    shown = f"[{host}]" if ":" in host else host
    typer.echo(f"toolshim proxy listening on http://{shown}:{port}/v1", color=False)
    if target.embedded:
        typer.echo(f"  upstream: embedded model {target.model!r} at {target.base_url}")
    else:
        typer.echo(f"  upstream: {target.base_url}")
    typer.echo(f"  mode: {mode}  (metrics: /metrics, health: /healthz)")


def _run(app: Any, sock: socket.socket, log_level: str) -> None:
    import uvicorn

    config = uvicorn.Config(
        app,
        log_config=None,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=3,
        server_header=False,
        proxy_headers=False,
    )
    if log_level.lower() == "debug":
        logging.getLogger("uvicorn.error").setLevel(logging.INFO)
    uvicorn.Server(config).run(sockets=[sock])
