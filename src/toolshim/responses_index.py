"""One owner's stored Responses answers, oldest first: what its quota evicts, and why an id is gone.

The entries (``[id, bytes, stored_at]``) live in pages of :data:`PAGE` entries
(``responses-of:<owner>:<n>``) under a small head document (``responses-of:<owner>``: the
first and last page, the bytes and count in all, and the last :data:`GONE_KEPT` reasons an
answer is not, or no longer, stored, and a token new at each write). Appending touches the
last page and evicting the oldest touches the first, so a save costs the same however many
answers the owner keeps; only deleting one by id, or looking one up, walks the pages.

An index's writes (its pages, then its head) are gathered in a :class:`WriteBatch` and made
in one transaction of the document store, whatever the number of answers appended meanwhile
(:class:`~toolshim.responses_store.ResponseStore` keeps an owner's index in memory between
saves). The last page an index wrote is kept with it and appended to without being read or
encoded again.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import orjson

from toolshim.capabilities.store import (
    DocumentWrite,
    document_json,
    document_text,
    document_value,
)

__all__ = ["GONE_KEPT", "PAGE", "Documents", "OwnerIndex", "WriteBatch", "head_key"]

PAGE = 64
"""Entries in one page document: a page (about 66 bytes an entry) stays near 4 kB, what SQLite
keeps in the table's own page; a longer one spills into overflow pages, freed and written anew
at each append (at 128 entries a save cost 8 µs more CPU, most of it in the commit)."""
GONE_KEPT = 64
"""How many reasons for answers not (or no longer) stored the head remembers."""


def head_key(owner: str) -> str:
    """The key of ``owner``'s index head (its pages are ``<head key>:<n>``)."""
    return f"responses-of:{owner}"


class Documents(Protocol):
    """A key → JSON document store (the shape of the registry's document store)."""

    def put_document(self, key: str, document: Any, *, ttl: float | None = None) -> None: ...

    def get_document(self, key: str) -> Any | None: ...

    def delete_document(self, key: str) -> bool: ...

    def write_documents(self, writes: Sequence[DocumentWrite]) -> None: ...


_PLAIN = (
    orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)


def _plain_json(key: str, document: Any) -> str:
    """``document`` as JSON text, written by orjson (the indexes' pages are long lists of
    times, which ``json`` writes twenty times slower); a document orjson would write other than
    as ``json`` reads it back (a NaN it makes null, a type ``json`` refuses) is
    :func:`document_json`'s."""
    try:
        body = orjson.dumps(document, option=_PLAIN)
    except TypeError:
        return document_json(key, document)
    if b"null" in body:
        return document_json(key, document)
    return document_text(key, body.decode())


class WriteBatch:
    """Writes to ``documents`` gathered, then made together by :meth:`commit` (one
    transaction, not one per document); reads see the writes gathered so far. For the
    response store's own documents (its indexes and totals: strings, numbers, lists)."""

    def __init__(self, documents: Documents) -> None:
        self.documents = documents
        self._writes: dict[str, DocumentWrite] = {}

    def put_document(self, key: str, document: Any, *, ttl: float | None = None) -> None:
        self._write(DocumentWrite(key, _plain_json(key, document), ttl))

    def put_text(self, key: str, body: str, *, ttl: float | None = None) -> None:
        """Put a document already written as JSON (as :func:`document_json` writes it)."""
        self._write(DocumentWrite(key, document_text(key, body), ttl))

    def get_document(self, key: str) -> Any | None:
        write = self._writes.get(key)
        if write is not None:
            return None if write.body is None else document_value(write.body)
        return self.documents.get_document(key)

    def delete_document(self, key: str) -> bool:
        self._write(DocumentWrite(key, None))
        return True

    def write_documents(self, writes: Sequence[DocumentWrite]) -> None:
        for write in writes:
            self._write(write)

    def _write(self, write: DocumentWrite) -> None:
        self._writes.pop(write.key, None)  # made in the order of each key's last write
        self._writes[write.key] = write

    def commit(self) -> None:
        if self._writes:
            self.documents.write_documents(self.take())

    def take(self) -> list[DocumentWrite]:
        """The writes gathered, in order, handed over to be made elsewhere (none are left)."""
        writes = list(self._writes.values())
        self._writes.clear()
        return writes


def _int(value: Any) -> int:
    if type(value) is int:  # (what JSON gives: the isinstance below only for the rest)
        return value
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class OwnerIndex:
    """The index of ``owner``'s answers in ``documents`` (read on creation; :meth:`save` writes
    the head back). Documents are kept for ``ttl`` seconds, refreshed on each write."""

    def __init__(self, documents: Documents, owner: str, ttl: float | None) -> None:
        self.documents = documents
        self.owner = owner
        self.key = head_key(owner)
        self.ttl = ttl
        self._tail: tuple[int, list[list[Any]]] | None = None
        """The last page as :meth:`append` left it, its number and its entries, waiting for
        :meth:`save` to be written (appending to it neither reads nor writes it)."""
        head = documents.get_document(self.key)
        head = head if type(head) is dict or isinstance(head, Mapping) else {}
        token = head.get("token")
        self._token = token if isinstance(token, str) else None
        self.first = _int(head.get("first"))
        self.last = max(self.first, _int(head.get("last")))
        self.bytes = _int(head.get("bytes"))
        self.count = _int(head.get("count"))
        gone = head.get("gone")
        self._gone_stored: list[Any] = gone if isinstance(gone, list) else []
        """The reasons as read (a list of [id, reason]); read into :attr:`_gone` only when
        one is looked up or added: a save that adds none writes them back as they are."""
        self._gone_read: list[list[Any]] | None = None

    @property
    def token(self) -> str | None:
        """The token of the head this index was read from, or last wrote: another writer of
        the head since changed it."""
        return self._token

    # -- pages --------------------------------------------------------------------------------

    def _page(self, n: int) -> list[list[Any]]:
        if self._tail is not None and self._tail[0] == n:
            return list(self._tail[1])
        found = self.documents.get_document(f"{self.key}:{n}")
        items = found.get("items") if isinstance(found, Mapping) else None
        if not isinstance(items, list):
            return []
        # (entries are never changed in place: the decoded lists are kept as they are)
        return [i for i in items if type(i) is list and len(i) == 3]

    def _put_page(self, n: int, items: list[list[Any]]) -> None:
        if self._tail is not None and self._tail[0] == n:
            self._tail = None  # (written here, as it is now)
        if items:
            self.documents.put_document(f"{self.key}:{n}", {"items": items}, ttl=self.ttl)
        else:
            self.documents.delete_document(f"{self.key}:{n}")

    # -- changes ------------------------------------------------------------------------------

    def append(self, response_id: str, size: int, *, stored_at: float | None = None) -> None:
        """Add the newest answer (its page and the head wait for :meth:`save`)."""
        entry = [response_id, size, time.time() if stored_at is None else stored_at]
        if self._tail is not None and self._tail[0] != self.last:
            self._write_tail()
        items = self._tail[1] if self._tail is not None else self._page(self.last)
        if len(items) >= PAGE:
            self._write_tail()
            self.last += 1
            items = []
        items.append(entry)  # (the tail's own list: _page hands out copies)
        self._tail = (self.last, items)
        self.bytes += size
        self.count += 1

    def pop_oldest(self) -> tuple[str, int] | None:
        """Remove the oldest entry and return (id, bytes); None when there is none (the totals
        are then reset: pages that expired on their own took their entries with them)."""
        while True:
            items = self._page(self.first)
            if items:
                response_id, size, _ = items.pop(0)
                if not items and self.first < self.last:
                    if self._tail is not None and self._tail[0] == self.first:
                        self._tail = None
                    self.documents.delete_document(f"{self.key}:{self.first}")
                    self.first += 1
                else:
                    self._put_page(self.first, items)
                self.bytes = max(0, self.bytes - _int(size))
                self.count = max(0, self.count - 1)
                return str(response_id), _int(size)
            if self.first >= self.last:
                self.bytes = self.count = 0
                return None
            self.first += 1

    def remove(self, response_id: str) -> bool:
        """Remove ``response_id``'s entry wherever it is (walks the pages)."""
        for n in range(self.first, self.last + 1):
            items = self._page(n)
            kept = [i for i in items if i[0] != response_id]
            if len(kept) < len(items):
                self._put_page(n, kept)
                removed = sum(_int(i[1]) for i in items if i[0] == response_id)
                self.bytes = max(0, self.bytes - removed)
                self.count = max(0, self.count - (len(items) - len(kept)))
                return True
        return False

    def find(self, response_id: str) -> tuple[int, float] | None:
        """(bytes, stored_at) of ``response_id``'s entry, or None (walks the pages)."""
        for n in range(self.first, self.last + 1):
            for entry_id, size, stored_at in self._page(n):
                if entry_id == response_id:
                    return _int(size), float(stored_at)
        return None

    @property
    def _gone(self) -> list[list[Any]]:
        if self._gone_read is None:
            # (entries are never changed in place: the decoded lists are kept as they are)
            self._gone_read = [g for g in self._gone_stored if type(g) is list and len(g) == 2]
        return self._gone_read

    def gone(self, response_id: str, reason: str) -> None:
        """Remember why ``response_id`` is not stored (the newest :data:`GONE_KEPT`)."""
        self._gone_read = [*self._gone, [response_id, reason]][-GONE_KEPT:]

    def gone_reason(self, response_id: str) -> str | None:
        for gone_id, reason in reversed(self._gone):
            if gone_id == response_id:
                return str(reason)
        return None

    def _write_tail(self) -> None:
        if self._tail is not None:  # written, then read from the documents again
            n, items = self._tail
            self.documents.put_document(f"{self.key}:{n}", {"items": items}, ttl=self.ttl)
            self._tail = None

    def save(self) -> None:
        """Write the last page if appended to, then the head (first and last page, totals,
        reasons, and a new token: another writer of the head since is then seen,
        :attr:`token`)."""
        self._write_tail()
        token = os.urandom(8).hex()
        head = {
            "first": self.first,
            "last": self.last,
            "bytes": self.bytes,
            "count": self.count,
            "gone": self._gone_stored if self._gone_read is None else self._gone_read,
            "token": token,
        }
        self.documents.put_document(self.key, head, ttl=self.ttl)
        self._token = token
