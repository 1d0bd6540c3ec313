"""What the chat tells the user about a model's tools: native, emulated or disabled, and why.

The answer combines the mode, the registry's ``native_tools`` fact (with its source and date)
and what was decided for this session only (an unanswered question, a declined "remember"),
exactly as the engine will route the next request.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from toolshim.capabilities.facts import Fact, Source, Support
from toolshim.capabilities.registry import Registry
from toolshim.types import Mode

__all__ = ["ToolStatus", "describe_fact", "effective_mode", "tool_status"]

StatusKind = Literal["native", "emulated", "disabled", "native first"]


@dataclass(frozen=True, slots=True)
class ToolStatus:
    """How the next request with tools is served for one model, and why."""

    kind: StatusKind
    dialect: str
    why: str
    support: Support
    source: Source | None = None

    @property
    def label(self) -> str:
        """``native``, ``emulated (json)``, ``disabled`` or ``native first``."""
        return f"emulated ({self.dialect})" if self.kind == "emulated" else self.kind

    @property
    def headline(self) -> str:
        """``Tools: emulated (json)``: what seed 004 shows after a swap, improved."""
        return f"Tools: {self.label}"


def _day(stamp: float) -> str:
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%d")


def _short(text: str, limit: int = 90) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def describe_fact(fact: Fact, family: str | None = None) -> str:
    """Where a ``native_tools`` fact came from, as a person says it."""
    day = _day(fact.updated_at)
    if fact.source is Source.PROFILE:
        return f"from profile {family}" if family else "from the shipped profiles"
    if fact.source is Source.USER:
        return f"set by you on {day}"
    if fact.source is Source.PROBE:
        detail = f": {_short(fact.detail)}" if fact.detail else ""
        return f"auto-detected on {day}{detail}"
    if fact.source is Source.RUNTIME_ERROR:
        return f"learned from an upstream error on {day}"
    detail = f" ({_short(fact.detail, 60)})" if fact.detail else ""
    return f"reported by the upstream on {day}{detail}"


def effective_mode(mode: Mode, session_emulated: bool) -> Mode:
    """The mode a request is sent with: a session-only "no native tools" forces emulation."""
    if session_emulated and mode in (Mode.AUTO, Mode.FALLBACK):
        return Mode.FORCE
    return mode


def tool_status(
    registry: Registry,
    upstream: str,
    model: str,
    *,
    mode: Mode,
    dialect: str | None,
    has_tools: bool,
    session_note: str | None = None,
) -> ToolStatus:
    """The status of ``model``'s tools under ``mode``; ``session_note`` is why tools are emulated
    for this session only (None when nothing was decided for the session)."""
    fact = registry.fact(upstream, model, "native_tools")
    support = fact.support if fact else Support.UNKNOWN
    source = fact.source if fact else None
    chosen = dialect or registry.preferred_dialect(upstream, model) or "json"
    known = describe_fact(fact, registry.explain(upstream, model).family) if fact else ""

    def status(kind: StatusKind, why: str) -> ToolStatus:
        return ToolStatus(kind, chosen, why, support, source)

    if not has_tools:
        return status("disabled", "no tools are loaded (--no-builtin-tools and no --tools)")
    if mode is Mode.FORCE:
        return status("emulated", "mode force always describes the tools in the prompt")
    if mode is Mode.OFF:
        if support is Support.NO:
            return status(
                "native", f"mode off sends tools natively although the model has none ({known})"
            )
        return status("native", "mode off always sends tools natively")
    if mode is Mode.STRIP:
        if support is Support.YES:
            return status("native", known)
        reason = known or "nothing is known about its tool calling"
        return status("disabled", f"mode strip drops tools for a model without them ({reason})")
    if session_note is not None:
        return status("emulated", session_note)
    if support is Support.YES:
        if mode is Mode.FALLBACK:
            return status("native", f"{known}; emulated when no valid call comes back")
        return status("native", known)
    if support is Support.NO:
        return status("emulated", f"the model has no native tool calling ({known})")
    if mode is Mode.FALLBACK:
        return status(
            "native first", "tool support is unknown: tried natively, emulated if that fails"
        )
    return status(
        "native first",
        "tool support is unknown: tried natively once; if the upstream rejects tools, "
        "toolshim learns it and emulates",
    )
