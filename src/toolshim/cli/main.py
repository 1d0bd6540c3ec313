"""The ``toolshim`` command: one Typer app; each command group lives in its own module."""

from __future__ import annotations

import importlib
import importlib.util
import sys

import typer

from toolshim import __version__

app = typer.Typer(
    name="toolshim",
    help=(
        "Tool calling for every LLM: native where the model supports it, emulated where it "
        "does not.\n\nStart with `toolshim serve` (an OpenAI-compatible proxy on "
        "http://127.0.0.1:8080/v1)."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Each module defines register(app). Order is the order of `toolshim --help`.
COMMAND_MODULES: list[str] = ["serve", "chat", "run", "models", "eval"]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"toolshim {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Tool calling for every LLM."""


for _name in COMMAND_MODULES:
    if importlib.util.find_spec(f"toolshim.cli.{_name}") is not None:
        importlib.import_module(f"toolshim.cli.{_name}").register(app)


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
