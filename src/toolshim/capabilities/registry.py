"""The capability registry: the effective facts about a model, from the store and the profiles.

Facts are kept per (upstream, model) and per source. Three layers are merged with
:func:`~toolshim.capabilities.facts.merge` (a weaker source never wins):

* the shipped profiles of model families (source ``profile``),
* facts stored for every upstream (upstream ``"*"``, e.g. ``toolshim models set M`` without
  ``--upstream``),
* facts stored for this upstream (discovery, probes, runtime errors, ``models set``).

Model names are compared without a trailing ``:latest`` (Ollama's default tag).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
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
from toolshim.capabilities.store import CapabilityStore
from toolshim.errors import StoreError

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

ANY_UPSTREAM = "*"
"""The upstream key of facts that hold at every upstream."""


def model_key(model: str) -> str:
    """How a model is keyed in the store: stripped, without Ollama's ``:latest`` tag."""
    return model.strip().removesuffix(":latest")


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


class Registry:
    """What toolshim knows about each (upstream, model), merged by source.

    ``store`` persists what is learned (None keeps facts in memory for this process only).
    ``profiles`` supplies the shipped facts of model families. Reads are cached for
    ``cache_seconds`` so the proxy's hot path does not touch SQLite on every request; a fact
    learned by this process is visible at once, one learned by another process within
    ``cache_seconds``.
    """

    def __init__(
        self,
        store: CapabilityStore | None = None,
        *,
        profiles: ProfileLookup | None = None,
        cache_seconds: float = 2.0,
    ) -> None:
        self.store = store
        self.profiles = profiles
        self.store_problem: str | None = None
        """Why facts are kept in memory only, when a store was asked for and could not be used."""
        self._memory: dict[tuple[str, str], dict[tuple[str, Source], Fact]] = {}
        self._cache: dict[tuple[str, str], tuple[float, dict[str, Fact]]] = {}
        self._cache_seconds = cache_seconds

    def __repr__(self) -> str:
        where = self.store.path if self.store is not None else "memory"
        return f"Registry({where!r})"

    @classmethod
    def open(cls, path: str | os.PathLike[str] | None = None, *, profiles: bool = True) -> Registry:
        """The registry toolshim uses by default: the SQLite store at ``path`` (None: the
        default location) over the shipped model profiles.

        A store that cannot be used (busy, newer schema, no permission to rebuild it) is
        reported with a warning and facts are kept in memory: opening never fails.
        """
        lookup: ProfileLookup | None = None
        if profiles:
            from toolshim.capabilities.profiles import shipped_profiles

            lookup = shipped_profiles().lookup
        try:
            store: CapabilityStore | None = CapabilityStore(path)
            problem = None
        except StoreError as exc:
            log.warning("capability store unusable, keeping facts in memory only: %s", exc)
            store, problem = None, exc.message
        registry = cls(store, profiles=lookup)
        registry.store_problem = problem
        return registry

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
        cached = self._cache.get(key)
        now = time.monotonic()
        if cached and now - cached[0] < self._cache_seconds:
            return cached[1]
        merged: dict[str, Fact] = dict(self.profiles(model)) if self.profiles else {}
        for _, fact in self._stored(upstream, key[1]):
            merged[fact.name] = merge(merged.get(fact.name), fact)
        self._cache[key] = (now, merged)
        return merged

    def _stored(self, upstream: str, model: str) -> list[tuple[str, Fact]]:
        scopes = [ANY_UPSTREAM] if upstream == ANY_UPSTREAM else [ANY_UPSTREAM, upstream]
        if self.store is not None:
            try:
                return self.store.rows(model, scopes)
            except StoreError as exc:
                log.warning("capability store unavailable, using what is in memory: %s", exc)
        return [
            (scope, fact)
            for scope in scopes
            for fact in self._memory.get((scope, model), {}).values()
        ]

    def fact(self, upstream: str, model: str, name: str) -> Fact | None:
        return self.facts(upstream, model).get(name)

    def native_tools(self, upstream: str, model: str) -> Support:
        fact = self.fact(upstream, model, "native_tools")
        return fact.support if fact else Support.UNKNOWN

    def preferred_dialect(self, upstream: str, model: str) -> str | None:
        """The dialect to emulate with, if one is known *and* this toolshim has it."""
        from toolshim.dialects import available_dialects

        fact = self.fact(upstream, model, "dialect")
        if not fact or not fact.value:
            return None
        name = str(fact.value)
        if name not in available_dialects():
            log.debug("preferred dialect %r for %s is not available; using json", name, model)
            return None
        return name

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
        ordered = {n: reports[n] for n in FACT_NAMES if n in reports}
        normalized, family = model, None
        if self.profiles is not None:
            from toolshim.capabilities.profiles import shipped_profiles

            match = shipped_profiles().match(model)
            normalized, family = match.normalized, match.family.name if match.family else None
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
        if self.store is not None:
            try:
                entries = self.store.entries()
            except StoreError as exc:
                log.warning("capability store unavailable, using what is in memory: %s", exc)
            else:
                return [e for e in entries if upstream in (None, e[0])]
        out = []
        for (scope, model), layers in sorted(self._memory.items()):
            if upstream not in (None, scope):
                continue
            by_name: dict[str, list[Fact]] = {}
            for fact in layers.values():
                by_name.setdefault(fact.name, []).append(fact)
            standing = {n: strongest(fs) for n, fs in by_name.items()}
            out.append((scope, model, {n: f for n, f in standing.items() if f is not None}))
        return out

    # -- writing ----------------------------------------------------------------------------

    def learn(
        self, upstream: str, model: str, name: str, value: Any, source: Source, detail: str = ""
    ) -> Fact:
        """Record a fact; return the fact that stands afterwards (a stronger one may remain)."""
        key = model_key(model)
        fact = Fact(name, coerce_value(name, value), source, time.time(), detail)
        self._cache.clear()
        layers = self._memory.setdefault((upstream, key), {})
        layers[(name, source)] = merge(layers.get((name, source)), fact)
        if self.store is not None:
            try:
                return self.store.put(upstream, key, fact)
            except StoreError as exc:
                log.warning("could not persist %s=%r for %s: %s", name, value, model, exc)
        return strongest(f for (n, _), f in layers.items() if n == name) or fact

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
        chosen_names = set(names) if names is not None else None
        chosen_sources = set(sources) if sources is not None else None
        self._cache.clear()
        removed = 0
        for (scope, stored_model), layers in self._memory.items():
            if stored_model != key or upstream not in (None, scope):
                continue
            for name, source in list(layers):
                if (chosen_names is None or name in chosen_names) and (
                    chosen_sources is None or source in chosen_sources
                ):
                    del layers[(name, source)]
                    removed += 1
        if self.store is not None:
            removed = self.store.forget(upstream, key, chosen_names, chosen_sources)
        return removed

    def record_seen(self, upstream: str, models: Iterable[str]) -> None:
        """Remember that ``upstream`` listed ``models`` (kept only with a store)."""
        if self.store is not None:
            try:
                self.store.record_seen(upstream, [model_key(m) for m in models])
            except StoreError as exc:
                log.warning("could not record the models of %s: %s", upstream, exc)
