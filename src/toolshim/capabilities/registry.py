"""The capability registry: the effective facts about a model, from the store and the profiles."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from toolshim.capabilities.facts import Fact, Source, Support, merge
from toolshim.capabilities.store import CapabilityStore
from toolshim.errors import StoreError

__all__ = ["ProfileLookup", "Registry"]

log = logging.getLogger("toolshim.capabilities")

ProfileLookup = Callable[[str], Mapping[str, Fact]]
"""Shipped facts for a model name (lowest precedence); see :mod:`toolshim.capabilities.profiles`."""


class Registry:
    """What toolshim knows about each (upstream, model), merged by source.

    ``store`` persists what is learned (None keeps facts in memory for this process only).
    ``profiles`` supplies the shipped facts of model families. Reads are cached for
    ``cache_seconds`` so the proxy's hot path does not touch SQLite on every request.
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
        self._memory: dict[tuple[str, str], dict[str, Fact]] = {}
        self._cache: dict[tuple[str, str], tuple[float, dict[str, Fact]]] = {}
        self._cache_seconds = cache_seconds

    @classmethod
    def open(cls, path: str | os.PathLike[str] | None = None) -> Registry:
        """The registry toolshim uses by default: the SQLite store at ``path`` (None: the
        default location) over the shipped model profiles."""
        return cls(CapabilityStore(path))

    def facts(self, upstream: str, model: str) -> dict[str, Fact]:
        """Every effective fact about ``model``: stored facts merged over the profile's."""
        key = (upstream, model)
        cached = self._cache.get(key)
        now = time.monotonic()
        if cached and now - cached[0] < self._cache_seconds:
            return cached[1]
        merged: dict[str, Fact] = dict(self.profiles(model)) if self.profiles else {}
        for name, fact in self._stored(upstream, model).items():
            merged[name] = merge(merged.get(name), fact)
        self._cache[key] = (now, merged)
        return merged

    def _stored(self, upstream: str, model: str) -> Mapping[str, Fact]:
        if self.store is None:
            return self._memory.get((upstream, model), {})
        try:
            return self.store.get(upstream, model)
        except StoreError as exc:
            log.warning("capability store unavailable, using what is in memory: %s", exc)
            return self._memory.get((upstream, model), {})

    def fact(self, upstream: str, model: str, name: str) -> Fact | None:
        return self.facts(upstream, model).get(name)

    def native_tools(self, upstream: str, model: str) -> Support:
        fact = self.fact(upstream, model, "native_tools")
        return fact.support if fact else Support.UNKNOWN

    def preferred_dialect(self, upstream: str, model: str) -> str | None:
        fact = self.fact(upstream, model, "dialect")
        return str(fact.value) if fact and fact.value else None

    def learn(
        self, upstream: str, model: str, name: str, value: Any, source: Source, detail: str = ""
    ) -> Fact:
        """Record a fact; return the fact that stands afterwards (a stronger one may remain)."""
        fact = Fact(
            name, value.value if isinstance(value, Support) else value, source, time.time(), detail
        )
        self._cache.pop((upstream, model), None)
        memory = self._memory.setdefault((upstream, model), {})
        memory[name] = merge(memory.get(name), fact)
        if self.store is None:
            return memory[name]
        try:
            return self.store.put(upstream, model, fact)
        except StoreError as exc:
            log.warning("could not persist %s=%r for %s: %s", name, value, model, exc)
            return memory[name]

    def forget(self, upstream: str | None, model: str) -> int:
        self._cache.clear()
        removed = 0
        for key in [k for k in self._memory if k[1] == model and upstream in (None, k[0])]:
            removed += len(self._memory.pop(key))
        if self.store is not None:
            removed = self.store.forget(upstream, model)
        return removed
