"""What the ``toolshim models`` commands share: their options, the registry they read (refused
while its store is away), the upstream they ask, and one line on stderr for an error."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from toolshim.capabilities.registry import Registry
from toolshim.cli._common import fail, open_registry, registry_key
from toolshim.cli._options import UpstreamApiKeyOption
from toolshim.errors import ConfigError, StoreError, ToolshimError
from toolshim.local.server import EMBEDDED_KEY_PREFIX
from toolshim.upstreams.openai_http import normalize_base_url

__all__ = [
    "ApiKeyOpt",
    "JsonOpt",
    "ModelArg",
    "UpstreamOpt",
    "err",
    "flag",
    "guard",
    "need_upstream",
    "readable",
]


def flag(name: str, text: str, envvar: str | None = None) -> Any:
    """A --name option without a shown default."""
    return typer.Option(name, help=text, envvar=envvar, show_default=False)


UpstreamOpt = Annotated[
    str | None,
    flag(
        "--upstream",
        "Base URL of the OpenAI-compatible upstream, e.g. http://127.0.0.1:11434/v1.",
        "TOOLSHIM_UPSTREAM",
    ),
]
ApiKeyOpt = UpstreamApiKeyOption
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for scripts instead of tables.")]
ModelArg = Annotated[str, typer.Argument(help="Model name as the upstream knows it.")]


err = Console(stderr=True, highlight=False, soft_wrap=True)


def guard(run: Callable[[], None]) -> None:
    """Run a command body; a toolshim error becomes one line on stderr and exit status 1."""
    try:
        run()
    except ToolshimError as exc:
        fail(err, exc.message, code=1)


@contextmanager
def readable(where: str | Path | None) -> Iterator[Registry]:
    """The registry ``--registry`` names (:func:`open_registry`), or StoreError when its store
    cannot be used now (a shared store that is away): a command that shows the store must not
    show an empty one instead, and one that writes it says so before it does anything (not
    after, as writes it could not make)."""
    with open_registry(where, err) as registry:
        if registry.outage is not None:
            raise StoreError(registry.outage)
        yield registry


def need_upstream(upstream: str | None, command: str) -> str:
    """The base URL of the running server that ``command`` asks (ConfigError without one)."""
    if not upstream:
        raise ConfigError(
            f"`toolshim models {command}` needs an upstream: pass --upstream URL or set "
            "TOOLSHIM_UPSTREAM (e.g. http://127.0.0.1:11434/v1)",
            param="upstream",
        )
    if registry_key(upstream).startswith(EMBEDDED_KEY_PREFIX):
        raise ConfigError(
            f"`toolshim models {command}` needs the URL of a running server, not the embedded "
            f"model's registry key {upstream.strip()!r}; what the embedded server says about "
            "its model is recorded each time it starts",
            param="upstream",
        )
    return normalize_base_url(upstream)
