"""The agent loop: ask the model, run the tools it calls, feed the results back, until it answers.

The agent speaks OpenAI-shaped messages to :meth:`Engine.acomplete`/:meth:`Engine.astream`;
the engine decides whether tools go natively or are emulated, so the loop is the same for a
model with tool support and for one without. Safeguards end a run with an answer (and
``result.stopped`` set) instead of an exception, unless ``raise_on_limit=True``:
``max_turns``, loop detection (:mod:`toolshim.agent.guards`), a model that keeps calling tools
that do not exist, and optional budgets on tool calls and tokens.

Tools are Python functions, :class:`Tool` objects, and the tools of MCP servers (``mcp=``,
:mod:`toolshim.mcp`). The servers start when a run starts and stop when it ends, unless the
agent is entered (``with agent:`` / ``async with agent:``): then they run until it exits. A
server's tool list is read again before a turn when the server said it changed.
"""

from __future__ import annotations

import copy
import os
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from toolshim.agent.events import (
    AgentEvent,
    RunFinished,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    TurnStarted,
)
from toolshim.agent.executor import execute, not_run, settled
from toolshim.agent.guards import (
    PlannedCall,
    Toolbox,
    call_signature,
    limit_answer,
    loop_answer,
    plan_calls,
    unknown_tool_answer,
)
from toolshim.agent.result import AgentResult
from toolshim.agent.state import Reply, RunState, Stop
from toolshim.agent.tools import Tool
from toolshim.capabilities.registry import Registry
from toolshim.dialects import get_dialect
from toolshim.engine.engine import Engine, upstream_or_env
from toolshim.engine.options import parse_mode, parse_strategy
from toolshim.errors import AgentLimitError, ConfigError, UpstreamError
from toolshim.types import Mode
from toolshim.upstreams.base import Upstream

if TYPE_CHECKING:
    from toolshim.mcp import MCPServerSpec, MCPToolset

__all__ = ["Agent"]

EventHandler = Callable[[AgentEvent], None]


class Agent:
    """Python functions as tools, and a loop that runs them for any model.

    >>> agent = Agent([get_weather, convert], upstream="http://127.0.0.1:8080/v1")  # doctest: +SKIP
    >>> result = agent.run("How warm is it in Paris, in Fahrenheit?")              # doctest: +SKIP
    >>> result.output, [r.name for r in result.tool_runs]                        # doctest: +SKIP

    ``upstream`` is a base URL, an :class:`Upstream`, or an :class:`Engine` (then ``mode``,
    ``dialect`` and ``strategy`` override the engine's for this agent's requests); without
    it, ``TOOLSHIM_UPSTREAM`` is used. ``model`` defaults to the first model the upstream
    lists. ``params`` (temperature, max_tokens, ...) go into every request. ``mcp`` lists
    MCP servers whose tools the model may call too: command lines, URLs,
    :class:`~toolshim.mcp.MCPStdio`/:class:`~toolshim.mcp.MCPHttp`, or an
    :class:`~toolshim.mcp.MCPToolset` (then its owner opens and closes it).
    """

    def __init__(
        self,
        tools: Iterable[Tool | Callable[..., Any]] = (),
        *,
        mcp: Iterable[str | MCPServerSpec] | MCPToolset | None = None,
        model: str | None = None,
        upstream: str | Upstream | Engine | None = None,
        mode: str | Mode | None = None,
        dialect: str | None = None,
        strategy: str | None = None,
        system: str | None = None,
        max_turns: int = 10,
        max_tool_calls: int | None = None,
        max_total_tokens: int | None = None,
        max_unknown_tool_retries: int = 2,
        tool_timeout: float | None = None,
        params: Mapping[str, Any] | None = None,
        registry: Registry | str | os.PathLike[str] | None = None,
        api_key: str | None = None,
        raise_on_limit: bool = False,
    ) -> None:
        self.toolbox = Toolbox(Tool.from_function(t) for t in tools)
        """The agent's own tools (functions and Tool objects); MCP tools join them per run."""
        self.mcp = _toolset(mcp)
        _at_least("max_turns", max_turns, 1)
        _at_least("max_unknown_tool_retries", max_unknown_tool_retries, 0)
        if max_tool_calls is not None:
            _at_least("max_tool_calls", max_tool_calls, 0)
        if max_total_tokens is not None:
            _at_least("max_total_tokens", max_total_tokens, 1)
        self.mode = parse_mode(mode) if mode is not None else None
        self.strategy = parse_strategy(strategy) if strategy is not None else None
        self.dialect = get_dialect(dialect).name if dialect else None
        self.model = model
        self.system = system
        self.max_turns = max_turns
        self.max_tool_calls = max_tool_calls
        self.max_total_tokens = max_total_tokens
        self.max_unknown_tool_retries = max_unknown_tool_retries
        self.tool_timeout = tool_timeout
        self.params = dict(params or {})
        self.raise_on_limit = raise_on_limit
        self.engine, self._owns_engine = self._engine(upstream, registry, api_key)

    def _engine(
        self,
        upstream: str | Upstream | Engine | None,
        registry: Registry | str | os.PathLike[str] | None,
        api_key: str | None,
    ) -> tuple[Engine, bool]:
        if isinstance(upstream, Engine):
            return upstream, False
        upstream = upstream_or_env(
            upstream,
            "the agent has no upstream: pass upstream='http://HOST:PORT/v1' (an OpenAI-compatible "
            "server, e.g. `toolshim serve`, which prints its URL), an Upstream or an Engine, or "
            "set TOOLSHIM_UPSTREAM",
        )
        engine = Engine(
            upstream,
            mode=self.mode or Mode.AUTO,
            strategy=self.strategy,
            dialect=self.dialect,
            registry=registry,
            api_key=api_key,
        )
        return engine, True

    def __repr__(self) -> str:
        return f"Agent(tools={self.toolbox.names}, model={self.model!r}, engine={self.engine!r})"

    @property
    def tools(self) -> list[Tool]:
        """The agent's tools, with the MCP servers' tools as last listed."""
        return list(self._toolbox().tools.values())

    def _toolbox(self) -> Toolbox:
        if not self.mcp:
            return self.toolbox
        extra = self.mcp.tools_beside(self.toolbox.names)
        return Toolbox([*self.toolbox.tools.values(), *extra])

    # -- running ----------------------------------------------------------------------------

    async def arun(
        self, prompt: str | Sequence[Mapping[str, Any]], *, on_event: EventHandler | None = None
    ) -> AgentResult:
        """Run until the model answers (or a safeguard stops it); ``on_event`` sees each event."""
        result: AgentResult | None = None
        async for event in self._drive(prompt, stream=False):
            if on_event is not None:
                on_event(event)
            if isinstance(event, RunFinished):
                result = event.result
        if result is None:  # _drive always finishes with RunFinished
            raise RuntimeError("the agent loop ended without a result")
        return result

    def run(
        self, prompt: str | Sequence[Mapping[str, Any]], *, on_event: EventHandler | None = None
    ) -> AgentResult:
        """Blocking :meth:`arun` (runs on the engine's own event-loop thread)."""
        return self.engine.run_sync(self.arun(prompt, on_event=on_event))

    async def astream(self, prompt: str | Sequence[Mapping[str, Any]]) -> AsyncIterator[AgentEvent]:
        """The run as events, the model's text streamed as it is generated; the last is RunFinished."""
        async for event in self._drive(prompt, stream=True):
            yield event

    def stream(self, prompt: str | Sequence[Mapping[str, Any]]) -> Iterator[AgentEvent]:
        """Blocking :meth:`astream`."""
        events = self.astream(prompt)
        while True:
            try:
                yield self.engine.run_sync(events.__anext__())
            except StopAsyncIteration:
                return

    async def aclose(self) -> None:
        """Close the engine if the agent created it."""
        if self._owns_engine:
            await self.engine.aclose()

    def close(self) -> None:
        if self._owns_engine:
            self.engine.close()

    async def __aenter__(self) -> Agent:
        if self.mcp:
            await self.mcp.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            if self.mcp:
                await self.mcp.__aexit__()
        finally:
            await self.aclose()

    def __enter__(self) -> Agent:
        if self.mcp:
            self.engine.run_sync(self.mcp.__aenter__())
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self.mcp:
                self.engine.run_sync(self.mcp.__aexit__())
        finally:
            self.close()

    # -- the loop ---------------------------------------------------------------------------

    async def _drive(
        self, prompt: str | Sequence[Mapping[str, Any]], *, stream: bool
    ) -> AsyncIterator[AgentEvent]:
        if not self.mcp:
            async for event in self._turns(prompt, stream=stream):
                yield event
            return
        async with self.mcp:
            async for event in self._turns(prompt, stream=stream):
                yield event

    async def _turns(
        self, prompt: str | Sequence[Mapping[str, Any]], *, stream: bool
    ) -> AsyncIterator[AgentEvent]:
        state = RunState(messages=self._start(prompt))
        if self.mcp:
            for warning in self.mcp.warnings:
                state.warn(warning)
        state.model = await self._model_name(state)
        for turn in range(1, self.max_turns + 1):
            yield TurnStarted(turn, tuple(copy.deepcopy(state.messages)))
            started = time.perf_counter()
            reply = Reply()
            if self.mcp:
                await self.mcp.refresh()
            toolbox = self._toolbox()
            request = self._request(state, toolbox, stream=stream)
            if stream:
                async for chunk in self.engine.astream(request, **self._overrides()):
                    text = reply.add(chunk)
                    if text:
                        yield TextDelta(turn, text)
            else:
                reply.take(await self.engine.acomplete(request, **self._overrides()))
            state.add_reply(reply)
            calls = reply.calls(turn)
            if not calls:
                if not reply.text.strip():
                    state.warn(f"the model's final answer (turn {turn}) is empty")
                state.finish(reply.text, reply.extra)
                yield TurnFinished(turn, state.close_reply(reply, turn, started))
                break
            state.messages.append(reply.message(calls))
            planned = plan_calls(calls, toolbox, state.ledger)
            stop = self._token_stop(state, reply, turn) or self._safeguard(state, planned, toolbox)
            if stop is not None:
                for index, item in enumerate(planned):
                    run = settled(item, turn, toolbox) or not_run(item, turn, stop.why)
                    state.record(item, run, index)
                    yield ToolCallFinished(turn, run)
                state.close_turn(planned)
                state.stop(stop)
                yield TurnFinished(turn, state.close_reply(reply, turn, started))
                break
            for item in planned:
                if item.status == "run" and item.duplicate_of is None:
                    yield ToolCallStarted(turn, item.call.id, item.name, item.arguments)
            async for index, run in execute(planned, turn, toolbox, time_limit=self.tool_timeout):
                state.record(planned[index], run, index)
                yield ToolCallFinished(turn, run)
            state.close_turn(planned)
            yield TurnFinished(turn, state.close_reply(reply, turn, started))
        else:
            reason = f"the turn limit (max_turns={self.max_turns}) was reached"
            state.stop(Stop("max_turns", limit_answer(reason, state.latest_runs()), reason))
        result = state.result()
        if self.raise_on_limit and result.stopped is not None:
            raise AgentLimitError(
                f"the agent stopped ({result.stopped}): {result.output}",
                reason=result.stopped,
                result=result,
            )
        yield RunFinished(result)

    def _start(self, prompt: str | Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        if isinstance(prompt, str):
            messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
        else:
            messages = [dict(copy.deepcopy(m)) for m in prompt]
            if not messages:
                raise ConfigError("the agent needs a prompt: a string or at least one message")
        has_system = any(m.get("role") in ("system", "developer") for m in messages)
        if self.system and self.system.strip() and not has_system:
            messages.insert(0, {"role": "system", "content": self.system})
        return messages

    async def _model_name(self, state: RunState) -> str:
        if self.model is not None:
            return self.model
        try:
            listing = await self.engine.upstream.list_models()
        except UpstreamError as exc:
            state.warn(f"no model given and the upstream's model list is unreadable ({exc})")
            return ""
        for entry in listing.get("data") or ():
            if isinstance(entry, Mapping) and entry.get("id"):
                self.model = str(entry["id"])
                return self.model
        state.warn("no model given and the upstream lists no models; sent an empty model name")
        return ""

    def _request(self, state: RunState, toolbox: Toolbox, *, stream: bool) -> dict[str, Any]:
        request: dict[str, Any] = {**self.params, "model": state.model}
        request["messages"] = state.messages
        if toolbox:
            request["tools"] = [t.to_openai() for t in toolbox.tools.values()]
        if stream:
            request["stream"] = True
            request.setdefault("stream_options", {"include_usage": True})
        return request

    def _overrides(self) -> dict[str, Any]:
        return {"mode": self.mode, "dialect": self.dialect, "strategy": self.strategy}

    def _token_stop(self, state: RunState, reply: Reply, turn: int) -> Stop | None:
        if self.max_total_tokens is None:
            return None
        if reply.usage is None:
            state.warn("token budget not enforced: the upstream reported no token usage")
            return None
        if state.usage.total_tokens < self.max_total_tokens:
            return None
        reason = (
            f"the token budget (max_total_tokens={self.max_total_tokens}) was used up "
            f"({state.usage.total_tokens} tokens after turn {turn})"
        )
        return Stop("token_budget", limit_answer(reason, state.latest_runs()), reason)

    def _safeguard(
        self, state: RunState, planned: Sequence[PlannedCall], toolbox: Toolbox
    ) -> Stop | None:
        """Decide whether this turn's calls may run, or the run ends here."""
        unknown = [p for p in planned if p.status == "unknown_tool"]
        repeated = [p for p in planned if p.status == "repeated"]
        if unknown and len(unknown) == len(planned):
            state.unknown_streak += 1
            names = [p.call.name for p in unknown]
            listed = ", ".join(repr(n) for n in dict.fromkeys(names))
            if state.unknown_streak > self.max_unknown_tool_retries:
                reason = (
                    f"the model kept calling tools that do not exist ({listed}) after "
                    f"{self.max_unknown_tool_retries} correction(s)"
                )
                return Stop("unknown_tool", unknown_tool_answer(names, toolbox), reason)
            state.warn(
                f"the model called unknown tool(s) {listed}; re-asked with the available tools"
            )
        else:
            state.unknown_streak = 0
            for p in unknown:
                state.warn(f"the model called unknown tool {p.call.name!r}; told it the real tools")
        if repeated and all(p.status in ("repeated", "unknown_tool") for p in planned):
            signatures = ", ".join(call_signature(p.name, p.arguments) for p in repeated)
            reason = (
                f"loop stopped: the model called {signatures} again after its result came back; "
                "answered from that result"
            )
            return Stop("loop", loop_answer(repeated), reason, warning=reason)
        for p in repeated:
            state.warn(
                f"repeated call {call_signature(p.name, p.arguments)} answered from its earlier "
                "result instead of running it again"
            )
        fresh = sum(1 for p in planned if p.status == "run" and p.duplicate_of is None)
        if self.max_tool_calls is not None and state.executed + fresh > self.max_tool_calls:
            reason = (
                f"the tool-call budget (max_tool_calls={self.max_tool_calls}) would be exceeded "
                f"({state.executed} run, {fresh} more requested)"
            )
            return Stop("tool_call_budget", limit_answer(reason, state.latest_runs()), reason)
        return None


def _toolset(mcp: Iterable[str | MCPServerSpec] | MCPToolset | None) -> MCPToolset | None:
    """The MCP servers as one toolset (None without any); the SDK is needed only to start them."""
    if mcp is None:
        return None
    from toolshim.mcp import MCPToolset

    if isinstance(mcp, MCPToolset):
        return mcp
    if isinstance(mcp, str):
        raise ConfigError(
            f"mcp= takes a list of servers, not one string; did you mean mcp=[{mcp!r}]?",
            param="mcp",
        )
    toolset = MCPToolset(mcp)
    return toolset if toolset else None


def _at_least(name: str, value: int, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigError(
            f"{name} must be an integer of at least {minimum}, not {value!r}", param=name
        )
