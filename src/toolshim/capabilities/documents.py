"""The registry's document store: the backend's documents, kept in memory while it is away and written back.

State that follows a conversation across replicas (the Responses API's
``previous_response_id``) lives in the store's bounded document store
(:class:`~toolshim.capabilities.store.DocumentStore`). :class:`HeldDocuments` stands in front of
it for the registry, so that the store going away never fails the request that writes one and
never blocks it on a connection attempt:

* a document put while the store is away (or whose write fails) is kept in memory, marked
  unsaved, and written back, oldest first, once the store is back (the registry's sync step
  calls :meth:`HeldDocuments.write_back`);
* the last documents written here are kept (:data:`HELD_LIMIT`, :data:`HELD_BYTES`) and served
  while the store is away, so a conversation continued on the same replica goes on;
* a document neither here nor readable (the store away) is a
  :class:`~toolshim.errors.StoreError` saying so, never "not found".

The outage is reported by the registry (once), never per document.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from toolshim.capabilities.store import (
    DocumentStore,
    DocumentWrite,
    document_json,
    document_text,
    document_value,
)
from toolshim.errors import StoreError

__all__ = ["HELD_BYTES", "HELD_LIMIT", "HeldDocuments"]

log = logging.getLogger("toolshim.capabilities")

HELD_LIMIT = 1000
"""How many of the documents written here are kept in memory at most."""
HELD_BYTES = 64 * 1024 * 1024
"""How many bytes of JSON the documents kept in memory may take at most."""


@dataclass(slots=True)
class _Held:
    body: str
    expires_at: float | None
    saved: bool

    def live(self, now: float) -> bool:
        return self.expires_at is None or self.expires_at > now


class HeldDocuments:
    """A :class:`~toolshim.capabilities.store.DocumentStore` over ``store`` that outlives it.

    ``away()`` says whether the store is known to be away now (then it is not tried);
    ``failed(exc)`` is told of each failure of the store (the registry marks it away and logs
    once).
    """

    def __init__(
        self,
        store: DocumentStore,
        *,
        away: Callable[[], bool],
        failed: Callable[[StoreError], None],
        limit: int = HELD_LIMIT,
        max_bytes: int = HELD_BYTES,
    ) -> None:
        self._store = store
        self._away = away
        self._failed = failed
        self.limit = limit
        self.max_bytes = max_bytes
        self._held: OrderedDict[str, _Held] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._dropped_unsaved = False

    def __repr__(self) -> str:
        return f"HeldDocuments({self._store!r})"

    @property
    def unsaved(self) -> int:
        """How many documents wait for the store."""
        with self._lock:
            return sum(not held.saved for held in self._held.values())

    def put_document(self, key: str, document: Any, *, ttl: float | None = None) -> None:
        """Keep ``document``: in the store when it answers, in memory (written back later)
        when not. StoreError only for a document that is not JSON or is too big."""
        self.write_documents([DocumentWrite(key, document_json(key, document), ttl)])

    def write_documents(self, writes: Sequence[DocumentWrite]) -> None:
        """Make ``writes`` (the store's in one transaction), as :meth:`put_document` and
        :meth:`delete_document` would one by one: the documents put are kept here, and in
        memory only (written back later) when the store is away or fails; a deletion is always
        tried in the store, and raises StoreError when it fails."""
        deletes = []
        for write in writes:
            if write.body is None:
                deletes.append(write.key)
            else:
                document_text(write.key, write.body)
        if deletes:
            with self._lock:
                for key in deletes:
                    held = self._held.pop(key, None)
                    if held is not None:
                        self._bytes -= len(held.body)
        saved = False
        if deletes or not self._away():
            try:
                self._store.write_documents(writes)
                saved = True
            except StoreError as exc:
                self._failed(exc)
                if deletes:
                    raise
        now = time.time()
        self._hold(
            [
                (w.key, _Held(w.body, None if w.ttl is None else now + w.ttl, saved))
                for w in writes
                if w.body is not None
            ]
        )

    def get_document(self, key: str) -> Any | None:
        """The document under ``key`` (the store's, else the one held here); None if there is
        none; StoreError if the store is away and it is not held here."""
        if self._away():
            return self._unread(key, None)
        try:
            found = self._store.get_document(key)
        except StoreError as exc:
            self._failed(exc)
            return self._unread(key, exc)
        return found if found is not None else self._unsaved(key)

    def get_documents(self, keys: Sequence[str]) -> list[Any | None]:
        """:meth:`get_document` of each key, read together where the store can (SQLite: one
        check that its cache is current for them all)."""
        read = getattr(self._store, "get_documents", None)
        if read is None or self._away() or not keys:
            return [self.get_document(key) for key in keys]
        try:
            found: list[Any | None] = read(keys)
        except StoreError as exc:
            self._failed(exc)  # the first key as get_document would answer, then the others
            return [self._unread(keys[0], exc), *(self.get_document(k) for k in keys[1:])]
        return [f if f is not None else self._unsaved(k) for k, f in zip(keys, found, strict=True)]

    def _unsaved(self, key: str) -> Any | None:
        """What the store lacks under ``key``: the copy held here if it was never saved."""
        held = self._held_copy(key)
        return held if held is not None and not self._is_saved(key) else None

    def _unread(self, key: str, problem: StoreError | None) -> Any | None:
        """The copy held here of a document the store cannot give (away, or ``problem``)."""
        held = self._held_copy(key)
        if held is not None:
            return held
        raise problem or StoreError(
            f"document {key!r} cannot be read: the capability store is unavailable"
        )

    def delete_document(self, key: str) -> bool:
        """Remove the document here and in the store (StoreError if the store is away)."""
        with self._lock:
            held = self._held.pop(key, None)
            if held is not None:
                self._bytes -= len(held.body)
        try:
            return self._store.delete_document(key) or held is not None
        except StoreError as exc:
            self._failed(exc)
            raise

    def write_back(self) -> bool:
        """Write the unsaved documents to the store, oldest first; False at the first
        failure (the store is told away; the rest wait)."""
        while True:
            with self._lock:
                waiting = next(((k, h) for k, h in self._held.items() if not h.saved), None)
            if waiting is None:
                return True
            key, held = waiting
            now = time.time()
            if held.live(now):
                ttl = None if held.expires_at is None else held.expires_at - now
                try:
                    self._store.write_documents([DocumentWrite(key, held.body, ttl)])
                except StoreError as exc:
                    self._failed(exc)
                    return False
            with self._lock:
                if self._held.get(key) is held:
                    held.saved = True

    def _hold(self, documents: list[tuple[str, _Held]]) -> None:
        with self._lock:
            for key, held in documents:
                old = self._held.pop(key, None)
                if old is not None:
                    self._bytes -= len(old.body)
                self._held[key] = held
                self._bytes += len(held.body)
            while len(self._held) > self.limit or (
                self._bytes > self.max_bytes and len(self._held) > 1
            ):
                _, gone = self._held.popitem(last=False)
                self._bytes -= len(gone.body)
                if not gone.saved and not self._dropped_unsaved:
                    self._dropped_unsaved = True
                    log.warning(
                        "more than %d documents wait for the capability store; the oldest "
                        "are dropped",
                        self.limit,
                    )

    def _held_copy(self, key: str) -> Any | None:
        with self._lock:
            held = self._held.get(key)
            if held is None or not held.live(time.time()):
                return None
            body = held.body
        return document_value(body)

    def _is_saved(self, key: str) -> bool:
        with self._lock:
            held = self._held.get(key)
            return held is None or held.saved
