"""MCP servers as one source of tools: started together, their tools named without clashes.

:class:`MCPToolset` starts every server at once; one that cannot start is reported in
:attr:`MCPToolset.warnings` (its tools are missing), never raised. Each listed tool becomes a
:meth:`Tool.from_schema <toolshim.agent.tools.Tool.from_schema>` whose schema is the server's
``inputSchema`` unchanged and whose call goes to the server; a name that two servers (or one
of the caller's own tools) share is prefixed with the server's name, ``server__tool``, and a
name a model cannot use (a dot, over 64 characters) is made safe.

The set is opened and closed with ``async with``, and may be entered again while open (the
servers stop when the outermost exit is reached), so an agent entered once keeps its servers
for every run, and a run that finds them closed opens them for itself.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from toolshim.agent.tools import Tool, ToolResult
from toolshim.errors import MCPServerError
from toolshim.extras import require
from toolshim.mcp.connection import Connection, ListedTool
from toolshim.mcp.servers import MCPServerSpec, parse_server

__all__ = ["MCPTool", "MCPToolset", "require_sdk"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_MAX_NAME = 64


def require_sdk() -> None:
    """ConfigError naming the extra to install when the ``mcp`` SDK is missing."""
    require("mcp", "mcp", "MCP servers need the MCP SDK", param="mcp")


@dataclass(frozen=True, slots=True)
class MCPTool:
    """One offered tool: the name the model uses, and the server and name it stands for."""

    name: str
    server: str
    listed: ListedTool


class MCPToolset:
    """Several MCP servers; :attr:`tools` are theirs, ready for an agent."""

    def __init__(self, servers: Iterable[str | MCPServerSpec]) -> None:
        specs = [parse_server(s) for s in servers]
        self.connections: list[Connection] = []
        taken: set[str] = set()
        for spec in specs:
            name, n = spec.label, 2
            while name in taken:
                name, n = f"{spec.label}{n}", n + 1
            taken.add(name)
            self.connections.append(Connection(spec, name))
        self.warnings: list[str] = []
        self._entered = 0
        self._built: tuple[tuple[int, ...], frozenset[str], list[Tool], list[MCPTool]] | None = None

    def __repr__(self) -> str:
        return f"MCPToolset({[c.name for c in self.connections]})"

    def __bool__(self) -> bool:
        return bool(self.connections)

    # -- lifecycle --------------------------------------------------------------------------

    async def __aenter__(self) -> MCPToolset:
        self._entered += 1
        if self._entered == 1:
            try:
                await self.start()
            except BaseException:
                self._entered = 0
                await self.stop()
                raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._entered -= 1
        if self._entered == 0:
            await self.stop()

    async def start(self) -> list[str]:
        """Start every server at once; return (and keep) a warning for each that did not start."""
        require_sdk()
        outcomes = await asyncio.gather(
            *(c.start() for c in self.connections), return_exceptions=True
        )
        self.warnings = []
        for outcome in outcomes:
            if isinstance(outcome, MCPServerError):
                self.warnings.append(f"{outcome.message}; its tools are not available")
            elif isinstance(outcome, BaseException):
                raise outcome
        return list(self.warnings)

    async def stop(self) -> None:
        await asyncio.gather(*(c.stop() for c in self.connections), return_exceptions=True)

    async def refresh(self) -> None:
        """List again the tools of every server that said its list changed."""
        stale = [c for c in self.connections if c.stale]
        if stale:
            await asyncio.gather(*(c.refresh() for c in stale))

    # -- tools ------------------------------------------------------------------------------

    @property
    def tools(self) -> list[Tool]:
        """Every server's tools, as :class:`Tool` objects (see :meth:`tools_beside`)."""
        return self.tools_beside(())

    def tools_beside(self, reserved: Iterable[str]) -> list[Tool]:
        """The tools, named so none clashes with another or with a name in ``reserved``."""
        return self._build(frozenset(reserved))[0]

    def offered(self, reserved: Iterable[str] = ()) -> list[MCPTool]:
        """Which server and tool each offered name stands for (for ``/mcp`` and reports)."""
        return self._build(frozenset(reserved))[1]

    def _build(self, reserved: frozenset[str]) -> tuple[list[Tool], list[MCPTool]]:
        versions = tuple(c.version for c in self.connections)
        if self._built is not None and self._built[:2] == (versions, reserved):
            return self._built[2], self._built[3]
        counts: dict[str, int] = {}
        for connection in self.connections:
            for listed in _chosen(connection):
                key = _safe(listed.name)
                counts[key] = counts.get(key, 0) + 1
        tools: list[Tool] = []
        offered: list[MCPTool] = []
        used = set(reserved)
        for connection in self.connections:
            for listed in _chosen(connection):
                name = _safe(listed.name)
                if counts[name] > 1 or name in reserved:
                    name = _safe(f"{connection.name}__{listed.name}")
                if name in used:
                    continue  # two names made the same by the prefix: the first one is kept
                used.add(name)
                tools.append(
                    Tool.from_schema(
                        name,
                        listed.input_schema or {"type": "object", "properties": {}},
                        _caller(connection, listed.name),
                        description=listed.description,
                    )
                )
                offered.append(MCPTool(name, connection.name, listed))
        self._built = (versions, reserved, tools, offered)
        return tools, offered

    def describe(self) -> list[dict[str, Any]]:
        """Each server: name, where it is, state, problem, restarts and offered tool names."""
        offered = self.offered()
        return [
            {
                "name": c.name,
                "server": c.spec.describe(),
                "state": c.state,
                "problem": c.problem,
                "restarts": c.restarts,
                "tools": [t.name for t in offered if t.server == c.name],
            }
            for c in self.connections
        ]


def _chosen(connection: Connection) -> list[ListedTool]:
    """The server's tools that are offered (``tools=`` on its spec picks some)."""
    wanted = connection.spec.tools
    if wanted is None:
        return connection.tools
    return [t for t in connection.tools if t.name in wanted]


def _caller(connection: Connection, tool: str) -> Any:
    async def call(arguments: dict[str, Any]) -> ToolResult:
        return await connection.call(tool, arguments)

    call.__name__ = tool
    return call


def _safe(name: str) -> str:
    return _UNSAFE.sub("_", name)[:_MAX_NAME] or "tool"
