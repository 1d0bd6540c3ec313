"""The capability registry: the effective facts about a model, from its store, its cache and the profiles.

Facts are kept per (upstream, model) and per source. Three layers are merged with
:func:`~toolshim.capabilities.facts.merge` (a weaker source never wins):

* the shipped profiles of model families (source ``profile``),
* facts stored for every upstream (upstream ``"*"``, e.g. ``toolshim models set M`` without
  ``--upstream``),
* facts stored for this upstream (discovery, probes, runtime errors, ``models set``).

The registry talks to its store only through :class:`~toolshim.capabilities.store.FactStore`,
and reads on the proxy's hot path come from a cache (:mod:`toolshim.capabilities.mirror`):
with a shared store (PostgreSQL, Redis) a request never waits for the store, and never fails
because it is away. What is learned while the store is away (or read-only) is kept in memory
and acted on; it is written back, oldest first, when the store returns.

Model names are compared without a trailing ``:latest`` (Ollama's default tag).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from toolshim.capabilities.facts import (
    FACT_NAMES,
    Fact,
    Source,
    Support,
    coerce_value,
    merge,
    strongest,
)
from toolshim.capabilities.known import KnownFacts
from toolshim.capabilities.mirror import StoreMirror
from toolshim.capabilities.report import (
    ANY_UPSTREAM,
    Evidence,
    FactReport,
    ModelReport,
    fact_dict,
)
from toolshim.capabilities.store import FactStore, standing_entries
from toolshim.capabilities.stores import open_store
from toolshim.capabilities.sync import Forget, Put, Seen
from toolshim.errors import StoreError
from toolshim.types import Strategy

__all__ = [
    "ANY_UPSTREAM",
    "Evidence",
    "FactReport",
    "ModelReport",
    "ProfileLookup",
    "Registry",
    "fact_dict",
    "model_key",
]

log = logging.getLogger("toolshim.capabilities")

ProfileLookup = Callable[[str], Mapping[str, Fact]]
"""Shipped facts for a model name (lowest precedence); see :mod:`toolshim.capabilities.profiles`."""


def model_key(model: str) -> str:
    """How a model is keyed in the store: stripped, without Ollama's ``:latest`` tag."""
    return model.strip().removesuffix(":latest")


class Registry(StoreMirror):
    """What toolshim knows about each (upstream, model), merged by source.

    ``store`` persists what is learned (None: a private in-memory store for this process).
    ``profiles`` supplies the shipped facts of model families. ``cache_seconds`` is how long a
    model's facts read from a store that cannot notify (SQLite) are trusted before being
    re-read; a shared store's notifications keep the cache current instead.
    """

    def __init__(
        self,
        store: FactStore | None = None,
        *,
        profiles: ProfileLookup | None = None,
        cache_seconds: float = 1.0,
    ) -> None:
        if store is None:
            from toolshim.capabilities.stores.sqlite import SQLiteStore

            store = SQLiteStore(":memory:")
        self.profiles = profiles
        self.problem: str | None = None
        """Why what is learned is not saved (the store asked for could not be used)."""
        super().__init__(store, cache_seconds=cache_seconds)

    def __repr__(self) -> str:
        return f"Registry({self.location!r})"

    @classmethod
    def open(
        cls, where: str | os.PathLike[str] | None = None, *, profiles: bool = True
    ) -> Registry:
        """The registry toolshim uses: the store ``where`` names (a SQLite path,
        ``sqlite:///…``, ``postgresql://…``, ``redis://…``; None: the default SQLite file)
        over the shipped model profiles.

        A SQLite file that cannot be used (busy, newer schema, unreadable) is reported in
        :attr:`notices` and facts are kept in memory: opening never fails for a store that
        is away. A URL toolshim cannot use (unknown scheme, client library missing) is a
        ConfigError.
        """
        lookup: ProfileLookup | None = None
        if profiles:
            from toolshim.capabilities.profiles import shipped_profiles

            lookup = shipped_profiles().lookup
        try:
            store, problem = open_store(where), None
        except StoreError as exc:
            log.warning("capability store unusable, keeping facts in memory only: %s", exc)
            store, problem = None, exc.message
        registry = cls(store, profiles=lookup)
        registry.problem = problem
        return registry

    # -- what to tell the user --------------------------------------------------------------

    @property
    def location(self) -> str:
        """Where facts are kept, fit to show (no credentials)."""
        if self.problem is not None or self._store.location == ":memory:":
            return "memory (not saved)"
        return self._store.location

    @property
    def notices(self) -> tuple[str, ...]:
        """What the person running toolshim should be told about the store (each a sentence)."""
        found = list(self._store.notices)
        if self.problem is not None:
            found.append(f"{self.problem}; what is learned now is not saved")
        return tuple(found)

    def seen(self, upstream: str | None = None) -> list[tuple[str, str, float]]:
        """(upstream, model, last_seen) for the models ``upstream`` (or any) listed."""
        try:
            return self._store.seen(upstream)
        except StoreError as exc:
            self._went_down(exc)
            return []

    # -- reading ----------------------------------------------------------------------------

    def evidence(self, upstream: str, model: str) -> dict[str, list[Evidence]]:
        """Every fact known about ``model`` at ``upstream``, by name, strongest first."""
        key = model_key(model)
        found: list[Evidence] = []
        if self.profiles is not None:
            found += [Evidence(f, "shipped profile") for f in self.profiles(model).values()]
        for scope, fact in self._stored(upstream, key):
            found.append(
                Evidence(fact, "any upstream" if scope == ANY_UPSTREAM else "this upstream")
            )
        out: dict[str, list[Evidence]] = {}
        for item in found:
            out.setdefault(item.fact.name, []).append(item)
        for items in out.values():
            items.sort(key=lambda e: (e.fact.source.rank, e.fact.updated_at), reverse=True)
        return out

    def facts(self, upstream: str, model: str) -> dict[str, Fact]:
        """Every effective fact about ``model``: the strongest of each name."""
        key = (upstream, model_key(model))
        cached = self._merged.get(key)
        now = time.monotonic()
        if cached and (self._mirrored or now - cached[0] < self._ttl):
            return cached[1]
        merged: dict[str, Fact] = dict(self.profiles(model)) if self.profiles else {}
        for _, fact in self._stored(upstream, key[1], now):
            merged[fact.name] = merge(merged.get(fact.name), fact)
        self._merged[key] = (now, merged)
        return merged

    def model_facts(self, upstream: str, model: str) -> KnownFacts:
        """The effective facts about ``model``, read once (what a turn decides from)."""
        return KnownFacts(model, self.facts(upstream, model))

    def fact(self, upstream: str, model: str, name: str) -> Fact | None:
        return self.facts(upstream, model).get(name)

    def native_tools(self, upstream: str, model: str) -> Support:
        return self.model_facts(upstream, model).native_tools()

    def supports(self, upstream: str, model: str, name: str) -> bool:
        """Whether support fact ``name`` is known to be yes."""
        return self.model_facts(upstream, model).supports(name)

    def preferred_dialect(self, upstream: str, model: str) -> str | None:
        """The dialect to emulate with, if one is known *and* this toolshim has it."""
        return self.model_facts(upstream, model).preferred_dialect()

    def preferred_strategy(self, upstream: str, model: str) -> Strategy:
        """The emulation strategy for a request that names none (see
        :meth:`KnownFacts.preferred_strategy`)."""
        return self.model_facts(upstream, model).preferred_strategy()

    def constrained(self, upstream: str, model: str) -> bool:
        """Whether to hold emulated replies to a JSON Schema when the request does not say
        (see :meth:`KnownFacts.constrained`)."""
        return self.model_facts(upstream, model).constrained()

    def summary(self, upstream: str, model: str) -> dict[str, Any]:
        """One model's tool status in a line (``toolshim models list``), as JSON."""
        facts = self.facts(upstream, model)
        tools = facts.get("native_tools")
        context = facts.get("context_window")
        return {
            "model": model,
            "upstream": "any" if upstream == ANY_UPSTREAM else upstream,
            "native_tools": {
                "value": tools.value if tools else Support.UNKNOWN.value,
                "source": tools.source.value if tools else None,
                "learned_at": tools.updated_at if tools else None,
            },
            "dialect": self.preferred_dialect(upstream, model) or "json",
            "context_window": context.value if context else None,
        }

    def explain(self, upstream: str, model: str) -> ModelReport:
        """Why toolshim treats ``model`` as it does: each fact's winner and what it overrides."""
        reports = {}
        for name, items in self.evidence(upstream, model).items():
            reports[name] = FactReport(name, items[0], tuple(items[1:]))
        normalized, family = model, None
        if self.profiles is not None:
            from toolshim.capabilities.profiles import shipped_profiles

            match = shipped_profiles().match(model)
            normalized, family = match.normalized, match.family.name if match.family else None
            if match.markup is not None and "markup" not in reports:
                reports["markup"] = FactReport(
                    "markup", Evidence(match.markup, "shipped profile"), ()
                )
        ordered = {n: reports[n] for n in FACT_NAMES if n in reports}
        return ModelReport(
            upstream,
            model,
            normalized,
            family,
            ordered,
            self.preferred_dialect(upstream, model) or "json",
        )

    def known(self, upstream: str | None = None) -> list[tuple[str, str, dict[str, Fact]]]:
        """(upstream, model, stored facts) for every stored model (at ``upstream``, or all)."""
        rows = self._stored_rows()
        return [e for e in standing_entries(rows) if upstream in (None, e[0])]

    # -- writing ----------------------------------------------------------------------------

    def learn(
        self, upstream: str, model: str, name: str, value: Any, source: Source, detail: str = ""
    ) -> Fact:
        """Record a fact; return the fact that stands afterwards at ``upstream`` (a stronger
        one may remain). Never raises for a store that is away: the fact waits in memory."""
        key = model_key(model)
        fact = Fact(name, coerce_value(name, value), source, time.time(), detail)
        self._stored(upstream, key)  # a stronger layer stored by another process is known
        self._write(Put(upstream, key, fact))
        with self._lock:
            found = self._layers.get((upstream, key), {})
            return strongest(f for (n, _), f in found.items() if n == name) or fact

    def forget(
        self,
        upstream: str | None,
        model: str,
        *,
        names: Iterable[str] | None = None,
        sources: Iterable[Source] | None = None,
    ) -> int:
        """Delete stored facts about ``model`` (at ``upstream``, or everywhere when None),
        optionally only ``names`` or ``sources``; return how many. Profiles are not touched."""
        key = model_key(model)
        op = Forget(
            upstream,
            key,
            frozenset(names) if names is not None else None,
            frozenset(sources) if sources is not None else None,
        )
        if self._sync is None and self._down is None and not self._pending:
            try:  # the store's own count (it may know facts this cache never read)
                removed = self._store.forget(op.upstream, op.model, op.names, op.sources)
            except StoreError as exc:
                self._went_down(exc)
            else:
                with self._lock:
                    op.apply(self._layers)
                    self._merged.clear()
                return removed
        return self._write(op)

    def record_seen(self, upstream: str, models: Iterable[str]) -> None:
        """Remember that ``upstream`` listed ``models``."""
        self._write(Seen(upstream, tuple(model_key(m) for m in models), time.time()))
