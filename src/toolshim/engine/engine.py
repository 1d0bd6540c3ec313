"""The engine: serve an OpenAI chat-completions request natively or by emulation, per the mode.

=========  ==============================================================================
mode       behaviour (DESIGN.md, "Modes")
=========  ==============================================================================
off        native only; upstream errors reach the caller unchanged
fallback   native first; emulate when the reply has no valid tool calls or tools are rejected
force      always emulate; ``tools`` never go upstream
auto       the registry decides; an unknown model is tried natively and learned from
strip      tools go only to models known to support them; others get a "no tools" note
=========  ==============================================================================
"""

from __future__ import annotations

import asyncio
import copy
import logging
import os
import threading
import time
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from typing import Any, ClassVar, TypeVar

from toolshim.capabilities.facts import Source, Support
from toolshim.capabilities.profiles import shipped_profiles
from toolshim.capabilities.registry import Registry
from toolshim.capabilities.rejections import match_rejection
from toolshim.dialects import PromptOptions, get_dialect
from toolshim.engine.api import Answer
from toolshim.engine.emulate import emulation_request
from toolshim.engine.focus import (
    brief_system,
    brief_warning,
    focus_tools,
    left_out_warning,
)
from toolshim.engine.options import DEFAULT_MAX_TOKENS, EngineOptions
from toolshim.engine.plans import PlanMemory, steps_left
from toolshim.engine.result_headers import brief_results, brief_results_warning
from toolshim.engine.routes import Route, strip_request
from toolshim.engine.turn import Turn
from toolshim.errors import ConfigError, UpstreamError
from toolshim.schemas import check_tool_names, inspect_tools
from toolshim.types import ChatRequest, Completion, Mode, Strategy, StreamChunk
from toolshim.upstreams.base import Upstream
from toolshim.upstreams.openai_http import OpenAIUpstream

__all__ = ["Engine", "upstream_or_env"]

log = logging.getLogger("toolshim.engine")

REJECTION_MEMORY = 600
"""Seconds a tools rejection overrides a stronger "yes" in this process."""
T = TypeVar("T")

RequestReader = Callable[[Any], tuple[ChatRequest, Mapping[str, Any]]]
"""Reads a request given as a mapping (a protocol's JSON body) into a core request and the
per-request options (its ``toolshim`` field); raises :class:`~toolshim.errors.ToolshimError`."""


class Engine:
    """Tool calling for any OpenAI-compatible upstream.

    >>> engine = Engine("http://127.0.0.1:11434/v1", mode="auto")      # doctest: +SKIP
    >>> reply = engine.complete({"model": "gemma3:1b", "messages": [...], "tools": [...]})
    >>> reply.tool_calls, reply.meta.warnings                            # doctest: +SKIP

    ``upstream`` is a base URL or an :class:`Upstream`; None reads ``TOOLSHIM_UPSTREAM``.
    ``registry`` is a :class:`Registry`, a path to a SQLite store, ``":memory:"``, or None for
    the default store (``TOOLSHIM_REGISTRY`` or the user data dir). ``dialect``,
    ``strategy`` and ``constrain`` left unset come, per model, from the registry: what
    ``toolshim eval --apply`` or ``toolshim models set`` stored, else json, single, and
    constrained only where the upstream honours ``response_format``.
    """

    read_request: ClassVar[RequestReader | None] = None
    """How a request given as a mapping is read: the :mod:`toolshim` package sets the OpenAI
    chat-completions reader (``read_request`` of the chat-completions codec)."""

    def __init__(
        self,
        upstream: Upstream | str | None = None,
        *,
        mode: str | Mode = Mode.AUTO,
        strategy: str | None = None,
        dialect: str | None = None,
        max_reasks: int = 2,
        rescue: bool = True,
        constrain: bool | None = None,
        registry: Registry | str | os.PathLike[str] | None = None,
        api_key: str | None = None,
        learn: bool = True,
        default_max_tokens: int | None = DEFAULT_MAX_TOKENS,
        offer_tools: str | Sequence[str] | None = None,
        compact_tools: bool | None = None,
        brief_system: bool | None = None,
    ) -> None:
        upstream = upstream_or_env(
            upstream,
            "no upstream: pass one (an OpenAI-compatible base URL such as "
            "'http://127.0.0.1:11434/v1', or an Upstream) or set TOOLSHIM_UPSTREAM; for the "
            "embedded model, start toolshim.local.EmbeddedServer and pass its base_url",
        )
        self.upstream: Upstream = (
            OpenAIUpstream(upstream, api_key=api_key) if isinstance(upstream, str) else upstream
        )
        self.options = EngineOptions.build(
            mode=mode,
            strategy=strategy,
            dialect=dialect,
            max_reasks=max_reasks,
            rescue=rescue,
            constrain=constrain,
            default_max_tokens=default_max_tokens,
            offer_tools=offer_tools,
            compact_tools=compact_tools,
            brief_system=brief_system,
        )
        if isinstance(registry, Registry):
            self.registry = registry
        else:
            self.registry = Registry.open(registry)
        self.learn = learn
        """Store what an upstream's tools rejection teaches (False: act on it in this process
        only, for :data:`REJECTION_MEMORY` seconds; the registry is left as it is)."""
        self._rejected: dict[str, float] = {}
        self.plans = PlanMemory()
        """Steps models planned and toolshim held back (:mod:`toolshim.engine.plans`)."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._loop_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Engine({self.upstream!r}, mode={self.options.mode.value!r})"

    def with_upstream(self, upstream: Upstream) -> Engine:
        """A new engine with the same options and registry over another upstream (for example
        this one's, wrapped to observe it)."""
        clone = copy.copy(self)
        clone.upstream = upstream
        clone._loop = clone._thread = None
        clone._loop_lock = threading.Lock()
        return clone

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- public API -------------------------------------------------------------------------

    def answer(
        self,
        request: ChatRequest | Mapping[str, Any],
        *,
        headers: Mapping[str, str] | None = None,
        warnings: Iterable[str] = (),
        **overrides: Any,
    ) -> Answer:
        """One request, ready to be served: ``await answer.complete()`` or iterate
        ``answer.stream()`` (see :mod:`toolshim.engine.api`). ``headers`` go upstream,
        ``warnings`` join the metadata's (what a protocol's decoder had to drop),
        ``overrides`` are per-request options (``mode``, ``dialect`` …). A malformed request
        or a bad option raises here."""
        return Answer(self, self.turn(request, headers=headers, **overrides), warnings)

    async def acomplete(
        self,
        request: ChatRequest | Mapping[str, Any],
        *,
        headers: Mapping[str, str] | None = None,
        **overrides: Any,
    ) -> Completion:
        """Serve one request; the completion carries the ``toolshim`` metadata in ``meta``."""
        return await self.answer(request, headers=headers, **overrides).complete()

    async def astream(
        self,
        request: ChatRequest | Mapping[str, Any],
        *,
        headers: Mapping[str, str] | None = None,
        **overrides: Any,
    ) -> AsyncIterator[StreamChunk]:
        """Serve one request as a stream of chunks; the last chunk carries the metadata."""
        async for chunk in self.answer(request, headers=headers, **overrides).stream():
            yield chunk

    def complete(
        self,
        request: ChatRequest | Mapping[str, Any],
        *,
        headers: Mapping[str, str] | None = None,
        **overrides: Any,
    ) -> Completion:
        """Blocking :meth:`acomplete` (runs on the engine's own event loop thread)."""
        return self.run_sync(self.acomplete(request, headers=headers, **overrides))

    def stream(
        self,
        request: ChatRequest | Mapping[str, Any],
        *,
        headers: Mapping[str, str] | None = None,
        **overrides: Any,
    ) -> Iterator[StreamChunk]:
        """Blocking :meth:`astream`."""
        agen = self.astream(request, headers=headers, **overrides)
        while True:
            try:
                yield self.run_sync(agen.__anext__())
            except StopAsyncIteration:
                return

    async def aclose(self) -> None:
        await self.upstream.aclose()

    def close(self) -> None:
        """Close the upstream and stop the sync bridge's event loop (if it was started)."""
        if self._loop is None:
            return
        self.run_sync(self.aclose())
        loop, thread = self._loop, self._thread
        asyncio.run_coroutine_threadsafe(loop.shutdown_asyncgens(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join()
        loop.close()
        self._loop = self._thread = None

    # -- assembling a turn ------------------------------------------------------------------

    def turn(
        self,
        request: ChatRequest | Mapping[str, Any],
        *,
        headers: Mapping[str, str] | None = None,
        **overrides: Any,
    ) -> Turn:
        """Validate the request and the options, and pick the dialect."""
        if isinstance(request, ChatRequest):
            chat = request
        else:
            chat, per_request = self._read(request)
            overrides = {**per_request, **overrides}
        check_tool_names(chat.tools)  # what OpenAI and Anthropic accept, nothing a prompt breaks on
        schema_notes = inspect_tools(chat.tools)  # caller schemas: local $refs, bounded
        options = self.options.override({k: v for k, v in overrides.items() if v is not None})
        chat, left_out = focus_tools(chat, options.offer_tools)
        if left_out:
            schema_notes = (*schema_notes, left_out_warning(left_out))
        brief = options.brief_system
        if brief or (brief is None and left_out):
            chat, cut = brief_system(chat)
            if cut:
                schema_notes = (*schema_notes, brief_warning(cut))
            chat, shortened = brief_results(chat)
            if shortened:
                schema_notes = (*schema_notes, brief_results_warning(shortened))
        known = self.registry.model_facts(self.upstream.key, chat.model)  # read once a turn
        dialect_name = options.dialect or known.preferred_dialect() or "json"
        dialect = get_dialect(dialect_name)
        # Unset options come from the registry: an eval's pick or a person's setting first.
        strategy = options.strategy or known.preferred_strategy()
        constrain = options.constrain
        if constrain is None:
            constrain = known.constrained()
        if constrain:
            probe = PromptOptions(
                chat.choice,
                parallel=chat.allows_parallel,
                decision=strategy is Strategy.DECISION,
            )
            constrain = dialect.holds_to_schema(chat.function_tools, probe)
        turn = Turn(
            request=chat,
            upstream=self.upstream,
            mode=options.mode,
            strategy=strategy,
            dialect=dialect,
            max_reasks=options.max_reasks,
            headers=headers,
            constrained=constrain,
            default_max_tokens=options.default_max_tokens,
            prefill=known.supports("prefill"),
            doubt=known.supports("doubt"),
            markup=_family_markup(chat.model),
            compact_setting=_compact(options.compact_tools, bool(left_out)),
            one_step=bool(left_out),
            # Steps left are opened as calls: a request without tools has none to open.
            planned=(
                steps_left(
                    self.plans,
                    chat.messages,
                    coding=bool(left_out),
                    tools=[t.name for t in chat.function_tools],
                )
                if chat.function_tools
                else ()
            ),
            plans=self.plans,
        )
        for note in schema_notes:
            turn.warn(note)
        return turn

    def _read(self, request: Any) -> tuple[ChatRequest, Mapping[str, Any]]:
        reader = type(self).read_request  # (a function kept on the class, not a method)
        if reader is None:
            raise ConfigError(
                "this engine takes a ChatRequest: no reader for requests given as mappings "
                "was set (Engine.read_request)"
            )
        return reader(request)

    def support(self, model: str) -> Support:
        """Native tool support as the engine acts on it: the registry's winning fact, except
        that a model which rejected tools in this process within :data:`REJECTION_MEMORY`
        seconds is treated as "no" even when a probe or a profile says yes — so a wrong "yes"
        costs one failed attempt per window, not one per request. A person's "yes" is obeyed."""
        rejected = self._rejected.get(model)
        if rejected is not None and time.monotonic() - rejected >= REJECTION_MEMORY:
            del self._rejected[model]
            rejected = None
        fact = self.registry.fact(self.upstream.key, model, "native_tools")
        if fact is None:
            return Support.NO if rejected is not None else Support.UNKNOWN
        if rejected is not None and fact.source is not Source.USER:
            return Support.NO
        return fact.support

    def learn_rejection(self, turn: Turn, error: UpstreamError) -> bool:
        """If ``error`` says the model cannot take tools, remember it; True when it did."""
        rejection = match_rejection(error)
        if rejection is None:
            return False
        turn.warn(f"upstream rejected tools ({error.message})")
        self._rejected[turn.request.model] = time.monotonic()
        if not self.learn:
            log.info(
                "%s at %s rejected tools (%s); not stored (learning is off), emulating for %d s",
                turn.request.model,
                self.upstream.key,
                rejection.server,
                REJECTION_MEMORY,
            )
            return True
        fact = self.registry.learn(
            self.upstream.key,
            turn.request.model,
            "native_tools",
            Support.NO,
            Source.RUNTIME_ERROR,
            detail=f"{rejection.server}: {error.message}"[:500],
        )
        if fact.source is not Source.RUNTIME_ERROR:
            log.warning(
                "%s rejected tools although the registry says native_tools=%s (source %s); "
                "treating it as 'no' for %d s in this process",
                turn.request.model,
                fact.value,
                fact.source.value,
                REJECTION_MEMORY,
            )
        log.info(
            "learned: %s at %s has no native tools (%s); now %s from %s",
            turn.request.model,
            self.upstream.key,
            rejection.server,
            fact.value,
            fact.source.value,
        )
        return True

    # -- serving ----------------------------------------------------------------------------

    @property
    def rescue(self) -> bool:
        """Calls a native reply wrote as text are rescued (the ``rescue`` option)."""
        return self.options.rescue

    def route(self, turn: Turn) -> Route:
        """Where a turn goes (:class:`~toolshim.engine.routes.Route`)."""
        request = turn.request
        mode = turn.mode
        if mode is Mode.OFF:
            return Route.NATIVE
        if mode is Mode.FORCE:
            return Route.EMULATE if request.tools or request.has_tool_history else Route.NATIVE
        support = self.support(request.model)
        if not request.tools:
            if (
                request.has_tool_history
                and support is not Support.YES
                and mode is not Mode.FALLBACK
            ):
                return (
                    Route.EMULATE if support is Support.NO or mode is Mode.STRIP else Route.NATIVE
                )
            return Route.NATIVE
        if mode is Mode.STRIP:
            return Route.NATIVE_OR_STRIP if support is Support.YES else Route.STRIP
        if mode is Mode.FALLBACK:
            # Native first, whatever a profile, probe or older error says; only what this
            # process just saw rejected, or a person's "no", spares the doomed attempt.
            return Route.EMULATE if self._known_without_tools(request.model) else Route.TRY_NATIVE
        if support is Support.NO:
            return Route.EMULATE
        return Route.TRY_NATIVE

    def _known_without_tools(self, model: str) -> bool:
        if model in self._rejected and self.support(model) is Support.NO:
            return True
        fact = self.registry.fact(self.upstream.key, model, "native_tools")
        return fact is not None and fact.source is Source.USER and fact.support is Support.NO

    # -- the sync bridge --------------------------------------------------------------------

    def run_sync(self, coro: Awaitable[T]) -> T:
        """Run ``coro`` on the engine's own event-loop thread and wait for it (the bridge
        behind :meth:`complete` and :meth:`stream`; usable by code built on the engine)."""
        with self._loop_lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="toolshim-engine", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
        return asyncio.run_coroutine_threadsafe(_await(coro), self._loop).result()


async def _await(awaitable: Awaitable[T]) -> T:
    return await awaitable


def upstream_or_env(upstream: str | Upstream | None, missing: str) -> str | Upstream:
    """``upstream``, else the ``TOOLSHIM_UPSTREAM`` environment variable's URL; neither given
    raises a :class:`~toolshim.errors.ConfigError` that says ``missing``."""
    upstream = upstream if upstream is not None else os.environ.get("TOOLSHIM_UPSTREAM") or None
    if upstream is None:
        raise ConfigError(missing, param="upstream")
    return upstream


def _compact(setting: bool | None, focused: bool) -> bool | None:
    """Condense the tools in the prompt: as set, else for a coding agent's focused turn, else
    (None) when their schemas are long (:attr:`Turn.compact`, measured only for a prompt)."""
    if setting is not None:
        return setting
    return True if focused else None


def _family_markup(model: str) -> str | None:
    """The call markup the model's family writes (shipped profiles), read first when a reply
    could be read two ways."""
    fact = shipped_profiles().match(model).markup
    return str(fact.value) if fact is not None else None


__all__ += ["emulation_request", "strip_request"]  # (where they were first)
