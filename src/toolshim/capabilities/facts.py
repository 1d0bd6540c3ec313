"""Capability facts: what is known about a model, where it was learned, and which fact wins."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from toolshim.errors import ConfigError
from toolshim.types import Strategy

__all__ = [
    "FACT_NAMES",
    "PREFERENCE_FACTS",
    "STRATEGIES",
    "SUPPORT_FACTS",
    "Fact",
    "Source",
    "Support",
    "coerce_value",
    "merge",
    "strongest",
]


class Source(StrEnum):
    """Where a fact came from, strongest first: the order of the members *is* the precedence
    (see :attr:`Source.rank`), so a new source is one line in its place.

    ``user`` (a person said so) > ``probe`` (a test request) > ``runtime_error`` (the upstream
    rejected tools) > ``eval`` (``toolshim eval --apply``: the configuration that scored best
    on this model) > ``upstream`` (the server's own metadata, e.g. Ollama ``/api/show``) >
    ``profile`` (the shipped table of model families). Stores keep the source's name, never
    its rank, so adding a source needs no migration.

    Why ``eval`` sits there: an eval sets only *how to emulate* (``dialect``, ``strategy``,
    ``constrain``), measured on hundreds of cases through toolshim on this very model, so it
    beats what a server declares or a family table guesses (``upstream``, ``profile``: the
    embedded server's hand-set ``dialect``, the size rule's ``compact``). ``probe`` and
    ``runtime_error`` set only ``native_tools`` (*whether* tools work natively), which an
    eval never sets; placed above ``eval`` they keep winning should the two ever meet on one
    fact, because a direct test or an upstream's refusal is harder evidence about that one
    question than an aggregate score. A person (``user``) overrides everything.
    """

    USER = "user"
    PROBE = "probe"
    RUNTIME_ERROR = "runtime_error"
    EVAL = "eval"
    UPSTREAM = "upstream"
    PROFILE = "profile"

    @property
    def rank(self) -> int:
        """Higher is stronger: the weakest source is 1, the strongest ``len(Source)``."""
        return _RANK[self]

    @classmethod
    def parse(cls, text: str) -> Source:
        """The source named ``text``; ConfigError listing the known ones otherwise."""
        try:
            return cls(text.strip().lower().replace("-", "_"))
        except ValueError:
            known = ", ".join(s.value for s in cls)
            raise ConfigError(f"unknown source {text!r}; known: {known}", param="source") from None


_RANK = {source: len(Source) - index for index, source in enumerate(Source)}


class Support(StrEnum):
    """A tri-state capability."""

    YES = "yes"
    NO = "no"
    UNKNOWN = "unknown"

    @classmethod
    def of(cls, value: Any) -> Support:
        if isinstance(value, Support):
            return value
        if value is True:
            return cls.YES
        if value is False:
            return cls.NO
        text = str(value).strip().lower()
        if text in ("yes", "y", "true", "1", "on", "supported"):
            return cls.YES
        if text in ("no", "n", "false", "0", "off", "unsupported"):
            return cls.NO
        return cls.UNKNOWN


FACT_NAMES = {
    "native_tools": "native tool calling (yes / no / unknown)",
    "parallel_calls": "several tool calls in one reply (yes / no / unknown)",
    "structured_output": "response_format with a JSON Schema (yes / no / unknown)",
    "tool_choice": "tool_choice honoured (yes / no / unknown)",
    "dialect": "preferred emulation dialect",
    "strategy": "preferred emulation strategy (single / decision)",
    "constrain": "hold emulated replies to a JSON Schema (yes / no / unknown: as structured_output)",
    "context_window": "context window in tokens",
    "markup": "the family's own call markup, read first where a reply could be read two ways",
    "prefill": "an assistant message that ends a request is continued, not answered (yes / no / unknown)",
    "doubt": "a call the model opened unsure of is read as no call; needs logprobs from the upstream (yes / no / unknown; off unless set)",
}

SUPPORT_FACTS = frozenset(
    {
        "native_tools",
        "parallel_calls",
        "structured_output",
        "tool_choice",
        "constrain",
        "prefill",
        "doubt",
    }
)
"""Facts whose value is a :class:`Support` (stored as ``"yes"``/``"no"``/``"unknown"``)."""

PREFERENCE_FACTS = ("dialect", "strategy", "constrain", "doubt")
"""How to emulate for a model: what ``toolshim eval --apply`` stores (source ``eval``)."""

STRATEGIES = tuple(s.value for s in Strategy)
"""The values of fact ``strategy`` (:class:`toolshim.types.Strategy`)."""


def coerce_value(name: str, value: Any) -> Any:
    """``value`` in the stored form of fact ``name``; ConfigError for an unknown fact or value."""
    if name not in FACT_NAMES:
        known = ", ".join(FACT_NAMES)
        raise ConfigError(f"unknown fact {name!r}; known facts: {known}", param="fact")
    if name in SUPPORT_FACTS:
        support = Support.of(value)
        if support is Support.UNKNOWN and str(value).strip().lower() not in ("unknown", "?", ""):
            raise ConfigError(
                f"{name} must be yes, no or unknown, not {value!r}", param=name.replace("_", "-")
            )
        return support.value
    if name == "context_window":
        try:
            tokens = int(value)
        except (TypeError, ValueError):
            raise ConfigError(
                f"context_window must be a whole number of tokens, not {value!r}",
                param="context-window",
            ) from None
        if tokens <= 0:
            raise ConfigError(
                f"context_window must be positive, not {tokens}", param="context-window"
            )
        return tokens
    text = str(value).strip().lower()
    if not text:
        raise ConfigError(f"{name} must not be empty", param=name)
    if name == "strategy" and text not in STRATEGIES:
        raise ConfigError(
            f"strategy must be one of {', '.join(STRATEGIES)}, not {value!r}", param="strategy"
        )
    return text


@dataclass(frozen=True, slots=True)
class Fact:
    """One fact about one model, with its source and the time it was learned."""

    name: str
    value: Any
    source: Source
    updated_at: float = field(default_factory=time.time)
    detail: str = ""

    @property
    def support(self) -> Support:
        return Support.of(self.value)


def merge(current: Fact | None, new: Fact) -> Fact:
    """The fact that wins when ``new`` arrives: a weaker source never overwrites a stronger one.

    Between equal sources the newer fact wins (a person can change their mind; a new probe
    replaces an old one). This is the one place where precedence is decided.
    """
    if current is None:
        return new
    if new.source.rank > current.source.rank:
        return new
    if new.source.rank < current.source.rank:
        return current
    return new if new.updated_at >= current.updated_at else current


def strongest(facts: Iterable[Fact]) -> Fact | None:
    """The fact that stands among ``facts`` (folded with :func:`merge`), or None if empty."""
    winner: Fact | None = None
    for fact in facts:
        winner = merge(winner, fact)
    return winner
