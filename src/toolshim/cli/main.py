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


def reflow(text: str) -> str:
    """Join the hard-wrapped lines of each paragraph so the terminal wraps them at its width
    (rich keeps single newlines); indented lines (examples) keep theirs."""
    out: list[str] = []
    for line in text.strip("\n").split("\n"):
        joinable = line and not line[0].isspace() and not line.lstrip().startswith(("-", "*"))
        if joinable and out and out[-1] and not out[-1][0].isspace():
            out[-1] = f"{out[-1]} {line}"
        else:
            out.append(line)
    return "\n".join(out)


def _reflow_help(typer_app: typer.Typer) -> None:
    for command in typer_app.registered_commands:
        if isinstance(command.help, str):
            command.help = reflow(command.help)
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            _reflow_help(group.typer_instance)


for _name in COMMAND_MODULES:
    if importlib.util.find_spec(f"toolshim.cli.{_name}") is not None:
        importlib.import_module(f"toolshim.cli.{_name}").register(app)
_reflow_help(app)


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
