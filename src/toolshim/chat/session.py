"""The chat session: the conversation, the current model, swaps, and streaming replies.

* **Model swap** — :meth:`ChatSession.use_model` says ``Tools: native``, ``Tools: emulated
  (<dialect>)`` or ``Tools: disabled`` and why; a swap typed during a reply waits for it.
* **Unknown model** and **runtime learning** — :mod:`toolshim.chat.knowledge`.
* **Errors** — a failed reply leaves the conversation as it was; Ctrl-C keeps what was
  answered so far, closed by an assistant message, so the history stays valid for every chat
  template (no dangling tool calls, no two user messages in a row).
"""

from __future__ import annotations

import asyncio
import copy
import signal
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from toolshim.agent.events import (
    RunFinished,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnStarted,
)
from toolshim.agent.loop import Agent
from toolshim.agent.result import AgentResult
from toolshim.agent.tools import Tool
from toolshim.capabilities.probe import DEFAULT_PROBE_TIMEOUT
from toolshim.capabilities.rejections import match_rejection
from toolshim.chat.commands import run_command
from toolshim.chat.knowledge import ModelKnowledge
from toolshim.chat.render import Renderer
from toolshim.chat.status import ToolStatus, effective_mode
from toolshim.chat.terminal import Terminal
from toolshim.chat.transcript import Question, Transcript
from toolshim.engine.engine import Engine
from toolshim.errors import (
    ToolshimError,
    UpstreamConnectionError,
    UpstreamStatusError,
    UpstreamTimeoutError,
)
from toolshim.types import Mode

if TYPE_CHECKING:
    from toolshim.mcp import MCPToolset

__all__ = ["ChatSession", "ChatSettings"]


@dataclass
class ChatSettings:
    """How the session talks to the model; ``prompt_timeout`` bounds every question."""

    mode: Mode = Mode.AUTO
    dialect: str | None = None
    strategy: str | None = None
    max_turns: int = 10
    prompt_timeout: float = 30.0
    probe_timeout: float = DEFAULT_PROBE_TIMEOUT
    params: dict[str, Any] = field(default_factory=dict)


class _Progress:
    """What a reply has produced so far, to keep the history valid if it is cancelled."""

    def __init__(self, messages: list[dict[str, Any]]) -> None:
        self.snapshot = copy.deepcopy(messages)
        self.text = ""

    def turn_started(self, messages: Sequence[dict[str, Any]]) -> None:
        self.snapshot = copy.deepcopy(list(messages))
        self.text = ""

    def history(self) -> list[dict[str, Any]]:
        """The history up to the cancelled model turn, closed by what it had said (if anything)."""
        said = self.text.strip() or "(reply cancelled by the user)"
        return [*self.snapshot, {"role": "assistant", "content": said}]


class ChatSession:
    """One conversation with models behind ``engine``, through ``terminal``."""

    def __init__(
        self,
        engine: Engine,
        tools: Sequence[Tool],
        terminal: Terminal,
        settings: ChatSettings | None = None,
        *,
        mcp: MCPToolset | None = None,
    ) -> None:
        self.engine = engine
        self.registry = engine.registry
        self.upstream = engine.upstream.key
        self.tools = list(tools)
        """The functions given as tools (the built-ins and ``--tools``)."""
        self.mcp = mcp
        """The MCP servers (``--mcp``), started by the caller for the whole session."""
        self.terminal = terminal
        self.settings = settings or ChatSettings()
        self.render = Renderer(terminal.console)
        self.transcript = Transcript(self.upstream)
        self.model: str | None = None
        self.messages: list[dict[str, Any]] = []
        self.knowledge = ModelKnowledge(
            self.registry,
            engine.upstream,
            terminal,
            self.render,
            has_tools=bool(self.tools) or bool(mcp),
            foreground=self.foreground,
        )
        self.queue: deque[str] = deque()
        self.quitting = False
        self._foreground: asyncio.Task[Any] | None = None

    @property
    def mode(self) -> Mode:
        return self.settings.mode

    @property
    def all_tools(self) -> list[Tool]:
        """The function tools and the MCP servers' tools, as the model is offered them."""
        if not self.mcp:
            return list(self.tools)
        return [*self.tools, *self.mcp.tools_beside(t.name for t in self.tools)]

    # -- the loop ---------------------------------------------------------------------------

    async def run(self, model: str) -> int:
        """Greet, settle the first model, then read and handle lines until /quit or Ctrl-D."""
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, self._interrupt)
        try:
            await self.use_model(model, lead="Model")
            self.render.info(
                "Type a message, or /help. Enter sends; Esc-Enter or a trailing \\ adds a line; "
                "Ctrl-C cancels a reply; Ctrl-D quits."
            )
            while not self.quitting:
                line = self.queue.popleft() if self.queue else await self.read()
                if line is None:
                    break
                await self.handle(line)
        finally:
            loop.remove_signal_handler(signal.SIGINT)
        self.render.end_line()
        return 0

    async def read(self) -> str | None:
        return await self.terminal.read_line(f"{self.model} › ")

    def _interrupt(self) -> None:
        """SIGINT outside raw keyboard mode (e.g. a pipe): cancel what runs in the foreground."""
        if self._foreground is not None and not self._foreground.done():
            self._foreground.cancel()

    async def handle(self, line: str) -> None:
        """One line: a /command or a message for the model."""
        text = line.strip()
        if not text:
            return
        if text.startswith("/"):
            await run_command(self, text)
        else:
            await self.send(line)

    async def foreground(self, task: asyncio.Task[Any]) -> bool:
        """Run ``task`` while watching the keyboard; True when the user cancelled it."""
        self._foreground = task
        try:
            return await self.terminal.watch(task, self._typed_during_reply)
        finally:
            self._foreground = None

    def _typed_during_reply(self, line: str) -> None:
        text = line.strip()
        if not text:
            return
        self.queue.append(text)
        words = text.split()
        if words[:2] == ["/model", "use"] and len(words) > 2:
            self.render.notice(
                f"Model change requested during a reply: {self.model} completes this turn "
                f"first, then toolshim switches to {words[2]}."
            )
        elif words[0] in ("/quit", "/exit"):
            self.render.notice("Quitting when this reply is complete.")
        else:
            self.render.notice(f"Queued {text!r}: it runs when this reply is complete.")

    # -- models -----------------------------------------------------------------------------

    def status(self, model: str) -> ToolStatus:
        """What ``model``'s tools are under the current mode, and why."""
        return self.knowledge.status(model, self.mode, self.settings.dialect)

    async def use_model(self, model: str, *, lead: str = "Switched to") -> None:
        """Make ``model`` current (asking about it first if it is unknown) and say what its
        tools will be."""
        self.knowledge.reopen(model)
        if self.knowledge.unknown(model, self.mode):
            await self.knowledge.settle_unknown(
                model, self.settings.prompt_timeout, self.settings.probe_timeout
            )
        previous, self.model = self.model, model
        if previous is not None and previous != model:
            # What one provider attached for itself (thought signatures, reasoning) is not
            # for the next one; strict APIs reject fields they do not know.
            self.messages = [_portable(m) for m in self.messages]
        status = self.status(model)
        self.render.model_status(lead, model, status)
        self.transcript.event(
            "model", model=model, previous=previous, tools=status.label, why=status.why
        )

    async def listed_models(self) -> list[str]:
        """The upstream's model ids (raises UpstreamError)."""
        listing = await self.engine.upstream.list_models()
        return [
            str(entry["id"])
            for entry in listing.get("data") or ()
            if isinstance(entry, dict) and entry.get("id")
        ]

    # -- sending a message ------------------------------------------------------------------

    async def send(self, text: str) -> None:
        """Ask the current model (through the agent loop, tools included) and stream the reply."""
        model = self.model or ""
        mode = effective_mode(self.mode, self.knowledge.emulated_for_session(model))
        status = self.status(model)
        agent = Agent(
            self.tools,
            mcp=self.mcp,
            model=model,
            upstream=self.engine,
            mode=mode,
            dialect=self.settings.dialect,
            strategy=self.settings.strategy,
            max_turns=self.settings.max_turns,
            params=self.settings.params,
        )
        messages = [*self.messages, {"role": "user", "content": text}]
        progress = _Progress(messages)
        had_runtime_fact = self.knowledge.runtime_fact(model) is not None
        since = time.time()
        started = time.perf_counter()
        task = asyncio.create_task(self._drive(agent, messages, progress))
        cancelled = await self.foreground(task)
        self.render.end_line()
        seconds = time.perf_counter() - started
        asked = Question(text, model, mode.value, status.label)
        if cancelled:
            self.messages = progress.history()
            self.render.notice("⨯ Reply cancelled; the conversation keeps what was said so far.")
            self.transcript.exchange(asked, "cancelled", seconds, answer=progress.text)
            return
        error = task.exception()
        if error is not None:
            if not isinstance(error, ToolshimError):
                raise error
            self._report_error(error, model)
            self.transcript.exchange(asked, "error", seconds, error=error.message)
            return
        result: AgentResult = task.result()
        self.messages = result.messages
        self.render.footer(result, seconds)
        for warning in result.warnings:
            if not _routine(warning):
                self.render.notice(f"note: {warning}", "dim yellow")
        outcome = "answered" if result.stopped is None else f"stopped: {result.stopped}"
        self.transcript.exchange(asked, outcome, seconds, result=result)
        await self.knowledge.after_reply(
            model,
            since=since,
            had_runtime_fact=had_runtime_fact,
            time_limit=self.settings.prompt_timeout,
            mode=self.mode,
            dialect=self.settings.dialect,
        )

    async def _drive(
        self, agent: Agent, messages: list[dict[str, Any]], progress: _Progress
    ) -> AgentResult:
        result: AgentResult | None = None
        async for event in agent.astream(messages):
            if isinstance(event, TurnStarted):
                progress.turn_started(event.messages)
            elif isinstance(event, TextDelta):
                progress.text += event.text
                self.render.text(event.text)
            elif isinstance(event, ToolCallStarted):
                self.render.tool_started(event.name, event.arguments)
            elif isinstance(event, ToolCallFinished):
                self.render.tool_finished(event.run)
            elif isinstance(event, RunFinished):
                result = event.result
        if result is None:
            raise RuntimeError("the agent run ended without a result")
        return result

    def _report_error(self, error: ToolshimError, model: str) -> None:
        hint = None
        if isinstance(error, UpstreamStatusError) and match_rejection(error) is not None:
            hint = (
                f"{model} rejected native tools and mode {self.mode.value} does not emulate "
                "them; /mode auto (or /mode force) describes the tools in the prompt instead"
            )
        elif isinstance(error, UpstreamConnectionError):
            hint = f"is the upstream running at {self.upstream}?"
        elif isinstance(error, UpstreamTimeoutError):
            hint = "the model took too long; a smaller model or a longer --timeout may help"
        elif isinstance(error, UpstreamStatusError) and error.status == 404:
            hint = "/model list shows the models the upstream has"
        self.render.error(error.message, hint)
        self.render.notice("The question was not added to the conversation.", "dim")


def _routine(warning: str) -> bool:
    """Warnings the footer or the learning question already cover."""
    return warning == "tool calls emulated" or warning.startswith("upstream rejected tools")


_MESSAGE_KEYS = ("role", "content", "name", "tool_calls", "tool_call_id")
_CALL_KEYS = ("id", "type", "function")


def _portable(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` with only the fields of the OpenAI message format, for another model."""
    kept = {k: v for k, v in message.items() if k in _MESSAGE_KEYS}
    if isinstance(kept.get("tool_calls"), list):
        kept["tool_calls"] = [
            {k: v for k, v in call.items() if k in _CALL_KEYS} if isinstance(call, dict) else call
            for call in kept["tool_calls"]
        ]
    return kept
