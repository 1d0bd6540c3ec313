"""One MCP server, live: its session (owned by one background task), its tools, its calls.

The SDK's session lives in task-scoped contexts, so one task (the *owner*) opens it, lists the
tools and waits; calls are made from any task on the same event loop. A server's stderr goes
to the ``toolshim.mcp`` debug log line by line (its last lines are quoted when it fails).

Failures are :class:`~toolshim.errors.MCPServerError`, never anything else:

* a server that cannot start (or list its tools) within ``startup_timeout``;
* a call that takes longer than ``timeout`` (``timed_out``): the server counts as hung and is
  stopped;
* a server that stops during a call (crashed, connection closed);
* a request the server refuses (a JSON-RPC error) or answers with something unreadable.

A server that was stopped (hung or crashed) is restarted, once, on the next call; after a
second stop it stays down and every call says so. ``tools/list_changed`` (a notification on
2025-era connections, a ``subscriptions/listen`` event on 2026-era ones) marks the listing
stale; :meth:`Connection.refresh` lists the tools again.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections import deque
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TextIO

from toolshim.agent.tools import ToolResult
from toolshim.errors import MCPServerError
from toolshim.mcp.content import tool_result
from toolshim.mcp.servers import MCPServerSpec, MCPStdio

if TYPE_CHECKING:
    from mcp import Client

__all__ = ["MAX_RESTARTS", "Connection", "ListedTool"]

log = logging.getLogger("toolshim.mcp")

MAX_RESTARTS = 1
_STOP_TIMEOUT = 10.0
_STDERR_TAIL = 5
_LIST_PAGES = 100
State = Literal["stopped", "starting", "ready", "down"]


@dataclass(frozen=True, slots=True)
class ListedTool:
    """A tool as the server lists it: its name, description and ``inputSchema`` unchanged."""

    name: str
    description: str
    input_schema: dict[str, Any]


class Connection:
    """One MCP server: :meth:`start`, :meth:`call`, :meth:`refresh`, :meth:`stop`."""

    def __init__(self, spec: MCPServerSpec, name: str | None = None) -> None:
        self.spec = spec
        self.name = name or spec.label
        self.state: State = "stopped"
        self.problem: str | None = None
        """Why the server is down (None while it runs)."""
        self.tools: list[ListedTool] = []
        self.stale = False
        """True once the server said its tool list changed, until :meth:`refresh`."""
        self.version = 0
        """Bumped each time :attr:`tools` is replaced."""
        self.restarts = 0
        self.stderr_tail: deque[str] = deque(maxlen=_STDERR_TAIL)
        self._client: Client | None = None
        self._owner: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._lock: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"Connection({self.name!r}, {self.state})"

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the server and list its tools (MCPServerError when it cannot)."""
        async with self._guard():
            if self.state == "ready":
                return
            await self._start()

    def _guard(self) -> asyncio.Lock:
        """The lock that makes starts one at a time (one per event loop)."""
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock[0] is not loop:
            self._lock = (loop, asyncio.Lock())
        return self._lock[1]

    async def _start(self) -> None:
        self.state, self.problem = "starting", None
        self.stderr_tail.clear()
        loop = self._loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()
        self._stop = asyncio.Event()
        self._owner = asyncio.create_task(self._own(ready, self._stop), name=f"mcp:{self.name}")
        try:
            await asyncio.wait_for(asyncio.shield(ready), self.spec.startup_timeout)
        except TimeoutError:
            within = f"within {self.spec.startup_timeout:g} s"
            raise await self._given_up(
                f"it did not start {within}",
                lambda: f"{self._starting()} did not start {within}{self._tail()}",
                cancel=True,
                timed_out=True,
            ) from None
        except Exception as exc:
            reason = _reason(exc)
            raise await self._given_up(
                f"it could not start ({reason})",
                lambda: f"{self._starting()} could not start: {reason}{self._tail()}",
                cancel=True,
            ) from exc
        self.state = "ready"

    def _starting(self) -> str:
        return f"MCP server {self.name!r} ({self.spec.describe()})"

    async def _given_up(
        self,
        why: str,
        message: Callable[[], str],
        *,
        cancel: bool = False,
        timed_out: bool = False,
    ) -> MCPServerError:
        """Stop the server (at once with ``cancel``) and mark it down (``why``); the error
        that says ``message()`` (written once it stopped: its last stderr lines are in)."""
        await self._halt(cancel=cancel)
        self._down(why)
        return MCPServerError(message(), server=self.name, timed_out=timed_out)

    async def stop(self) -> None:
        """Stop the server (its process ends); calls after this start it again."""
        await self._halt()
        self.state = "stopped"

    async def _halt(self, *, cancel: bool = False) -> None:
        """End the owner task: by its stop signal (the session closes, the process ends), or at
        once with ``cancel`` (a server that never finished starting is not waiting for it)."""
        owner, self._owner = self._owner, None
        if self._stop is not None:
            self._stop.set()
        self._client = None
        if owner is None or owner.done():
            return
        if cancel:
            owner.cancel()
        try:
            await asyncio.wait_for(asyncio.shield(owner), _STOP_TIMEOUT)
        except TimeoutError:
            owner.cancel()
        except (Exception, asyncio.CancelledError) as exc:  # the owner already reported it
            if isinstance(exc, asyncio.CancelledError) and not owner.cancelled():
                raise
            log.debug("MCP server %r ended with %s", self.name, _reason(exc))

    def _down(self, why: str) -> None:
        self.state, self.problem = "down", why
        log.warning("MCP server %r is down: %s", self.name, why)

    async def _own(self, ready: asyncio.Future[None], stop: asyncio.Event) -> None:
        """The owner task: open the session, list the tools, wait for the stop signal."""
        import anyio

        client: Client | None = None
        try:
            async with AsyncExitStack() as stack:
                client = await self._open(stack)
                await self._list(client)
                self._client = client
                async with anyio.create_task_group() as group:
                    if _listens(client):
                        group.start_soon(self._listen, client)
                    if not ready.done():
                        ready.set_result(None)
                    await stop.wait()
                    group.cancel_scope.cancel()
        except Exception as exc:
            if not ready.done():
                ready.set_exception(exc)
            elif not stop.is_set():
                self._down(f"it stopped ({_reason(exc)}){self._tail()}")
        finally:
            if self._client is client:  # (a later start may have put its own session there)
                self._client = None

    async def _open(self, stack: AsyncExitStack) -> Client:
        import httpx2
        from mcp import Client
        from mcp.client.stdio import StdioServerParameters, stdio_client
        from mcp.client.streamable_http import streamable_http_client
        from mcp_types import Implementation

        from toolshim import __version__

        spec = self.spec
        if isinstance(spec, MCPStdio):
            errlog = self._stderr_log()
            try:
                parameters = StdioServerParameters(
                    command=spec.command,
                    args=list(spec.args),
                    env=dict(spec.env) if spec.env else None,
                    cwd=spec.cwd,
                )
                client = Client(
                    stdio_client(parameters, errlog=errlog),
                    message_handler=self._message,
                    client_info=Implementation(name="toolshim", version=__version__),
                    cache=None,
                )
                await stack.enter_async_context(client)
            finally:
                errlog.close()  # the server holds its own copy
            return client
        http = await stack.enter_async_context(
            httpx2.AsyncClient(headers=dict(spec.headers), timeout=httpx2.Timeout(30.0, read=300.0))
        )
        client = Client(
            streamable_http_client(spec.url, http_client=http),
            message_handler=self._message,
            client_info=Implementation(name="toolshim", version=__version__),
            cache=None,
        )
        await stack.enter_async_context(client)
        return client

    def _stderr_log(self) -> TextIO:
        """A file for the server's stderr whose lines go to the debug log (a pipe and a thread)."""
        read_end, write_end = os.pipe()
        name, tail = self.name, self.stderr_tail

        def pump() -> None:
            with open(read_end, encoding="utf-8", errors="replace") as lines:
                for line in lines:
                    text = line.rstrip()
                    if text:
                        tail.append(text)
                        log.debug("MCP server %r: %s", name, text)

        threading.Thread(target=pump, name=f"mcp-stderr:{name}", daemon=True).start()
        return open(write_end, "w", encoding="utf-8")

    def _tail(self) -> str:
        return f"; its last output: {' | '.join(self.stderr_tail)}" if self.stderr_tail else ""

    # -- tools ------------------------------------------------------------------------------

    async def _list(self, client: Client) -> None:
        listed: list[ListedTool] = []
        cursor: str | None = None
        for _ in range(_LIST_PAGES):
            page = await client.list_tools(cursor=cursor)
            for item in page.tools:
                schema = item.input_schema if isinstance(item.input_schema, dict) else {}
                listed.append(ListedTool(item.name, item.description or "", dict(schema)))
            cursor = page.next_cursor
            if cursor is None:
                break
        self.tools, self.stale = listed, False
        self.version += 1
        log.debug("MCP server %r lists %d tool(s)", self.name, len(listed))

    async def refresh(self) -> None:
        """List the tools again if the server said they changed (a failure keeps the old list)."""
        client = self._client
        if not self.stale or client is None:
            return
        try:
            await asyncio.wait_for(self._list(client), self.spec.timeout)
        except Exception as exc:
            log.warning("MCP server %r: listing its tools again failed: %s", self.name, exc)
            self.stale = False

    async def _message(self, message: Any) -> None:
        """Notifications on 2025-era connections: a changed tool list marks the listing stale."""
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            log.debug("MCP server %r: its tool list changed", self.name)
            self.stale = True

    async def _listen(self, client: Client) -> None:
        """2026-era connections: the ``subscriptions/listen`` stream of tool-list changes."""
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _event in subscription:
                    log.debug("MCP server %r: its tool list changed", self.name)
                    self.stale = True
        except Exception as exc:  # no stream, no notice of changes: the listing stays as it is
            log.debug("MCP server %r: no tool-list change events (%s)", self.name, _reason(exc))

    # -- calls ------------------------------------------------------------------------------

    async def call(self, tool: str, arguments: dict[str, Any]) -> ToolResult:
        """Call ``tool``; its result, or MCPServerError (see the module docstring)."""
        import anyio
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED
        from pydantic import ValidationError

        client = await self._ready()
        try:
            with anyio.fail_after(self.spec.timeout):
                result = await client.call_tool(tool, arguments)
        except TimeoutError:
            raise await self._given_up(
                f"a call to {tool!r} took longer than {self.spec.timeout:g} s",
                lambda: (
                    f"the MCP server {self.name!r} did not answer the call to {tool!r} "
                    f"within {self.spec.timeout:g} s (it was stopped{self._again()})"
                ),
                timed_out=True,
            ) from None
        except MCPError as exc:
            if exc.code != CONNECTION_CLOSED:
                raise MCPServerError(
                    f"the MCP server {self.name!r} refused the call to {tool!r}: {exc.message} "
                    f"(error {exc.code})",
                    server=self.name,
                ) from exc
            await self._crashed(tool)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            await self._crashed(tool)
        except ValidationError as exc:
            raise MCPServerError(
                f"the MCP server {self.name!r} answered the call to {tool!r} with a result that "
                f"is not valid MCP ({exc.error_count()} problem(s))",
                server=self.name,
            ) from exc
        return tool_result(result.content, result.structured_content, result.is_error)

    async def _crashed(self, tool: str) -> None:
        await asyncio.sleep(0.05)  # let the last stderr lines arrive
        raise await self._given_up(
            f"it stopped during a call to {tool!r}",
            lambda: (
                f"the MCP server {self.name!r} stopped during the call to {tool!r} (it "
                f"crashed or closed the connection{self._again()}){self._tail()}"
            ),
        )

    def _again(self) -> str:
        if self.restarts < MAX_RESTARTS:
            return "; it will be started again for the next call"
        return "; it will not be started again"

    async def _ready(self) -> Client:
        """The live session, starting the server (or restarting it once) when it is not running;
        calls that arrive together share one start."""
        loop = asyncio.get_running_loop()
        if self._loop is not None and self._loop is not loop and self.state == "ready":
            raise MCPServerError(
                f"the MCP server {self.name!r} was started on another event loop; enter the "
                "agent (async with agent:) on the loop that runs it, or run it with agent.run()",
                server=self.name,
            )
        async with self._guard():
            if self.state == "down" and self.restarts >= MAX_RESTARTS:
                raise MCPServerError(
                    f"the MCP server {self.name!r} is down ({self.problem}) and was already "
                    f"restarted {self.restarts} time(s); its tools cannot be used now",
                    server=self.name,
                )
            if self.state == "down":
                self.restarts += 1
                log.info("MCP server %r: starting it again (%s)", self.name, self.problem)
            if self.state != "ready":
                await self._start()
            if self._client is None:
                raise MCPServerError(
                    f"the MCP server {self.name!r} is not running", server=self.name
                )
            return self._client


def _listens(client: Client) -> bool:
    """Whether to open a tool-list change stream (a 2026-era server that announces changes)."""
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    tools = client.server_capabilities.tools
    changes = bool(tools is not None and tools.list_changed)
    return changes and client.protocol_version in MODERN_PROTOCOL_VERSIONS


def _reason(exc: BaseException) -> str:
    """An exception as one line, looking inside exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    message = str(exc).strip()
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__
