"""Pieces the CLI commands share: one-line errors, the registry, the upstream or embedded model."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from toolshim.capabilities.registry import Registry
from toolshim.errors import ConfigError, LocalModelError, ToolshimError
from toolshim.local.server import EMBEDDED_KEY_PREFIX
from toolshim.redact import redact
from toolshim.upstreams.openai_http import normalize_base_url

__all__ = [
    "EMBEDDED_HINT",
    "ConsoleLogHandler",
    "UpstreamTarget",
    "check_upstream_choice",
    "embedded_model",
    "fail",
    "fail_for",
    "open_registry",
    "registry_and_target",
    "registry_key",
    "upstream_target",
]

EMBEDDED_HINT = (
    "or pass --upstream URL (or set TOOLSHIM_UPSTREAM) to use a running OpenAI-compatible "
    "server: Ollama's http://127.0.0.1:11434/v1, llama-server, vLLM, `toolshim serve`, …"
)
"""The way out printed under any error of the embedded model."""


def fail(console: Console, message: str, hint: str | None = None, code: int = 2) -> NoReturn:
    """Print ``error: message`` (and ``hint: …``) on one line each, then exit with ``code``."""
    for line in message.splitlines() or [message]:
        console.print(f"[red]error:[/] {escape(line)}", highlight=False)
    if hint:
        console.print(f"hint: {escape(hint)}", highlight=False)
    raise typer.Exit(code)


def fail_for(
    console: Console,
    exc: ToolshimError,
    code: int = 1,
    *,
    secrets: tuple[str, ...] | None = None,
) -> NoReturn:
    """End the command on ``exc``: its message (with ``secrets`` and credentials masked, where
    ``secrets`` are given), and for an error of the embedded model :data:`EMBEDDED_HINT` (exit
    2); exit ``code`` for any other."""
    message = exc.message if secrets is None else redact(exc.message, secrets)
    if isinstance(exc, LocalModelError):
        fail(console, message, EMBEDDED_HINT)
    fail(console, message, code=code)


@contextmanager
def open_registry(where: str | Path | None, console: Console) -> Iterator[Registry]:
    """The capability registry ``--registry`` names (a path or a ``sqlite:``, ``postgresql:``
    or ``redis:`` URL; None: the default), with what the user should know about it printed.
    It is closed when the block ends: pending writes flushed, a shared store's listening
    thread stopped (left running, it would go on reconnecting in a process that embeds the
    command, as a test does)."""
    registry = Registry.open(where)
    try:
        for notice in registry.notices:
            console.print(f"[yellow]warning:[/] {escape(notice)}", highlight=False)
        yield registry
    finally:
        registry.close()


def registry_key(upstream: str) -> str:
    """The registry key an ``--upstream`` value names: an embedded model's key
    (``embedded://<file>``) as given, else the normalised base URL."""
    text = upstream.strip()
    return text if text.startswith(EMBEDDED_KEY_PREFIX) else normalize_base_url(text)


def check_upstream_choice(
    upstream: str | None, model_file: Path | None, local_model: str | None = None
) -> None:
    """ConfigError when more than one of ``--upstream``, ``--model-file`` and
    ``--local-model`` is given, the URL is malformed, the file is missing or the model is not
    one toolshim knows."""
    given = [
        flag
        for flag, value in (
            ("--upstream", upstream),
            ("--model-file", model_file),
            ("--local-model", local_model),
        )
        if value
    ]
    if len(given) > 1:
        raise ConfigError(f"{' and '.join(given)} are alternatives; pass one of them")
    if local_model:
        from toolshim.local.model import KNOWN_MODELS

        if local_model.strip().lower() not in KNOWN_MODELS:
            raise ConfigError(
                f"unknown local model {local_model!r}; known models: "
                f"{', '.join(sorted(KNOWN_MODELS))} (see `toolshim models local`)",
                param="local_model",
            )
    if upstream:
        normalize_base_url(upstream)  # a malformed URL fails here, before anything starts
    if model_file is not None and not model_file.is_file():
        raise ConfigError(f"model file {str(model_file)!r} does not exist", param="model_file")


@dataclass(frozen=True, slots=True)
class UpstreamTarget:
    """Where a command sends its requests, and where the registry keeps what it learns there.

    Build the upstream with both: ``OpenAIUpstream(target.base_url, key=target.key)``.
    """

    base_url: str
    key: str
    """``base_url`` for a server given by URL; ``embedded://<file>`` for the embedded model."""
    model: str | None = None
    """The model the embedded server serves (None for a server given by URL)."""
    ctx_size: int | None = None
    """The embedded server's context window in tokens (None for a server given by URL)."""

    @property
    def context_hint(self) -> str:
        """What to do about a request over the model's context, for the error the caller gets."""
        if self.ctx_size is not None:
            return (
                f"The embedded model was started with a {self.ctx_size}-token context: "
                "restart toolshim with a larger --ctx-size (or TOOLSHIM_CTX_SIZE)."
            )
        return (
            "Raise the upstream's context window (llama-server --ctx-size, Ollama "
            "OLLAMA_CONTEXT_LENGTH, vLLM --max-model-len)."
        )

    @property
    def embedded(self) -> bool:
        return self.model is not None


@contextmanager
def upstream_target(
    upstream: str | None,
    model_file: Path | None,
    registry: Registry | None,
    console: Console,
    *,
    local_model: str | None = None,
    ctx_size: int | None = None,
    threads: int | None = None,
) -> Iterator[UpstreamTarget]:
    """The server at ``upstream``; else the embedded model, started here and stopped at the end.

    The embedded model is ``model_file``, else the known model ``local_model``, else the
    default one (a known model is assembled on first use). What its server says about it is
    recorded in ``registry`` (if given) under its stable key. Its context is ``ctx_size``, else
    what a known model was trained for (:data:`toolshim.local.DEFAULT_CONTEXT` for another
    file). Raises LocalModelError (a
    missing model part, xllamacpp not installed, a server that does not start), whose message
    says how to fix it; print :data:`EMBEDDED_HINT` under it.
    """
    if upstream:
        base_url = normalize_base_url(upstream)
        yield UpstreamTarget(base_url, base_url)
        return
    from toolshim.local import EmbeddedServer

    path, ctx_size = embedded_model(model_file, local_model, ctx_size)
    console.print(f"[dim]starting the embedded model {escape(path.name)} (ctx {ctx_size}) …[/]")
    server = EmbeddedServer(path, ctx_size=ctx_size, threads=threads)
    server.start()
    try:
        if registry is not None:
            server.record_capabilities(registry)
        console.print(
            f"[dim]embedded model {escape(repr(server.model))} at {escape(server.base_url)} "
            f"(its facts are kept as {escape(server.key)})[/]"
        )
        yield UpstreamTarget(server.base_url, server.key, server.model, ctx_size)
    finally:
        console.print("[dim]stopping the embedded model …[/]")
        server.stop()


@contextmanager
def registry_and_target(
    registry: str | Path | None,
    upstream: str | None,
    model_file: Path | None,
    console: Console,
    *,
    local_model: str | None = None,
    ctx_size: int | None = None,
) -> Iterator[tuple[Registry, UpstreamTarget]]:
    """The registry ``--registry`` names (:func:`open_registry`) and the upstream or embedded
    model the command talks to (:func:`upstream_target`), its facts recorded there."""
    with (
        open_registry(registry, console) as store,
        upstream_target(
            upstream, model_file, store, console, local_model=local_model, ctx_size=ctx_size
        ) as target,
    ):
        yield store, target


def embedded_model(
    model_file: Path | None, local_model: str | None, ctx_size: int | None
) -> tuple[Path, int]:
    """The embedded model's file (``model_file``, else the known model ``local_model``, else
    the default one, assembled on first use) and its context (``ctx_size``, else what the
    model was trained for)."""
    from toolshim.local import ensure_default_model, ensure_model
    from toolshim.local.model import embedded_context

    if model_file is not None:
        path = model_file
    elif local_model:
        path = ensure_model(local_model, progress=True)
    else:
        path = ensure_default_model(progress=True)
    return path, ctx_size or embedded_context(path)


class ConsoleLogHandler(logging.Handler):
    """toolshim's log warnings as ``warning: …`` lines on a rich console (no logging prefixes)."""

    def __init__(self, console: Console, level: int = logging.WARNING) -> None:
        super().__init__(level)
        self.console = console

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):
            message = str(record.msg)
        label = "error" if record.levelno >= logging.ERROR else "warning"
        colour = "red" if label == "error" else "yellow"
        self.console.print(f"[{colour}]{label}:[/] {escape(message)}", highlight=False)
