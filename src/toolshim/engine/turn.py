"""One request's state while the engine serves it: counters, warnings, usage, upstream calls."""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from toolshim.dialects.base import Dialect, PromptOptions
from toolshim.dialects.calls import ParsedCall
from toolshim.engine.focus import COMPACT_OVER, schema_size
from toolshim.errors import ToolshimError
from toolshim.types import (
    ChatRequest,
    Completion,
    Metadata,
    Mode,
    Strategy,
    StreamChunk,
    ToolCall,
    Usage,
)
from toolshim.upstreams.base import Upstream

__all__ = [
    "Turn",
    "call_key",
    "describe_request",
    "dropped_calls_warning",
    "emulated_id",
    "with_meta",
]

log = logging.getLogger("toolshim.engine")

EMULATED_WARNING = "tool calls emulated"
RESCUED_WARNING = "tool calls recovered from content"


def dropped_calls_warning(count: int) -> str:
    """The warning for a reply of ``count`` calls answered in the one-call legacy
    ``function_call`` shape (the chat codec writes only the first)."""
    return f"kept the first of {count} tool calls: the legacy function_call answer holds only one"


def call_key(name: str, arguments: str) -> tuple[str, str]:
    """A call as ``(name, arguments)`` with the arguments' JSON normalised (keys sorted,
    spacing dropped), so that the same call written twice compares equal."""
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return name, arguments.strip()
    return name, json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def emulated_id(index: int) -> str:
    """``emulated_<20 hex digits from secrets>_<index>``: an emulated call's id, which no caller
    can guess from the ids it has seen (a clock's nanoseconds could be)."""
    return f"emulated_{secrets.token_hex(10)}_{index}"


@dataclass
class Turn:
    """Per-request state. ``llm_calls`` counts every request sent to the upstream."""

    request: ChatRequest
    upstream: Upstream
    mode: Mode
    strategy: Strategy
    dialect: Dialect
    max_reasks: int
    headers: Mapping[str, str] | None = None
    constrained: bool = False
    """Ask the upstream for the dialect's JSON-Schema response_format (set only when the
    upstream honours it and the dialect has one for this turn)."""
    default_max_tokens: int | None = None
    """``max_tokens`` for emulated requests whose caller set none."""
    prefill: bool = False
    """The upstream continues an assistant message that ends the request (registry fact
    ``prefill``): the reply's calls may be continued (:mod:`.more_calls`)."""
    doubt: bool = False
    """A reply that opens with a call the model was unsure of is read as no call (registry
    fact ``doubt``, set by a person; :mod:`.confidence`)."""
    markup: str | None = None
    """The call markup of the model's family (shipped profiles): read first where a reply
    could be read two ways (see :data:`toolshim.dialects.extract.MARKUPS`)."""
    compact_setting: bool | None = False
    """Show the model the tools' schemas condensed (:func:`toolshim.engine.focus.condense_tools`):
    as set, or when None, when their schemas are long (:attr:`compact`)."""
    one_step: bool = False
    """A coding agent's turn (its tools were focused): the reply's calls are not continued for
    more (:mod:`.more_calls`): its steps depend on each other (read, then write what was
    read), and a continued call wrote a value no result had given yet."""
    llm_calls: int = 0
    reasks: int = 0
    emulated: bool = False
    calls_returned: bool = False
    """Tool calls came back to the caller (the "tool calls emulated" warning needs both)."""
    reasked: dict[str, frozenset[tuple[str, str]]] = field(default_factory=dict)
    """The re-ask ledger: each check (:mod:`toolshim.engine.checks`) that asked for a re-ask in
    this turn, by name, with the calls of the reply it re-asked, as :func:`call_key`. A check
    that re-asks once looks itself up here."""
    trimmed_reply: str | None = None
    """The last reply as the calls it repeated until ``max_tokens``, written once (what a
    re-ask shows the model of its reply instead of the whole loop); None when not trimmed."""
    answer_now: bool = False
    """Set when the model repeated an answered call after that re-ask, or made up another
    call after being told its values were nobody's: the answer is asked for without tools
    (``auto`` only)."""
    wanted: tuple[ParsedCall, ...] = ()
    """The calls of a reply asked for without tools that was nothing but a step not taken yet
    (:func:`~toolshim.engine.nocalls.first_answer`): the tools are offered for it, or, after
    the re-asks for unusable calls are spent, the calls are taken when they pass the checks."""
    planned: tuple[str, ...] = ()
    """Steps the model planned earlier in this request's conversation and toolshim held back,
    not taken yet (:mod:`toolshim.engine.plans`): an answer is opened as the first one's call."""
    nothing_asked: bool = False
    """The calls made since the user's message leave nothing in it to call for, and no step
    is planned (:func:`toolshim.engine.answer_first.nothing_more_asked`): an answer may be
    asked for at once, and a failed call written again is not re-asked."""
    plans: Any = None
    """The engine's :class:`~toolshim.engine.plans.PlanMemory`, told what this turn holds back."""
    held_back: list[str] = field(default_factory=list)
    """The names of the calls held back from this turn's reply (:mod:`.checks.made_up`)."""
    warnings: list[str] = field(default_factory=list)
    usage: Usage | None = None
    upstream_seconds: float = 0.0

    @property
    def prompt_options(self) -> PromptOptions:
        return PromptOptions(
            self.request.choice,
            parallel=self.request.allows_parallel,
            decision=self.strategy is Strategy.DECISION,
            constrained=self.constrained,
            # A coding agent's tool prompt stays byte for byte the same from turn to turn, so
            # the upstream's KV cache serves it (results are folded into the question with what
            # to do now): its turn 2 re-read 17% of the prompt for one changed line.
            results=self.results_in and not self.one_step,
        )

    @property
    def can_open(self) -> bool:
        """The upstream continues an assistant message and the turn lets an answer be a call:
        a reply can be handed back opened as a call (:mod:`toolshim.engine.next_step`)."""
        return (
            self.prefill
            and not self.constrained
            and self.request.choice.kind == "auto"
            and self.dialect.call_opening() is not None
        )

    @cached_property
    def compact(self) -> bool:
        """The tools are shown condensed: as set, else when their schemas and descriptions pass
        :data:`~toolshim.engine.focus.COMPACT_OVER` characters (measured only for a prompt)."""
        if self.compact_setting is not None:
            return self.compact_setting
        return schema_size(self.request.function_tools) > COMPACT_OVER

    @cached_property
    def results_in(self) -> bool:
        """The conversation already holds tool results."""
        return any(m.role in ("tool", "function") for m in self.request.messages)

    @cached_property
    def answered_results(self) -> dict[tuple[str, str], str]:
        """Each call whose result the history holds, as :func:`call_key`, with the result."""
        calls: dict[str, tuple[str, str]] = {}
        out: dict[tuple[str, str], str] = {}
        for message in self.request.messages:
            for tool_call in message.tool_calls:
                calls[tool_call.id] = call_key(tool_call.name, tool_call.arguments)
            if message.role == "tool" and message.tool_call_id in calls:
                out[calls[message.tool_call_id]] = message.text
        return out

    @property
    def caller_format(self) -> Any:
        """The caller's own ``response_format``, if any (it applies to the text answer)."""
        return self.request.params.get("response_format")

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    @property
    def answered_calls(self) -> frozenset[tuple[str, str]]:
        """The history's calls whose result is already in it (an assistant ``tool_calls``
        entry followed by the ``role=tool`` message that answers it), as :func:`call_key`."""
        return frozenset(self.answered_results)

    def warn_repeats(self, calls: Iterable[tuple[str, str]]) -> None:
        """Warn about each ``(name, arguments JSON)`` call whose result is already in the
        history. It is still returned: polling the same call is sometimes what is meant."""
        made = list(calls)
        if not made or not self.answered_calls:
            return
        for name, arguments in made:
            key = call_key(name, arguments)
            if key not in self.answered_calls:
                continue
            try:
                shown = json.dumps(json.loads(key[1]), ensure_ascii=False)
            except ValueError:
                shown = key[1]
            if len(shown) > 200:
                shown = shown[:197] + "..."
            self.warn(f"repeats {name}({shown}) whose result is already in the conversation")

    def returned(self, calls: Sequence[ToolCall]) -> None:
        """``calls`` go to the caller: warn about repeats, and remember what was held back
        beside them (:mod:`toolshim.engine.plans`)."""
        self.calls_returned = bool(calls)
        made = [(c.name, c.arguments) for c in calls]
        self.warn_repeats(made)
        if self.held_back and self.plans is not None:
            self.plans.remember(self.request.messages, made, self.held_back)

    def mark_emulated(self) -> None:
        self.emulated = True

    def meta(self) -> Metadata:
        warnings = tuple(self.warnings)
        if self.emulated and self.calls_returned:
            warnings = (EMULATED_WARNING, *warnings)
        return Metadata(
            mode=self.mode.value,
            emulated=self.emulated,
            dialect=self.dialect.name if self.emulated else None,
            llm_calls=self.llm_calls,
            reasks=self.reasks,
            warnings=warnings,
            strategy=self.strategy.value if self.emulated else None,
        )

    def add_usage(self, usage: Usage | None) -> None:
        if usage is not None:
            self.usage = usage + self.usage if self.usage else usage

    async def call(self, request: ChatRequest) -> Completion:
        """Send a non-streaming request upstream and read the completion."""
        self._count_call("call", request)
        started = time.perf_counter()
        try:
            completion = await self.upstream.complete(request, headers=self.headers)
        finally:
            self.upstream_seconds += time.perf_counter() - started
        self.add_usage(completion.usage)
        if log.isEnabledFor(logging.DEBUG):
            for choice in completion.choices:
                log.debug(
                    "← raw reply (finish_reason=%s, %d native tool calls):\n%s",
                    choice.finish_reason,
                    len(choice.message.tool_calls),
                    choice.message.text,
                )
        return completion

    def open_stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        """Start a streaming request upstream (counted as one LLM call)."""
        self._count_call("stream", request)
        return self.upstream.stream(request, headers=self.headers)

    def _count_call(self, kind: str, request: ChatRequest) -> None:
        """Count one LLM call (``kind``: ``call`` or ``stream``) and log its request at DEBUG."""
        self.llm_calls += 1
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "→ upstream %s %d (%s)\n%s",
                kind,
                self.llm_calls,
                self.mode.value,
                describe_request(request),
            )


def with_meta(error: ToolshimError, turn: Turn) -> ToolshimError:
    """``error`` with the metadata of the turn it ended (kept if it already has some)."""
    if error.meta is None:
        error.meta = turn.meta()
    return error


def describe_request(request: ChatRequest) -> str:
    """One line per message: index, role, size, tool fields and the start of the text."""
    lines = []
    for i, m in enumerate(request.messages):
        content = m.content
        text = content if isinstance(content, str) else str(list(content or ""))
        preview = " ".join(text.split())[:70]
        lines.append(
            f"  [{i}] {m.role:<9} | {len(text):>6} chars | "
            f"tool_calls:{bool(m.tool_calls)!s:<5} | tool_call_id:{bool(m.tool_call_id)!s:<5} | {preview}"
        )
    choice = request.tool_choice.describe() if request.tools and request.tool_choice else "-"
    extras = sorted(request.params)
    lines.append(
        f"  model={request.model!r} tools={len(request.tools)} tool_choice={choice} other={extras}"
    )
    return "\n".join(lines)
