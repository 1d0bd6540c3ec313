"""The capability registry: the effective facts about a model, from its store, its cache and the profiles.

Facts are kept per (upstream, model) and per source. Three layers are merged with
:func:`~toolshim.capabilities.facts.merge` (a weaker source never wins):

* the shipped profiles of model families (source ``profile``),
* facts stored for every upstream (upstream ``"*"``, e.g. ``toolshim models set M`` without
  ``--upstream``),
* facts stored for this upstream (discovery, probes, runtime errors, ``models set``).

The registry talks to its store only through :class:`~toolshim.capabilities.store.FactStore`.
Reads on the proxy's hot path come from a cache. With a shared store (PostgreSQL, Redis) the
cache mirrors the whole store, kept current by the store's change notifications, and every
store I/O runs on a thread of its own: a request never waits for the store, and never fails
because it is away. With SQLite, a model's facts are re-read after ``cache_seconds``.
What is learned while the store is away (or read-only) is kept in memory and acted on; it is
written back, oldest first, when the store returns (:mod:`toolshim.capabilities.sync`).

Model names are compared without a trailing ``:latest`` (Ollama's default tag).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from toolshim.capabilities.facts import (
    FACT_NAMES,
    STRATEGIES,
    Fact,
    Source,
    Support,
    coerce_value,
    merge,
    strongest,
)
from toolshim.capabilities.report import (
    ANY_UPSTREAM,
    Evidence,
    FactReport,
    ModelReport,
    fact_dict,
)
from toolshim.capabilities.store import DocumentStore, FactStore, open_store, standing_entries
from toolshim.capabilities.sync import MAX_PENDING, Forget, Layers, Op, Put, Seen, SyncThread
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


class Registry:
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
            from toolshim.capabilities.store_sqlite import SQLiteStore

            store = SQLiteStore(":memory:")
        self._store: FactStore = store
        self.profiles = profiles
        self.problem: str | None = None
        """Why what is learned is not saved (the store asked for could not be used)."""
        self._ttl = cache_seconds
        self._lock = threading.RLock()
        self._flushed = threading.Condition(self._lock)
        self._layers: dict[tuple[str, str], Layers] = {}
        self._loaded: dict[tuple[str, str], float] = {}
        self._mirrored = False
        self._merged: dict[tuple[str, str], tuple[float, dict[str, Fact]]] = {}
        self._pending: deque[Op] = deque()
        self._attempts = 0
        self._down: str | None = None
        self._retry_at = 0.0
        self._sync: SyncThread | None = None
        self._watch = None
        if store.shared:
            self._step("resync")  # the first read is made here: facts are there at once
            self._sync = SyncThread(self._step, name=f"toolshim-registry-sync {store.location}")
            self._sync.start()
            self._watch = store.watch(self._changed)

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

    @property
    def available(self) -> bool:
        """False while the store is away (facts come from the cache; writes wait)."""
        return self._down is None

    @property
    def outage(self) -> str | None:
        """Why the store cannot be used now (None while it can): what a command that must
        read the store itself, such as ``toolshim models list``, reports."""
        return self._down

    @property
    def pending(self) -> int:
        """How many writes wait for the store."""
        return len(self._pending)

    @property
    def documents(self) -> DocumentStore | None:
        """The bounded JSON document store on the same backend (for state several replicas
        share, such as ``previous_response_id``), if the store offers one."""
        store: object = self._store
        if all(hasattr(store, m) for m in ("put_document", "get_document", "delete_document")):
            return store  # type: ignore[return-value]
        return None

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

    def _stored(
        self, upstream: str, model: str, now: float | None = None
    ) -> list[tuple[str, Fact]]:
        """The stored layers about ``model`` here and at any upstream (cache first); ``now``
        is the caller's clock, so that its cache and this one expire together."""
        scopes = [ANY_UPSTREAM] if upstream == ANY_UPSTREAM else [ANY_UPSTREAM, upstream]
        now = time.monotonic() if now is None else now
        stale = [
            s
            for s in scopes
            if not self._mirrored and now - self._loaded.get((s, model), -1e9) >= self._ttl
        ]
        if stale and self._sync is None and self._may_try(now):
            try:
                rows = self._store.rows(model, stale)
            except StoreError as exc:
                self._went_down(exc)
            else:
                self._replace({(s, model) for s in stale}, [(u, model, f) for u, f in rows], now)
                self._came_back()
        with self._lock:
            return [
                (scope, fact)
                for scope in scopes
                for fact in self._layers.get((scope, model), {}).values()
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

    def preferred_strategy(self, upstream: str, model: str) -> Strategy:
        """The emulation strategy for a request that names none: fact ``strategy`` (an
        eval's pick, a person's setting), else ``single``."""
        fact = self.fact(upstream, model, "strategy")
        if fact is None or fact.value not in STRATEGIES:
            return Strategy.SINGLE
        return Strategy(fact.value)

    def constrained(self, upstream: str, model: str) -> bool:
        """Whether to hold emulated replies to a JSON Schema when the request does not say:
        fact ``constrain`` when it is yes or no (an eval's pick, a person's setting), else
        whether the upstream honours ``response_format`` (fact ``structured_output``)."""
        fact = self.fact(upstream, model, "constrain")
        if fact is not None and fact.support is not Support.UNKNOWN:
            return fact.support is Support.YES
        structured = self.fact(upstream, model, "structured_output")
        return bool(structured and structured.support is Support.YES)

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
        if not self._mirrored and self._sync is None:
            try:
                rows = self._store.snapshot()
            except StoreError as exc:
                self._went_down(exc)
            else:
                keys = {(u, m) for u, m, _ in rows} | set(self._layers)
                self._replace(keys, rows, time.monotonic())
                self._came_back()
        with self._lock:
            rows = [(u, m, f) for (u, m), found in self._layers.items() for f in found.values()]
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

    def flush(self, timeout: float = 10.0) -> None:
        """Write everything pending now; StoreError naming how many writes could not be made
        (the store is away or read-only). What the CLI calls before it says "stored"."""
        if self._sync is not None:
            with self._flushed:
                tried = self._attempts
            self._sync.submit("flush")
            deadline = time.monotonic() + timeout
            with self._flushed:
                while self._pending and time.monotonic() < deadline:
                    if self._attempts > tried and self._down is not None:
                        break  # a try made after this call failed: the store is away
                    self._flushed.wait(min(0.05, max(deadline - time.monotonic(), 0.0)))
        else:
            self._retry_at = 0.0
            self._replay()
        if self._pending:
            raise StoreError(
                f"{len(self._pending)} change(s) could not be written to the capability store "
                f"at {self.location}: {self._down or 'it did not answer in time'}"
            )

    def close(self, timeout: float = 2.0) -> None:
        """Write what is pending (up to ``timeout``), stop following the store, close it."""
        try:
            self.flush(timeout)
        except StoreError as exc:
            log.warning("%s; they are lost", exc.message)
        if self._watch is not None:
            self._watch.close()
        if self._sync is not None:
            self._sync.stop()
        self._store.close()

    # -- the cache and the queue of writes ----------------------------------------------------

    def _write(self, op: Op) -> int:
        """Apply ``op`` to the cache, queue it, and write the queue (here, or on the sync
        thread for a shared store); return what the cache says it changed."""
        with self._lock:
            changed = op.apply(self._layers)
            self._merged.clear()
            self._pending.append(op)
            if len(self._pending) > MAX_PENDING:
                self._drop_oldest_learned()
        if self._sync is not None:
            self._sync.submit("flush")
        elif self._may_try(time.monotonic()):
            self._replay()
        return changed

    def _drop_oldest_learned(self) -> None:
        for index, op in enumerate(self._pending):
            # Learned facts and models seen may go; a person's settings and forgets never do.
            if isinstance(op, Seen) or (isinstance(op, Put) and op.fact.source is not Source.USER):
                del self._pending[index]
                log.warning(
                    "more than %d writes wait for the capability store; dropped the oldest",
                    MAX_PENDING,
                )
                return

    def _may_try(self, now: float) -> bool:
        return self._down is None or now >= self._retry_at

    def _replay(self) -> bool:
        """Write the queue, oldest first; False (and the store marked away) on a failure.
        The store is said to be back only once a write reached it (an empty queue proves
        nothing)."""
        wrote = False
        while True:
            with self._lock:
                if not self._pending:
                    break
                op = self._pending[0]
            try:
                op.run(self._store)
            except StoreError as exc:
                self._went_down(exc)
                with self._lock:
                    self._attempts += 1
                    self._flushed.notify_all()
                return False
            wrote = True
            with self._lock:
                if self._pending and self._pending[0] is op:
                    self._pending.popleft()
                self._flushed.notify_all()
        with self._lock:
            self._attempts += 1
            self._flushed.notify_all()
        if wrote:
            self._came_back()
        return True

    def _replace(
        self, keys: set[tuple[str, str]], rows: list[tuple[str, str, Fact]], now: float
    ) -> None:
        """The cache of ``keys`` becomes what the store said, with the pending writes on top."""
        fresh: dict[tuple[str, str], Layers] = {k: {} for k in keys}
        for upstream, model, fact in rows:
            fresh.setdefault((upstream, model), {})[(fact.name, fact.source)] = fact
        with self._lock:
            for op in self._pending:
                if any(op.touches(u, m) for u, m in fresh):
                    op.apply(fresh)
            for key, layers in fresh.items():
                if layers:
                    self._layers[key] = layers
                else:
                    self._layers.pop(key, None)
                self._loaded[key] = now
            self._merged.clear()

    def _step(self, item: object) -> bool:
        """One job of the sync thread (see :class:`~toolshim.capabilities.sync.SyncThread`)."""
        try:
            if isinstance(item, tuple) and self._down is None:
                _, upstream, model = item
                found = self._store.rows(model, [upstream])
                self._replace({(upstream, model)}, [(upstream, model, f) for _, f in found], 0.0)
                return True
            if not self._replay():
                return False
            if item != "flush" or not self._mirrored:
                rows = self._store.snapshot()
                self._replace(set(self._layers) | {(u, m) for u, m, _ in rows}, rows, 0.0)
                self._mirrored = True
                self._came_back()
        except StoreError as exc:
            self._went_down(exc)
            return False
        return True

    def _changed(self, upstream: str | None, model: str | None) -> None:
        """Called by the store's watch: re-read what another replica changed."""
        if self._sync is None:
            return
        if upstream is None or model is None:
            self._sync.submit("resync")
        else:
            self._sync.submit(("reload", upstream, model))

    def _went_down(self, exc: StoreError) -> None:
        with self._lock:
            first = self._down is None
            self._down = exc.message
            self._retry_at = time.monotonic() + 1.0
            if self._sync is not None:
                self._mirrored = False
        if first:
            log.warning(
                "capability store unavailable: serving from what is cached, keeping what is "
                "learned in memory until it is back (%s)",
                exc.message,
            )

    def _came_back(self) -> None:
        with self._lock:
            was, self._down = self._down, None
        if was is not None:
            log.warning(
                "capability store at %s is back; what was learned meanwhile is written",
                self._store.location,
            )
