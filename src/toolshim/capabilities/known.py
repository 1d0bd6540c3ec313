"""One model's effective facts, read once, and the choices made from them (dialect, strategy, constraint, supports).

:meth:`Registry.model_facts <toolshim.capabilities.registry.Registry.model_facts>` reads the merged facts
about a model at an upstream once; the engine takes every choice a turn needs from that one
reading instead of a cache look-up per choice. The registry's own methods
(:meth:`~toolshim.capabilities.registry.Registry.preferred_dialect` …) are these.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from toolshim.capabilities.facts import STRATEGIES, Fact, Support
from toolshim.types import Strategy

__all__ = ["KnownFacts", "lacked_dialect"]

log = logging.getLogger("toolshim.capabilities")


@dataclass(frozen=True, slots=True)
class KnownFacts:
    """The effective facts about ``model`` (the strongest of each name), as read at one time."""

    model: str
    facts: Mapping[str, Fact]

    def fact(self, name: str) -> Fact | None:
        return self.facts.get(name)

    def native_tools(self) -> Support:
        fact = self.facts.get("native_tools")
        return fact.support if fact else Support.UNKNOWN

    def supports(self, name: str) -> bool:
        """Whether support fact ``name`` is known to be yes."""
        fact = self.facts.get(name)
        return fact is not None and fact.support is Support.YES

    def preferred_dialect(self) -> str | None:
        """The dialect to emulate with, if one is known *and* this toolshim has it."""
        fact = self.facts.get("dialect")
        if not fact or not fact.value:
            return None
        name = str(fact.value)
        if lacked_dialect(name) is not None:
            log.debug("preferred dialect %r for %s is not available; using json", name, self.model)
            return None
        return name

    def preferred_strategy(self) -> Strategy:
        """The emulation strategy for a request that names none: fact ``strategy`` (an
        eval's pick, a person's setting), else ``single``."""
        fact = self.facts.get("strategy")
        if fact is None or fact.value not in STRATEGIES:
            return Strategy.SINGLE
        return Strategy(fact.value)

    def constrained(self) -> bool:
        """Whether to hold emulated replies to a JSON Schema when the request does not say:
        fact ``constrain`` when it is yes or no (an eval's pick, a person's setting), else
        whether the upstream honours ``response_format`` (fact ``structured_output``)."""
        fact = self.facts.get("constrain")
        if fact is not None and fact.support is not Support.UNKNOWN:
            return fact.support is Support.YES
        return self.supports("structured_output")


def lacked_dialect(name: object) -> str | None:
    """None when this toolshim has a dialect called ``name``; else why a preference for it
    goes unused ("dialect 'x', which this toolshim lacks (available: compact, …)"). The one
    check behind :meth:`KnownFacts.preferred_dialect` and the facts the embedded model stores."""
    from toolshim.dialects import available_dialects

    available = available_dialects()
    if name in available:
        return None
    return f"dialect {name!r}, which this toolshim lacks (available: {', '.join(available)})"
