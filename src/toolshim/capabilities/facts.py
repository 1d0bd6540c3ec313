"""Capability facts: what is known about a model, where it was learned, and which fact wins."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

__all__ = ["FACT_NAMES", "Fact", "Source", "Support", "merge"]


class Source(StrEnum):
    """Where a fact came from. Stronger sources win (see :data:`Source.rank`)."""

    USER = "user"
    PROBE = "probe"
    RUNTIME_ERROR = "runtime_error"
    UPSTREAM = "upstream"
    PROFILE = "profile"

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {
    Source.USER: 5,
    Source.PROBE: 4,
    Source.RUNTIME_ERROR: 3,
    Source.UPSTREAM: 2,
    Source.PROFILE: 1,
}


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
    "context_window": "context window in tokens",
}


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
    replaces an old one).
    """
    if current is None:
        return new
    if new.source.rank > current.source.rank:
        return new
    if new.source.rank < current.source.rank:
        return current
    return new if new.updated_at >= current.updated_at else current
