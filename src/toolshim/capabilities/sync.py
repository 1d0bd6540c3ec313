"""Writes the registry owes its store, and the thread that writes them and follows other replicas.

Every change the registry makes (a fact learned or set, facts forgotten, models seen) is an
:class:`Op`: applied to the registry's cache at once, queued, and written to the store in
order. While the store is away the queue keeps them (bounded by :data:`MAX_PENDING`); when it
returns they are written back, oldest first. A write never loses to an older one: each store
keeps the newer of two facts from the same source.

For a shared store, a :class:`SyncThread` does the store's I/O off the caller's thread: it
writes the queue, re-reads what other replicas changed (told by the store's watch), and
retries with backoff while the store is away.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass

from toolshim.capabilities.facts import Fact, Source, merge
from toolshim.capabilities.store import FactStore

__all__ = ["MAX_PENDING", "Forget", "Layers", "Op", "Put", "Seen", "SyncThread"]

log = logging.getLogger("toolshim.capabilities")

MAX_PENDING = 10_000
"""Writes kept for an absent store before the oldest learned ones are dropped (a person's
settings and forgets never are)."""

Layers = dict[tuple[str, Source], Fact]
"""One (upstream, model)'s stored facts, by (name, source)."""


@dataclass(frozen=True, slots=True)
class Put:
    """Store one fact in its source's layer."""

    upstream: str
    model: str
    fact: Fact

    def run(self, store: FactStore) -> None:
        store.put(self.upstream, self.model, self.fact)

    def apply(self, layers: dict[tuple[str, str], Layers]) -> int:
        found = layers.setdefault((self.upstream, self.model), {})
        slot = (self.fact.name, self.fact.source)
        found[slot] = merge(found.get(slot), self.fact)
        return 1

    def touches(self, upstream: str, model: str) -> bool:
        return (self.upstream, self.model) == (upstream, model)


@dataclass(frozen=True, slots=True)
class Forget:
    """Delete facts about a model (at one upstream or all), optionally by name or source."""

    upstream: str | None
    model: str
    names: frozenset[str] | None = None
    sources: frozenset[Source] | None = None

    def run(self, store: FactStore) -> None:
        store.forget(self.upstream, self.model, self.names, self.sources)

    def apply(self, layers: dict[tuple[str, str], Layers]) -> int:
        removed = 0
        for (scope, model), found in layers.items():
            if model != self.model or self.upstream not in (None, scope):
                continue
            for name, source in list(found):
                if (self.names is None or name in self.names) and (
                    self.sources is None or source in self.sources
                ):
                    del found[(name, source)]
                    removed += 1
        return removed

    def touches(self, upstream: str, model: str) -> bool:
        return model == self.model and self.upstream in (None, upstream)


@dataclass(frozen=True, slots=True)
class Seen:
    """Remember that an upstream listed these models."""

    upstream: str
    models: tuple[str, ...]
    when: float

    def run(self, store: FactStore) -> None:
        store.record_seen(self.upstream, self.models, when=self.when)

    def apply(self, layers: dict[tuple[str, str], Layers]) -> int:
        return 0

    def touches(self, upstream: str, model: str) -> bool:
        return False


Op = Put | Forget | Seen


class SyncThread(threading.Thread):
    """Runs ``step(item)`` for each queued item off the caller's thread; while a step fails
    (the store is away) it retries with ``step("retry")`` after a growing pause (0.25 s to 5 s).

    Items: ``"flush"`` (write the queue), ``("reload", upstream, model)`` (re-read what
    another replica changed), ``"resync"`` (write the queue, then re-read everything).
    """

    def __init__(self, step: Callable[[object], bool], name: str) -> None:
        super().__init__(name=name, daemon=True)
        self._step = step
        self._queue: queue.Queue[object] = queue.Queue()
        self._stopping = threading.Event()

    def submit(self, item: object) -> None:
        self._queue.put(item)

    def stop(self, timeout: float = 5.0) -> None:
        self._stopping.set()
        self._queue.put(None)
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout)

    def run(self) -> None:
        pause, failing = 0.25, False
        while not self._stopping.is_set():
            try:
                item = self._queue.get(timeout=pause if failing else None)
            except queue.Empty:
                item = "retry"
            if item is None:
                break
            try:
                ok = self._step(item)
            except Exception:  # a bug must not end the thread that keeps replicas in step
                log.exception("capability sync step %r failed", item)
                ok = False
            failing = not ok
            pause = 0.25 if ok else min(pause * 2, 5.0)
