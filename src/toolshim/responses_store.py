"""The bounded store of recent Responses API answers behind ``previous_response_id``.

Each stored response keeps its conversation (the input items, the earlier responses'
included) and its output items, under ``response:<id>``. The store is any object with
``put_document``/``get_document`` (:class:`Documents`): the capability registry's own
document store where it offers one (so several replicas on PostgreSQL or Redis share it),
else a small SQLite file beside the registry (``responses.sqlite3``), else memory. A store
keeps at most :data:`DEFAULT_LIMIT` responses (the oldest go first) and forgets one after
:data:`DEFAULT_TTL` seconds; a request with ``store: false`` leaves nothing in it.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from toolshim.errors import InvalidRequestError, StoreError

__all__ = [
    "DEFAULT_LIMIT",
    "DEFAULT_TTL",
    "Documents",
    "MemoryDocuments",
    "ResponseStore",
    "SQLiteDocuments",
    "open_response_store",
]

log = logging.getLogger("toolshim.server")

DEFAULT_LIMIT = 1000
"""How many responses a store keeps at most."""
DEFAULT_TTL = 30 * 24 * 3600.0
"""Seconds a stored response stays retrievable (OpenAI keeps them 30 days)."""
FILE_NAME = "responses.sqlite3"


class Documents(Protocol):
    """A key → JSON document store (the shape of the registry's document store)."""

    def put_document(self, key: str, document: Any, *, ttl: float | None = None) -> None: ...

    def get_document(self, key: str) -> Any | None: ...


class MemoryDocuments:
    """Documents in this process only, the oldest evicted beyond ``limit``."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.limit = limit
        self._items: OrderedDict[str, tuple[float | None, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def put_document(self, key: str, document: Any, *, ttl: float | None = None) -> None:
        expires = time.time() + ttl if ttl is not None else None
        with self._lock:
            self._items.pop(key, None)
            self._items[key] = (expires, json.loads(json.dumps(document)))
            while len(self._items) > self.limit:
                self._items.popitem(last=False)

    def get_document(self, key: str) -> Any | None:
        with self._lock:
            entry = self._items.get(key)
        if entry is None or (entry[0] is not None and entry[0] < time.time()):
            return None
        return entry[1]


class SQLiteDocuments:
    """Documents in a SQLite file (WAL, safe with several processes), the oldest evicted
    beyond ``limit``. A file that cannot be opened is a :class:`StoreError`."""

    def __init__(self, path: str | os.PathLike[str], *, limit: int = DEFAULT_LIMIT) -> None:
        self.path = str(path)
        self.limit = limit
        self._lock = threading.Lock()
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=10.0, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS documents (key TEXT PRIMARY KEY, body TEXT NOT NULL,"
                " stored_at REAL NOT NULL, expires_at REAL)"
            )
            self._db.execute("CREATE INDEX IF NOT EXISTS documents_age ON documents (stored_at)")
            self._db.commit()
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"cannot open the responses store at {self.path}: {exc}") from exc

    def __repr__(self) -> str:
        return f"SQLiteDocuments({self.path!r})"

    def put_document(self, key: str, document: Any, *, ttl: float | None = None) -> None:
        now = time.time()
        body = json.dumps(document, ensure_ascii=False)
        try:
            with self._lock, self._db:
                self._db.execute(
                    "INSERT OR REPLACE INTO documents (key, body, stored_at, expires_at)"
                    " VALUES (?, ?, ?, ?)",
                    (key, body, now, now + ttl if ttl is not None else None),
                )
                self._db.execute(
                    "DELETE FROM documents WHERE key IN (SELECT key FROM documents"
                    " ORDER BY stored_at DESC LIMIT -1 OFFSET ?) OR expires_at < ?",
                    (self.limit, now),
                )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot write the responses store at {self.path}: {exc}") from exc

    def get_document(self, key: str) -> Any | None:
        try:
            with self._lock:
                row = self._db.execute(
                    "SELECT body, expires_at FROM documents WHERE key = ?", (key,)
                ).fetchone()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read the responses store at {self.path}: {exc}") from exc
        if row is None or (row[1] is not None and row[1] < time.time()):
            return None
        return json.loads(row[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()


class ResponseStore:
    """Responses by id: what ``previous_response_id`` continues from."""

    def __init__(self, documents: Documents, *, ttl: float | None = DEFAULT_TTL) -> None:
        self.documents = documents
        self.ttl = ttl

    def __repr__(self) -> str:
        return f"ResponseStore({self.documents!r})"

    def save(self, response: Mapping[str, Any], input_items: Sequence[Mapping[str, Any]]) -> None:
        """Keep ``response`` with the conversation it answered. A store that fails is logged,
        not raised: the answer has been given already."""
        document = {"response": dict(response), "input": [dict(i) for i in input_items]}
        try:
            self.documents.put_document(f"response:{response['id']}", document, ttl=self.ttl)
        except StoreError as exc:
            log.warning("response %s not stored: %s", response.get("id"), exc.message)

    def conversation(self, response_id: str) -> list[dict[str, Any]]:
        """The items a request that continues ``response_id`` starts from: that response's
        input and output. An unknown (or expired, or never stored) id is an
        :class:`InvalidRequestError` (400)."""
        if not isinstance(response_id, str) or not response_id:
            raise InvalidRequestError(
                "previous_response_id must be a response id such as 'resp_…'",
                param="previous_response_id",
            )
        document = self.documents.get_document(f"response:{response_id}")
        if not isinstance(document, Mapping):
            raise InvalidRequestError(
                f"previous response {response_id!r} not found: toolshim keeps the last "
                f"responses sent with store: true (not those with store: false), for a while",
                param="previous_response_id",
                code="previous_response_not_found",
            )
        output = document["response"].get("output") or []
        return [*document.get("input", ()), *output]

    def get(self, response_id: str) -> dict[str, Any] | None:
        """The stored response object, or None."""
        document = self.documents.get_document(f"response:{response_id}")
        return dict(document["response"]) if isinstance(document, Mapping) else None


def open_response_store(registry: Any) -> ResponseStore:
    """The registry's document store when it has one; else ``responses.sqlite3`` beside the
    registry's SQLite file; else memory (a registry in memory, or a file that cannot be used)."""
    documents = getattr(registry, "documents", None)
    if documents is not None and hasattr(documents, "put_document"):
        return ResponseStore(documents)
    path = getattr(getattr(registry, "store", None), "path", None)
    if isinstance(path, str) and path != ":memory:" and "://" not in path:
        try:
            return ResponseStore(SQLiteDocuments(Path(path).with_name(FILE_NAME)))
        except StoreError as exc:
            log.warning("keeping responses in memory only: %s", exc.message)
    return ResponseStore(MemoryDocuments())
