"""The chat's slash commands: /model list|use, /tools, /mcp, /mode, /clear, /save, /help, /quit."""

from __future__ import annotations

import difflib
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from toolshim.capabilities.registry import Registry, model_key
from toolshim.chat.render import Renderer
from toolshim.chat.status import ToolStatus
from toolshim.chat.transcript import Transcript, write_json
from toolshim.engine.options import parse_mode
from toolshim.errors import ConfigError, UpstreamError
from toolshim.types import Mode

if TYPE_CHECKING:
    from toolshim.agent.tools import Tool
    from toolshim.mcp import MCPToolset

__all__ = ["COMMANDS", "HELP", "Session", "run_command"]

HELP = """\
Commands:
  /model               the current model and what its tools are
  /model list          the upstream's models, with tool status and where it comes from
  /model use NAME      switch models (the conversation carries over); typed during a reply,
                       the switch waits until that reply is complete
  /tools               the tools loaded, with their arguments
  /mcp                 the MCP servers (--mcp), their state and their tools
  /mode [MODE]         show or set how tools are sent: auto, off, fallback, force, strip
  /clear               start a new conversation (same model)
  /save FILE           write the transcript as JSON (messages, tool calls, results, metadata)
  /help                this help
  /quit                leave (Ctrl-D too)
Keys: Enter sends; Esc-Enter, or a line ending in \\, continues on a new line; Ctrl-C cancels
a reply (or clears the line); lines typed during a reply run after it; Up/Down recall history."""


class Settings(Protocol):
    """The session settings a command changes."""

    mode: Mode


class Session(Protocol):
    """What a command reads and changes of the chat session
    (:class:`~toolshim.chat.session.ChatSession`, which runs the commands)."""

    model: str | None
    messages: list[dict[str, Any]]
    quitting: bool

    @property
    def render(self) -> Renderer: ...
    @property
    def registry(self) -> Registry: ...
    @property
    def upstream(self) -> str: ...
    @property
    def settings(self) -> Settings: ...
    @property
    def transcript(self) -> Transcript: ...
    @property
    def mcp(self) -> MCPToolset | None: ...
    @property
    def mode(self) -> Mode: ...
    @property
    def all_tools(self) -> list[Tool]: ...
    def status(self, model: str) -> ToolStatus: ...
    async def listed_models(self) -> list[str]: ...
    async def use_model(self, model: str) -> None: ...


Handler = Callable[[Session, str], Awaitable[None]]


async def run_command(session: Session, text: str) -> None:
    """Run one ``/command args`` line; an unknown command lists the known ones."""
    name, _, rest = text.partition(" ")
    handler = COMMANDS.get(name.lower())
    if handler is None:
        close = difflib.get_close_matches(name.lower(), list(COMMANDS), n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        session.render.error(
            f"unknown command {name!r}; {hint}commands: {', '.join(sorted(set(COMMANDS)))}",
        )
        return
    await handler(session, rest.strip())


async def _help(session: Session, rest: str) -> None:
    session.render.info(HELP)


async def _quit(session: Session, rest: str) -> None:
    session.quitting = True


async def _model(session: Session, rest: str) -> None:
    verb, _, argument = rest.partition(" ")
    verb, argument = verb.lower(), argument.strip()
    if not verb:
        if session.model is not None:
            session.render.model_status("Model", session.model, session.status(session.model))
        return
    if verb == "list":
        await _model_list(session)
    elif verb == "use":
        if not argument:
            session.render.error("/model use needs a model name; /model list shows them")
            return
        await _model_use(session, argument)
    else:
        session.render.error(f"unknown /model command {verb!r}; use /model list or /model use NAME")


async def _model_use(session: Session, name: str) -> None:
    try:
        listed = await session.listed_models()
    except UpstreamError as exc:
        session.render.notice(f"(could not read the upstream's model list: {exc.message})", "dim")
        listed = []
    keys = {model_key(m) for m in listed}
    if listed and model_key(name) not in keys:
        close = difflib.get_close_matches(name, listed, n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        session.render.notice(
            f"{name} is not in the upstream's model list ({', '.join(listed)}); using it "
            f"anyway.{hint}"
        )
    await session.use_model(name)


async def _model_list(session: Session) -> None:
    try:
        listed = await session.listed_models()
    except UpstreamError as exc:
        session.render.error(f"cannot read the upstream's model list: {exc.message}")
        return
    models = list(listed)
    if session.model is not None and model_key(session.model) not in {model_key(m) for m in listed}:
        models.append(session.model)
    rows = []
    for model in models:
        status = session.status(model)
        fact = session.registry.fact(session.upstream, model, "native_tools")
        since = datetime.fromtimestamp(fact.updated_at, UTC).strftime("%Y-%m-%d") if fact else "-"
        rows.append(
            {
                "current": "*" if model == session.model else "",
                "model": model,
                "kind": status.kind,
                "tools": status.label,
                "native_tools": str(fact.value) if fact else "unknown",
                "source": fact.source.value if fact else "-",
                "learned": since,
            }
        )
    count = f"{len(listed)} model{'' if len(listed) == 1 else 's'}"
    title = f"{count} at {session.upstream} (mode {session.mode.value})"
    session.render.models_table(title, rows)


async def _tools(session: Session, rest: str) -> None:
    if session.mcp:
        await session.mcp.refresh()
    session.render.tools_table(session.all_tools)
    if session.model is not None and session.all_tools:
        status = session.status(session.model)
        session.render.info(f"For {session.model}: {status.headline} — {status.why}")


async def _mcp(session: Session, rest: str) -> None:
    if not session.mcp:
        session.render.info(
            'No MCP servers. Start the chat with --mcp "COMMAND ARGS" or --mcp URL (repeatable).'
        )
        return
    await session.mcp.refresh()
    session.render.mcp_table(session.mcp.describe())


async def _mode(session: Session, rest: str) -> None:
    if not rest:
        modes = ", ".join(m.value for m in Mode)
        session.render.info(f"Mode: {session.mode.value} (choose from {modes})")
        return
    try:
        mode = parse_mode(rest)
    except ConfigError as exc:
        session.render.error(exc.message)
        return
    session.settings.mode = mode
    session.transcript.event("mode", mode=mode.value)
    if session.model is not None:
        session.render.model_status(
            f"Mode {mode.value}.", session.model, session.status(session.model)
        )


async def _clear(session: Session, rest: str) -> None:
    session.messages = []
    session.transcript.clear()
    session.render.info("Conversation cleared.")


async def _save(session: Session, rest: str) -> None:
    if not rest:
        session.render.error("/save needs a file name, e.g. /save chat.json")
        return
    data = session.transcript.as_dict(
        model=session.model,
        mode=session.mode.value,
        messages=session.messages,
        tools=[t.to_openai() for t in session.all_tools],
    )
    try:
        written = write_json(Path(rest), data)
    except OSError as exc:
        session.render.error(f"cannot save to {rest!r}: {exc.strerror or exc}")
        return
    exchanges = len(session.transcript.exchanges)
    session.render.info(
        f"Saved {exchanges} exchange{'s' if exchanges != 1 else ''} and "
        f"{len(session.messages)} messages to {written}"
    )


COMMANDS: dict[str, Handler] = {
    "/help": _help,
    "/?": _help,
    "/model": _model,
    "/models": _model,
    "/tools": _tools,
    "/mcp": _mcp,
    "/mode": _mode,
    "/clear": _clear,
    "/save": _save,
    "/quit": _quit,
    "/exit": _quit,
}
