"""The registry's cache of its store: what it read, the writes it owes, and the store going away and coming back.

:class:`StoreMirror` is the part of the :class:`~toolshim.capabilities.registry.Registry` that
talks to its :class:`~toolshim.capabilities.store.FactStore`. Reads come from a cache: with a
shared store (PostgreSQL, Redis) it mirrors the whole store, kept current by the store's
change notifications, and every store I/O runs on a thread of its own
(:class:`~toolshim.capabilities.sync.SyncThread`); with SQLite, a model's facts are re-read after
``cache_seconds``. Every change is an :class:`~toolshim.capabilities.sync.Op` applied to the
cache at once and queued; the queue is written oldest first, and kept while the store is away
(logged once) until it is back. Documents (:mod:`toolshim.capabilities.documents`) outlive an
outage the same way.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque

from toolshim.capabilities.documents import HeldDocuments
from toolshim.capabilities.facts import Fact, Source
from toolshim.capabilities.report import ANY_UPSTREAM
from toolshim.capabilities.store import DocumentStore, FactStore
from toolshim.capabilities.sync import MAX_PENDING, Layers, Op, Put, Seen, SyncThread
from toolshim.errors import StoreError

__all__ = ["StoreMirror"]

log = logging.getLogger("toolshim.capabilities")


class StoreMirror:
    """A cache of ``store``'s facts, the writes owed to it, and whether it answers now.

    ``cache_seconds`` is how long facts read from a store that cannot notify (SQLite) are
    trusted before being re-read; a shared store's notifications keep the cache current.
    """

    def __init__(self, store: FactStore, *, cache_seconds: float = 1.0) -> None:
        self._store: FactStore = store
        self._ttl = cache_seconds
        self._lock = threading.RLock()
        self._flushed = threading.Condition(self._lock)
        self._layers: dict[tuple[str, str], Layers] = {}
        self._loaded: dict[tuple[str, str], float] = {}
        self._mirrored = False
        self._merged: dict[tuple[str, str], tuple[float, dict[str, Fact]]] = {}
        """Derived from the cache by the registry (merged facts per model); cleared on change."""
        self._pending: deque[Op] = deque()
        self._attempts = 0
        self._down: str | None = None
        self._retry_at = 0.0
        self._sync: SyncThread | None = None
        self._watch = None
        self._dropping = False
        self._documents: HeldDocuments | None = None
        methods = ("put_document", "get_document", "delete_document")
        if all(hasattr(store, m) for m in methods):
            held: DocumentStore = store  # type: ignore[assignment]
            self._documents = HeldDocuments(held, away=self._away, failed=self._went_down)
        if store.shared:
            self._step("resync")  # the first read is made here: facts are there at once
            self._sync = SyncThread(self._step, name=f"toolshim-registry-sync {store.location}")
            self._sync.start()
            self._watch = store.watch(self._changed)

    @property
    def location(self) -> str:
        """Where the store is, fit to show (no credentials)."""
        return self._store.location

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
        share, such as ``previous_response_id``), held in memory while the store is away;
        None if the store keeps no documents."""
        return self._documents

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

    def _stored_rows(self) -> list[tuple[str, str, Fact]]:
        """Every stored layer in the cache (re-read first from a store that cannot notify)."""
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
            return [(u, m, f) for (u, m), found in self._layers.items() for f in found.values()]

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
        if self._documents is not None and self._documents.unsaved:
            log.warning(
                "%d document(s) could not be written to the capability store at %s; they are lost",
                self._documents.unsaved,
                self._store.location,
            )
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
                if not self._dropping:  # said once an outage, not once a write
                    self._dropping = True
                    log.warning(
                        "more than %d writes wait for the capability store; the oldest learned "
                        "ones are dropped (a person's settings are kept)",
                        MAX_PENDING,
                    )
                return

    def _may_try(self, now: float) -> bool:
        return self._down is None or now >= self._retry_at

    def _away(self) -> bool:
        """Whether the store is not to be tried now: it is away and either the sync thread
        watches for its return or the next retry is not due yet."""
        return self._down is not None and (
            self._sync is not None or time.monotonic() < self._retry_at
        )

    def _replay(self) -> bool:
        """Write the queue, oldest first; False (and the store marked away) on a failure.
        The store is said to be back only once a write reached it (an empty queue proves
        nothing). Every replay counts as an attempt for :meth:`flush`'s waiters, whatever
        its end."""
        try:
            ok, wrote = self._write_queue()
        finally:
            with self._lock:
                self._attempts += 1
                self._flushed.notify_all()
        if ok and wrote:
            self._came_back()
        return ok

    def _write_queue(self) -> tuple[bool, bool]:
        """(whether everything queued was written, whether anything was)."""
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
                return False, wrote
            wrote = True
            with self._lock:
                if self._pending and self._pending[0] is op:
                    self._pending.popleft()
                self._flushed.notify_all()
        if self._documents is not None and self._documents.unsaved:
            if not self._documents.write_back():
                return False, wrote
            wrote = True
        return True, wrote

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
            sync = self._sync
            if sync is not None and threading.current_thread() is not sync:
                # Found by a request (a document), not by the sync thread: set it retrying,
                # or nothing would try the store again while its watch stays connected.
                sync.submit("retry")

    def _came_back(self) -> None:
        with self._lock:
            was, self._down = self._down, None
            self._dropping = False
        if was is not None:
            log.warning(
                "capability store at %s is back; what was learned meanwhile is written",
                self._store.location,
            )
