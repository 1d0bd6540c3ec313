"""What every suite's runner shares: the configurations a case runs through, the records, the
runner that sends requests and counts them (BFCL's single-turn runner is :mod:`.bfcl_runner`).

A configuration is one of:

* ``native``: the baseline without toolshim — the case's tools sent straight to the upstream
  (one plain HTTP request, no engine), only ``message.tool_calls`` read, as BFCL's own OpenAI
  handler reads them;
* ``bfcl-prompt``: the baseline of BFCL's prompt mode — BFCL's system prompt, no ``tools``,
  the reply decoded by BFCL's own prompt-mode decoder;
* ``MODE[:DIALECT[:STRATEGY]][+FLAG…]``: toolshim's engine in that mode (``force:pythonic``,
  ``auto``, ``force:json:decision``), each with its own in-memory capability registry over
  the shipped model profiles (what a new user's ``auto`` knows about a model name), so no
  configuration learns from another and the user's store is left alone. Flags:
  ``+constrain`` asks for constrained emulation (a ``json_schema`` response format that
  admits only the offered tools); ``+served`` seeds the registry with what the upstream
  measured about itself (the embedded model's facts, as ``toolshim serve`` records them);
  ``+doubt`` sets the registry fact ``doubt`` (a call the model opened unsure of is answered
  without tools, :mod:`toolshim.engine.confidence`), as ``toolshim models set M --doubt yes``
  does, so that its effect is measured on the model before anyone turns it on.

Cases are visited round-robin across categories and each case runs through every
configuration before the next one starts, so a run stopped early still compares every
configuration on the same cases.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from itertools import zip_longest
from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    Generic,
    Literal,
    Protocol,
    Self,
    TypedDict,
    TypeVar,
)

from toolshim.capabilities.facts import Source
from toolshim.capabilities.registry import ANY_UPSTREAM, Registry
from toolshim.dialects import get_dialect
from toolshim.engine import Engine
from toolshim.engine.options import parse_mode, parse_strategy
from toolshim.errors import ConfigError, ToolshimError
from toolshim.evaluation.bfcl_score import Decoder
from toolshim.types import ChatRequest, Completion, StreamChunk
from toolshim.upstreams.base import Upstream, WrappedUpstream
from toolshim.upstreams.chat_completions import complete_chat_body

if TYPE_CHECKING:
    pass

__all__ = [
    "BASELINES",
    "FLAGS",
    "CaseRecord",
    "CountingUpstream",
    "EvalConfig",
    "SuiteSettings",
    "Tally",
    "config_registry",
    "engines_for",
    "interleave",
    "message_dict",
    "run_jobs",
]

BASELINES: tuple[str, ...] = ("native", "bfcl-prompt")
FLAGS: tuple[str, ...] = ("constrain", "served", "doubt")


@dataclass(frozen=True)
class EvalConfig:
    """One way of asking the model: a toolshim setting or a baseline."""

    kind: Literal["toolshim", "native", "bfcl-prompt"]
    mode: str | None = None
    dialect: str | None = None
    strategy: str | None = None
    constrain: bool = False
    served: bool = False
    doubt: bool = False

    @classmethod
    def parse(cls, spec: str) -> EvalConfig:
        """``native``, ``bfcl-prompt``, or ``MODE[:DIALECT[:STRATEGY]][+FLAG…]`` (flags:
        :data:`FLAGS`; empty parts: the default)."""
        text = spec.strip().lower()
        if text in BASELINES:
            return cls(kind=text)  # type: ignore[arg-type]
        base, *flags = text.split("+")
        parts = base.split(":")
        unknown = [f for f in flags if f not in FLAGS]
        if len(parts) > 3 or not parts[0] or unknown:
            raise ConfigError(
                f"bad configuration {spec!r}; use native, bfcl-prompt or "
                "MODE[:DIALECT[:STRATEGY]][+constrain][+served][+doubt], e.g. force:pythonic, "
                "auto::decision, force:json+constrain or auto+served+doubt",
                param="config",
            )
        parts += [""] * (3 - len(parts))
        return cls.toolshim(
            parts[0],
            parts[1] or None,
            parts[2] or None,
            constrain="constrain" in flags,
            served="served" in flags,
            doubt="doubt" in flags,
        )

    @classmethod
    def toolshim(
        cls,
        mode: str,
        dialect: str | None = None,
        strategy: str | None = None,
        *,
        constrain: bool = False,
        served: bool = False,
        doubt: bool = False,
    ) -> EvalConfig:
        """A toolshim configuration, its names checked (ConfigError lists what exists)."""
        mode_value = parse_mode(mode).value
        strategy_value = parse_strategy(strategy).value if strategy else None
        if strategy_value == "single":
            strategy_value = None
        dialect_value = get_dialect(dialect).name if dialect else None
        return cls("toolshim", mode_value, dialect_value, strategy_value, constrain, served, doubt)

    @property
    def label(self) -> str:
        """A short unique name: ``native``, ``force:json``, ``auto::decision``,
        ``auto+served+doubt``."""
        if self.kind != "toolshim":
            return self.kind
        parts = [self.mode or "auto", self.dialect or "", self.strategy or ""]
        while parts and not parts[-1]:
            parts.pop()
        flags = [f for f in FLAGS if getattr(self, f)]
        return ":".join(parts) + "".join(f"+{f}" for f in flags)

    @property
    def decoder(self) -> Decoder:
        return "prompt" if self.kind == "bfcl-prompt" else "fc"


class Record:
    """A row of a suite's JSON report (a dataclass), read back with unknown keys left out."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass
class CaseRecord(Record):
    """The outcome of one case under one configuration (a row of the JSON report)."""

    case_id: str
    category: str
    config: str
    valid: bool
    well_formed: bool | None
    called: bool
    llm_calls: int
    latency_s: float
    raw_output: str | None = None
    """The text of the model's final reply (None when it had none)."""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    """The reply's ``tool_calls`` in OpenAI shape."""
    parsed_calls: list[Any] | None = None
    """The calls as BFCL's decoder read them, ``[{name: {arg: value}}]`` (None: undecodable)."""
    error: str | None = None
    """Why BFCL's checker rejected the output, or the failure of the request itself."""
    error_type: str | None = None
    warnings: list[str] = field(default_factory=list)
    prompt_tokens: int | None = None
    """Prompt tokens over every LLM call of the case, as the upstream counted them."""
    completion_tokens: int | None = None


class CountingUpstream(WrappedUpstream):
    """Wraps an upstream and counts the chat requests sent through it."""

    def __init__(self, inner: Upstream) -> None:
        super().__init__(inner)
        self.requests = 0

    async def complete(
        self, request: ChatRequest, *, headers: Mapping[str, str] | None = None
    ) -> Completion:
        self.requests += 1
        return await self.inner.complete(request, headers=headers)

    async def stream(
        self, request: ChatRequest, *, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[StreamChunk]:
        self.requests += 1
        async for chunk in self.inner.stream(request, headers=headers):
            yield chunk

    async def aclose(self) -> None:
        """Does nothing: the runner's owner closes the real upstream once, after every config."""


J = TypeVar("J")
R = TypeVar("R")


async def run_jobs(
    jobs: Sequence[tuple[J, EvalConfig]],
    run: Callable[[J, EvalConfig], Awaitable[R]],
    on_record: Callable[[R], None] | None,
    parallel: int,
) -> list[R]:
    """``run`` on every ``(item, configuration)`` job, ``parallel`` at a time, calling
    ``on_record`` after each; the records come back in the jobs' order. One at a time, a
    Ctrl-C stops between two runs."""
    if parallel <= 1:
        records: list[R] = []
        for item, config in jobs:
            record = await run(item, config)
            records.append(record)
            if on_record is not None:
                on_record(record)
        return records
    gate = asyncio.Semaphore(parallel)

    async def one(item: J, config: EvalConfig) -> R:
        async with gate:
            record = await run(item, config)
        if on_record is not None:
            on_record(record)
        return record

    return list(await asyncio.gather(*(one(i, c) for i, c in jobs)))


def engines_for(
    configs: Iterable[EvalConfig],
    upstream: Upstream,
    model: str,
    max_reasks: int,
    served_facts: Callable[[Registry], object] | None,
) -> dict[EvalConfig, Engine]:
    """One engine per toolshim configuration, each with its own in-memory registry (seeded as
    :func:`config_registry` says), so that no configuration learns from another and the
    user's store is left alone."""
    engines: dict[EvalConfig, Engine] = {}
    for c in configs:
        if c.kind != "toolshim":
            continue
        engines[c] = Engine(
            upstream,
            mode=c.mode or "auto",
            dialect=c.dialect,
            strategy=c.strategy,
            max_reasks=max_reasks,
            registry=config_registry(c, served_facts, model),
            constrain=True if c.constrain else None,
        )
    return engines


def config_registry(
    config: EvalConfig, served_facts: Callable[[Registry], object] | None, model: str
) -> Registry:
    """A private in-memory registry over the shipped profiles for ``config``, seeded with the
    upstream's own facts for ``+served`` (ConfigError when there are none), and with fact
    ``doubt`` about ``model`` at every upstream for ``+doubt`` (source ``user``, as ``toolshim
    models set`` stores it)."""
    registry = Registry.open(":memory:")
    if config.served:
        if served_facts is None:
            raise ConfigError(
                f"configuration {config.label!r} needs the upstream's own facts, which only "
                "the embedded model provides (run without --upstream)",
                param="config",
            )
        served_facts(registry)
    if config.doubt:
        registry.learn(
            ANY_UPSTREAM, model, "doubt", "yes", Source.USER, detail="eval configuration +doubt"
        )
    return registry


class _Categorized(Protocol):
    @property
    def category(self) -> str: ...


C = TypeVar("C", bound=_Categorized)


def interleave(cases: Sequence[C]) -> list[C]:
    """Cases round-robin across categories: a run cut short covers every category alike."""
    by_category: dict[str, list[C]] = {}
    for case in cases:
        by_category.setdefault(case.category, []).append(case)
    return [c for group in zip_longest(*by_category.values()) for c in group if c is not None]


class Tally(Protocol):
    """What a run counts of its requests (see :meth:`SuiteRunner.ask`)."""

    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    warnings: list[str]


class _Identified(Protocol):
    @property
    def id(self) -> str: ...


Item = TypeVar("Item", bound=_Identified)


class SuiteSettings(TypedDict, total=False):
    """The keyword settings every suite's runner takes besides its own (each optional)."""

    temperature: float
    """Sent with every request (default 0)."""
    max_reasks: int
    """The engines' re-asks after an invalid call (default 2)."""
    served_facts: Callable[[Registry], object] | None
    """Records the upstream's own facts in a registry (for ``+served`` configurations), e.g.
    :meth:`toolshim.local.EmbeddedServer.record_capabilities`."""


class SuiteRunner(Generic[Item, R]):
    """What every suite's runner shares: one counted upstream, one model, the configurations
    (each once) with their engines, the :class:`SuiteSettings`, and the runs of items (cases,
    tasks) under each."""

    def __init__(
        self, upstream: Upstream, model: str, configs: Iterable[EvalConfig], settings: SuiteSettings
    ) -> None:
        unknown = settings.keys() - SuiteSettings.__optional_keys__
        if unknown:
            raise TypeError(f"{type(self).__name__}() got unexpected settings {sorted(unknown)}")
        self.temperature = settings.get("temperature", 0.0)
        max_reasks = settings.get("max_reasks", 2)
        served_facts = settings.get("served_facts")
        self.upstream = CountingUpstream(upstream)
        self.model = model
        self.configs = list(dict.fromkeys(configs))
        if not self.configs:
            raise ConfigError("no configuration to evaluate", param="config")
        self.engines = engines_for(self.configs, self.upstream, model, max_reasks, served_facts)

    async def run_one(self, item: Item, config: EvalConfig) -> R:
        """One item under one configuration; a failure becomes a failed record."""
        raise NotImplementedError

    async def ask(
        self, config: EvalConfig, body: dict[str, Any], tally: Tally, *, null_content: bool = True
    ) -> tuple[dict[str, Any], str | None]:
        """``body`` sent straight to the upstream (a baseline) or through ``config``'s engine,
        its requests, tokens and the engine's warnings counted into ``tally``: the reply's
        message as a chat message and its finish reason. An engine's reply without text has
        ``content`` None, or "" when not ``null_content``."""
        if config.kind != "toolshim":
            tally.llm_calls += 1
            reply = await complete_chat_body(self.upstream, body)
            usage = reply.get("usage") or {}
            tally.prompt_tokens += int(usage.get("prompt_tokens") or 0)
            tally.completion_tokens += int(usage.get("completion_tokens") or 0)
            choice = (reply.get("choices") or [{}])[0]
            return dict(choice.get("message") or {}), choice.get("finish_reason")
        try:
            completion = await self.engines[config].acomplete(body)
        except ToolshimError as exc:
            if exc.meta is not None:
                tally.llm_calls += exc.meta.llm_calls
            raise
        if completion.meta is not None:
            tally.llm_calls += completion.meta.llm_calls
            tally.warnings.extend(w for w in completion.meta.warnings if w not in tally.warnings)
        if completion.usage is not None:
            tally.prompt_tokens += completion.usage.prompt_tokens or 0
            tally.completion_tokens += completion.usage.completion_tokens or 0
        message = message_dict(completion)
        if not null_content:
            message["content"] = completion.message.text
        return message, completion.finish_reason

    def ordered(self, items: Sequence[Item]) -> Sequence[Item]:
        """The order the items run in: as given, or :func:`interleave`'d."""
        return items

    async def run(
        self,
        items: Sequence[Item],
        *,
        skip: Iterable[tuple[str, str]] = (),
        on_record: Callable[[R], None] | None = None,
        parallel: int = 1,
    ) -> list[R]:
        """Every item (:meth:`ordered`) under every configuration but ``skip``'s ``(item id,
        config label)`` pairs, ``parallel`` at a time, calling ``on_record`` after each; the
        records come back in that order whatever order they finished in."""
        done = set(skip)
        jobs = [
            (i, c) for i in self.ordered(items) for c in self.configs if (i.id, c.label) not in done
        ]
        return await run_jobs(jobs, self.run_one, on_record, parallel)

    def pending(self, items: Sequence[Item], skip: Iterable[tuple[str, str]] = ()) -> int:
        """How many (item, configuration) runs are left once ``skip``'s are done."""
        done = set(skip)
        return sum(1 for i in items for c in self.configs if (i.id, c.label) not in done)

    async def aclose(self) -> None:
        for engine in self.engines.values():
            await engine.aclose()


def message_dict(completion: Completion) -> dict[str, Any]:
    """A completion's first message as the chat completions message dict a report keeps."""
    message = completion.message
    return {
        "content": message.text if message.content is not None else None,
        "tool_calls": [
            {
                "id": call.id,
                "type": call.type,
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in message.tool_calls
        ],
    }
