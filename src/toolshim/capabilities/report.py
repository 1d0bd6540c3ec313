"""What toolshim knows about one model and why: each fact's winner, what it overrides, the treatment."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from toolshim.capabilities.facts import Fact, Support

__all__ = ["ANY_UPSTREAM", "Evidence", "FactReport", "ModelReport", "fact_dict"]

ANY_UPSTREAM = "*"
"""The upstream key of facts that hold at every upstream."""


def fact_dict(fact: Fact) -> dict[str, Any]:
    """A fact as JSON: value, source, when (unix time and ISO 8601 UTC) and why."""
    learned = datetime.fromtimestamp(fact.updated_at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "value": fact.value,
        "source": fact.source.value,
        "learned_at": fact.updated_at,
        "learned": learned,
        "detail": fact.detail,
    }


@dataclass(frozen=True, slots=True)
class Evidence:
    """One fact and where it applies: ``this upstream``, ``any upstream`` or ``shipped profile``."""

    fact: Fact
    scope: str


@dataclass(frozen=True, slots=True)
class FactReport:
    """Why one fact has the value it has: the winner and what it overrides."""

    name: str
    winner: Evidence
    overridden: tuple[Evidence, ...]


@dataclass(frozen=True, slots=True)
class ModelReport:
    """Everything toolshim knows about a model at an upstream, and what it does with it."""

    upstream: str
    model: str
    normalized: str
    family: str | None
    facts: Mapping[str, FactReport]
    dialect: str
    """The dialect emulation uses for this model (the preferred one if available, else json)."""

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON (what ``toolshim models show --json`` prints)."""

        def evidence(item: Evidence) -> dict[str, Any]:
            return {**fact_dict(item.fact), "scope": item.scope}

        return {
            "model": self.model,
            "upstream": None if self.upstream == ANY_UPSTREAM else self.upstream,
            "normalized": self.normalized,
            "family": self.family,
            "dialect": self.dialect,
            "facts": {
                name: {
                    **evidence(r.winner),
                    "overridden": [evidence(o) for o in r.overridden],
                }
                for name, r in self.facts.items()
            },
            "treatment": self.treatment(),
        }

    @property
    def native_tools(self) -> Support:
        report = self.facts.get("native_tools")
        return report.winner.fact.support if report else Support.UNKNOWN

    def treatment(self) -> list[str]:
        """One line per mode family: how a request with tools is served, and why."""
        report = self.facts.get("native_tools")
        why = (
            f"native_tools={report.winner.fact.value} from {report.winner.fact.source.value}"
            if report
            else "nothing is known about native tools"
        )
        support = self.native_tools
        if support is Support.YES:
            return [
                f"auto: tools are sent natively ({why}).",
                "strip: tools are sent natively.",
                f"fallback: natively first, emulated with {self.dialect} if no valid call comes back.",
            ]
        if support is Support.NO:
            return [
                f"auto: tools are emulated in the prompt with the {self.dialect} dialect ({why}).",
                "strip: tools are dropped and the system prompt says that no tools are available.",
                "force: always emulated; off: sent natively anyway (the upstream will refuse).",
            ]
        return [
            f"auto: tools are sent natively once ({why}); if the upstream rejects them the "
            f"rejection is learned (runtime_error) and later requests are emulated with {self.dialect}.",
            "strip: tools are dropped until a source says native_tools=yes.",
            "Run `toolshim models probe` to find out, or `toolshim models set --tools yes|no`.",
        ]
