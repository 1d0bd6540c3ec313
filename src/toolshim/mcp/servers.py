"""Where an MCP server is: a command to start (stdio) or a URL (streamable HTTP); no I/O here.

A server is given as an :class:`MCPStdio` or :class:`MCPHttp`, or as text (``--mcp`` on the
command line): ``http://…`` or ``https://…`` is a streamable HTTP server, anything else a
command line split like a shell would (``"npx -y @modelcontextprotocol/server-filesystem ."``).
In an agent file, an ``[[mcp]]`` table holds ``command`` (text, or a list) with ``args``,
``env``, ``cwd``, or ``url`` with ``headers``; both take ``name``, ``timeout`` and ``tools``
(the server's tools to offer, by the names it lists; all of them when not given).

A server's name prefixes its tools when two servers offer the same tool name
(``filesystem__read_file``); when not given, it comes from the command (the package or script
it runs: ``server-filesystem``) or the URL's host.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any
from urllib.parse import urlsplit

from toolshim.errors import ConfigError

__all__ = [
    "MCPHttp",
    "MCPServerSpec",
    "MCPStdio",
    "parse_server",
    "server_from_table",
    "servers_from_tables",
]

DEFAULT_TIMEOUT = 60.0
"""Seconds one tool call may take before the server counts as hung."""
DEFAULT_STARTUP_TIMEOUT = 60.0
"""Seconds a server may take to start and list its tools (``npx`` may download first)."""

_RUNNERS = frozenset(
    {"npx", "bunx", "uvx", "uv", "pipx", "node", "python", "python3", "deno", "bun", "docker"}
)
_VALUE_FLAGS = frozenset({"--with", "--from", "-p", "--package", "--python", "-e", "--env"})
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")
_TABLE_KEYS = ("name", "command", "args", "env", "cwd", "url", "headers", "timeout", "tools")


@dataclass(frozen=True, slots=True, kw_only=True)
class _Server:
    """What every kind of MCP server is given by keyword: its name, timeouts and tools."""

    name: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT
    tools: Sequence[str] | None = None
    """The tools to offer, by the names the server lists (None: every tool it lists)."""

    @property
    def label(self) -> str:
        """The server's name: given, else one made from what it is (:meth:`_label`)."""
        return _safe(self.name) if self.name else self._label()

    def _label(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class MCPStdio(_Server):
    """An MCP server started as a subprocess, spoken to over its stdin and stdout."""

    command: str
    args: Sequence[str] = ()
    env: Mapping[str, str] | None = None
    """Variables set for the server, over the SDK's default environment."""
    cwd: str | None = None

    def _label(self) -> str:
        """The package or script the command runs."""
        program = PurePath(self.command).name
        first = self.command
        if program.split(".")[0] in _RUNNERS:
            first = _program_of(self.args) or self.command
        first = first.rsplit("@", 1)[0] if first.rfind("@") > 0 else first
        stem = PurePath(first).name.removesuffix(".py").removesuffix(".js")
        return _safe(stem.removeprefix("mcp-").removeprefix("mcp_")) or "mcp"

    def describe(self) -> str:
        return shlex.join([self.command, *self.args])


@dataclass(frozen=True, slots=True)
class MCPHttp(_Server):
    """An MCP server at a streamable HTTP URL (``headers`` go with every request)."""

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)

    def _label(self) -> str:
        """The URL's host."""
        host = urlsplit(self.url).hostname or "mcp"
        return _safe(host.replace(".", "_")) or "mcp"

    def describe(self) -> str:
        parts = urlsplit(self.url)
        return parts._replace(netloc=parts.hostname or "").geturl() if parts.username else self.url


MCPServerSpec = MCPStdio | MCPHttp


def parse_server(text: str | MCPServerSpec) -> MCPServerSpec:
    """A server from ``--mcp`` text: a URL, or a command line (shell-style quoting)."""
    if isinstance(text, MCPStdio | MCPHttp):
        return text
    if not isinstance(text, str):
        raise ConfigError(
            f"an MCP server is a command line, a URL, MCPStdio or MCPHttp, not {text!r}",
            param="mcp",
        )
    stripped = text.strip()
    if stripped.startswith(("http://", "https://")):
        return MCPHttp(stripped)
    try:
        words = shlex.split(stripped)
    except ValueError as exc:
        raise ConfigError(
            f"cannot read the MCP server command {text!r}: {exc}", param="mcp"
        ) from exc
    if not words:
        raise ConfigError(
            "an MCP server needs a command (e.g. 'npx -y @modelcontextprotocol/server-filesystem "
            ".') or an http(s):// URL",
            param="mcp",
        )
    return MCPStdio(words[0], tuple(words[1:]))


def server_from_table(data: Any, where: str, problems: list[str]) -> MCPServerSpec | None:
    """An agent file's ``[[mcp]]`` table as a server; each problem is one line in ``problems``."""
    if not isinstance(data, Mapping):
        problems.append(f"{where}: must be a table with 'command' or 'url', not {data!r}")
        return None
    before = len(problems)
    for key in data:
        if key not in _TABLE_KEYS:
            problems.append(f"{where}: unknown key {key!r}; allowed: {', '.join(_TABLE_KEYS)}")
    name = _text(data, "name", where, problems)
    timeout = data.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        problems.append(f"{where}: 'timeout' must be a positive number of seconds, not {timeout!r}")
    url = _text(data, "url", where, problems)
    tools = data.get("tools")
    if tools is not None and (
        not isinstance(tools, list) or not all(isinstance(t, str) for t in tools)
    ):
        problems.append(f"{where}: 'tools' must be a list of tool names, not {tools!r}")
        tools = None
    offered = tuple(tools) if tools is not None else None
    command = data.get("command")
    if (url is None) == (command is None):
        problems.append(
            f"{where}: give either 'command' (a stdio server) or 'url' (HTTP), not both"
        )
        return None
    if url is not None:
        for key in ("args", "env", "cwd"):
            if key in data:
                problems.append(f"{where}: {key!r} is for a 'command' server, not a 'url' one")
        if not url.startswith(("http://", "https://")):
            problems.append(f"{where}: 'url' must start with http:// or https://, not {url!r}")
        headers = _strings(data, "headers", where, problems)
        if len(problems) > before:
            return None
        return MCPHttp(url, headers or {}, name=name, timeout=float(timeout), tools=offered)
    if "headers" in data:
        problems.append(f"{where}: 'headers' is for a 'url' server, not a 'command' one")
    words = _command(command, where, problems)
    args = data.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        problems.append(f"{where}: 'args' must be a list of strings, not {args!r}")
        args = []
    env = _strings(data, "env", where, problems)
    cwd = _text(data, "cwd", where, problems)
    if len(problems) > before or not words:
        return None
    return MCPStdio(
        words[0], (*words[1:], *args), env, cwd, name=name, timeout=float(timeout), tools=offered
    )


def servers_from_tables(value: Any, where: str, problems: list[str]) -> tuple[MCPServerSpec, ...]:
    """An agent file's ``mcp`` list of tables (``[[mcp]]`` in TOML) as servers."""
    if value is None:
        return ()
    if not isinstance(value, list):
        problems.append(
            f"{where}: must be a list of tables ([[mcp]] in TOML) with 'command' or 'url', "
            f"not {value!r}"
        )
        return ()
    found = (server_from_table(v, f"{where} {i}", problems) for i, v in enumerate(value, 1))
    return tuple(s for s in found if s is not None)


def _program_of(args: Sequence[str]) -> str | None:
    """What a runner (npx, uvx, python, docker …) runs: a script if one is named, else the
    first word that is neither a flag, a flag's value, nor a subcommand such as ``run``."""
    words: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg.startswith("-"):
            skip = arg in _VALUE_FLAGS
        elif arg not in ("run", "exec", "x"):
            words.append(arg)
    scripts = [w for w in words if w.endswith((".py", ".js", ".mjs", ".ts"))]
    chosen = scripts or words
    return chosen[0] if chosen else None


def _command(value: Any, where: str, problems: list[str]) -> list[str]:
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return list(value)
    if isinstance(value, str) and value.strip():
        try:
            return shlex.split(value)
        except ValueError as exc:
            problems.append(f"{where}: cannot read 'command' {value!r}: {exc}")
            return []
    problems.append(f"{where}: 'command' must be a command line or a list of words, not {value!r}")
    return []


def _text(data: Mapping[str, Any], key: str, where: str, problems: list[str]) -> str | None:
    value = data.get(key)
    if value is None or isinstance(value, str):
        return value
    problems.append(f"{where}: {key!r} must be a string, not {value!r}")
    return None


def _strings(
    data: Mapping[str, Any], key: str, where: str, problems: list[str]
) -> dict[str, str] | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, Mapping) and all(isinstance(v, str) for v in value.values()):
        return {str(k): v for k, v in value.items()}
    problems.append(f"{where}: {key!r} must be a table of strings, not {value!r}")
    return None


def _safe(text: str) -> str:
    return _UNSAFE.sub("_", text).strip("_")[:32]
