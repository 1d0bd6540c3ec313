"""The SQLite capability store: facts per (upstream, model, source) in one file, safe with several processes.

Every source keeps its own layer (one row per upstream, model, fact and source). WAL
journaling and ``BEGIN IMMEDIATE`` make each write atomic across processes. Opening the file
(migrations, recovery from corruption, read-only use) is
:mod:`toolshim.capabilities.stores.sqlite_opening`: a valid store toolshim may only read is used
read-only, and its writes raise :class:`~toolshim.errors.StoreError` (the registry keeps what
is learned in memory).
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from toolshim.capabilities.facts import Fact, strongest
from toolshim.capabilities.store import (
    DEFAULT_DOCUMENT_LIMIT,
    Changed,
    DocumentWrite,
    Watch,
    default_store_path,
    document_json,
    document_value,
    layers_by_name,
    standing_entries,
)
from toolshim.capabilities.stores.base import Forgetting, StoreFront, layer_row, stored_fact
from toolshim.capabilities.stores.sqlite_opening import MIGRATIONS, SQLiteOpening
from toolshim.errors import StoreError

__all__ = ["MIGRATIONS", "CapabilityStore", "SQLiteStore"]

log = logging.getLogger("toolshim.capabilities")

_COLUMNS = "upstream, model, name, source, value, updated_at, detail"
WRITTEN_KEPT = 64
"""How many of the documents it wrote a store serves again without reading them."""
EXPIRED_SWEEP_SECONDS = 60.0
"""How often a document write also deletes the expired documents (a scan of the table)."""


class SQLiteStore(StoreFront, SQLiteOpening):
    """Facts per (upstream, model) in a SQLite file (``":memory:"`` for a private store).

    Implements :class:`~toolshim.capabilities.store.FactStore` and
    :class:`~toolshim.capabilities.store.DocumentStore`.
    """

    shared = False

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        timeout: float = 10.0,
        document_limit: int = DEFAULT_DOCUMENT_LIMIT,
    ):
        self.path = str(path) if path is not None else str(default_store_path())
        self.document_limit = document_limit
        self.read_only = False
        self.moved_aside: str | None = None
        """The file a corrupt store was moved to when this one was opened."""
        self._notices: list[str] = []
        self._timeout = timeout
        self._lock = threading.Lock()
        self._swept = 0.0
        """When expired documents were last deleted (``time.time()``)."""
        self._counted: tuple[int, int] | None = None
        """(``PRAGMA data_version``, at most how many documents there are) as last known."""
        self._written: OrderedDict[str, tuple[str, float | None]] = OrderedDict()
        """The last documents this connection wrote (body, expires_at), newest last: what
        they are as long as ``PRAGMA data_version`` is still :attr:`_written_at`."""
        self._written_at: int | None = None
        self._conn = self._open()

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"

    @property
    def location(self) -> str:
        return self.path

    @property
    def notices(self) -> tuple[str, ...]:
        return tuple(self._notices)

    def schema_version(self) -> int:
        with self._lock:
            return int(self._conn.execute("PRAGMA user_version").fetchone()[0])

    def watch(self, changed: Changed) -> Watch | None:
        return None  # other processes' writes are seen by re-reading

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        if self.read_only:
            raise StoreError(f"the capability store at {self.path} is read-only")
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StoreError(
                    f"the capability store at {self.path} is busy or broken: {exc}"
                ) from exc
            try:
                yield self._conn
                self._conn.execute("COMMIT")
            except BaseException as exc:
                self._written.clear()  # what they hold may not have been committed
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise StoreError(
                        f"cannot write to the capability store at {self.path}: {exc}"
                    ) from exc
                raise

    def _query(self, sql: str, args: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return self._conn.execute(sql, args).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"cannot read the capability store at {self.path}: {exc}") from exc

    # -- facts ------------------------------------------------------------------------------

    def rows(self, model: str, upstreams: Sequence[str]) -> list[tuple[str, Fact]]:
        if not upstreams:
            return []
        marks = ",".join("?" * len(upstreams))
        found = self._query(
            f"SELECT {_COLUMNS} FROM facts WHERE model = ? AND upstream IN ({marks})",
            (model, *upstreams),
        )
        return [(str(row[0]), _fact(row)) for row in found]

    def snapshot(self) -> list[tuple[str, str, Fact]]:
        found = self._query(f"SELECT {_COLUMNS} FROM facts ORDER BY upstream, model, name")
        return [(str(row[0]), str(row[1]), _fact(row)) for row in found]

    def layers(self, upstream: str, model: str) -> dict[str, list[Fact]]:
        """Every stored fact about ``model`` at ``upstream``, by name, strongest first."""
        return layers_by_name(fact for _, fact in self.rows(model, [upstream]))

    def get(self, upstream: str, model: str) -> dict[str, Fact]:
        """The fact that stands for each name about ``model`` at ``upstream``."""
        return {name: facts[0] for name, facts in self.layers(upstream, model).items()}

    def entries(self) -> list[tuple[str, str, dict[str, Fact]]]:
        """Every (upstream, model, standing facts) in the store, sorted."""
        return standing_entries(self.snapshot())

    def put(self, upstream: str, model: str, fact: Fact) -> Fact:
        with self._transaction() as conn:
            conn.execute(
                f"INSERT INTO facts ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (upstream, model, name, source) DO UPDATE SET "
                "value = excluded.value, updated_at = excluded.updated_at, "
                "detail = excluded.detail WHERE excluded.updated_at >= facts.updated_at",
                layer_row(upstream, model, fact),
            )
            found = conn.execute(
                f"SELECT {_COLUMNS} FROM facts WHERE upstream = ? AND model = ? AND name = ?",
                (upstream, model, fact.name),
            ).fetchall()
        winner = strongest(_fact(row) for row in found)
        return winner if winner is not None else fact

    def _forget(self, which: Forgetting) -> int:
        where, args = which.where(
            "?", lambda values: (f"IN ({','.join('?' * len(values))})", list(values))
        )
        with self._transaction() as conn:
            return int(conn.execute(f"DELETE FROM facts WHERE {where}", args).rowcount)

    # -- models seen at an upstream -----------------------------------------------------------

    def _record_seen(self, rows: list[tuple[str, str, float]]) -> None:
        with self._transaction() as conn:
            conn.executemany(
                "INSERT INTO models (upstream, model, last_seen) VALUES (?, ?, ?) "
                "ON CONFLICT (upstream, model) DO UPDATE SET last_seen = excluded.last_seen",
                rows,
            )

    def _seen_rows(self) -> Iterable[Sequence[Any]]:
        return self._query("SELECT upstream, model, last_seen FROM models")

    # -- documents ----------------------------------------------------------------------------

    def put_document(self, key: str, document: Any, *, ttl: float | None = None) -> None:
        self.write_documents([DocumentWrite(key, document_json(key, document), ttl)])

    def write_documents(self, writes: Sequence[DocumentWrite]) -> None:
        now = time.time()
        with self._transaction() as conn:
            (version,) = conn.execute("PRAGMA data_version").fetchone()
            if version != self._written_at:
                self._written.clear()  # another connection wrote: any of them may be stale
            put = _write_rows(conn, writes, now)
            if now - self._swept >= EXPIRED_SWEEP_SECONDS:
                # a full scan (expires_at has no index): at most once a sweep period, since
                # an expired document is never read (get_document checks expires_at)
                conn.execute("DELETE FROM documents WHERE expires_at <= ?", (now,))
                self._swept = now
                self._counted = None
                self._written.clear()
            if self._keep_limit(conn, version, put):
                self._written.clear()  # which were deleted is not known here
            else:
                written = self._written
                for write in writes:
                    written.pop(write.key, None)
                    if write.body is not None:
                        expires_at = None if write.ttl is None else now + write.ttl
                        written[write.key] = (write.body, expires_at)
                while len(written) > WRITTEN_KEPT:
                    written.popitem(last=False)
            self._written_at = version

    def _keep_limit(self, conn: sqlite3.Connection, version: int, added: int) -> bool:
        """Delete the oldest documents beyond the limit (within a write transaction, after
        ``added`` documents were put; ``version`` is its ``PRAGMA data_version``). Counting
        walks an index of every document, so it is done only when the documents might be
        over the limit: while no other connection has written (``version`` unchanged), the
        last count plus the documents put since bounds the number from above (deletions only
        lower it). True when documents were deleted."""
        if self._counted is not None and self._counted[0] == version:
            bound = self._counted[1] + added
            if bound <= self.document_limit:
                self._counted = (version, bound)
                return False
        # the oldest beyond the limit, read along the created_at index (rowid breaks ties):
        # a count and an index walk of the surplus, not a sort of every document per write
        (count,) = conn.execute("SELECT count(*) FROM documents").fetchone()
        surplus = bool(count > self.document_limit)
        if surplus:
            conn.execute(
                "DELETE FROM documents WHERE rowid IN (SELECT rowid FROM documents "
                "ORDER BY created_at, rowid LIMIT ?)",
                (count - self.document_limit,),
            )
            count = self.document_limit
        self._counted = (version, count)
        return surplus

    def get_document(self, key: str) -> Any | None:
        return self.get_documents((key,))[0]

    def get_documents(self, keys: Sequence[str]) -> list[Any | None]:
        """The document under each key (None where there is none): those this connection
        wrote come from memory after one check that nobody else has written since."""
        now = time.time()
        bodies: list[str | None] = []
        with self._lock:
            try:
                written_here = self._written
                for key in keys if written_here else ():
                    if key in written_here:
                        (version,) = self._conn.execute("PRAGMA data_version").fetchone()
                        if version != self._written_at:
                            written_here.clear()  # another connection wrote: any may be stale
                        break
                for key in keys:
                    written = self._written.get(key)
                    if written is not None:
                        body, expires_at = written
                        bodies.append(body if expires_at is None or expires_at > now else None)
                        continue
                    found = self._conn.execute(
                        "SELECT body FROM documents WHERE key = ? "
                        "AND (expires_at IS NULL OR expires_at > ?)",
                        (key, now),
                    ).fetchall()
                    bodies.append(found[0][0] if found else None)
            except sqlite3.Error as exc:
                raise StoreError(f"cannot read the capability store at {self.path}: {exc}") from exc
        return [None if body is None else document_value(body) for body in bodies]

    def delete_document(self, key: str) -> bool:
        with self._transaction() as conn:
            self._written.pop(key, None)
            return int(conn.execute("DELETE FROM documents WHERE key = ?", (key,)).rowcount) > 0

    def close(self) -> None:
        with self._lock:
            self._conn.close()


_UPSERT = (
    "INSERT INTO documents (key, body, created_at, expires_at) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (key) DO UPDATE SET body = excluded.body, created_at = excluded.created_at, "
    "expires_at = excluded.expires_at"
)


def _write_rows(conn: sqlite3.Connection, writes: Sequence[DocumentWrite], now: float) -> int:
    """Make ``writes`` in their order (each run of puts in one statement); how many put."""
    put = 0
    run: list[tuple[str, str, float, float | None]] = []
    for write in writes:
        if write.body is None:
            if run:
                conn.executemany(_UPSERT, run)
                put += len(run)
                run = []
            conn.execute("DELETE FROM documents WHERE key = ?", (write.key,))
        else:
            expires_at = None if write.ttl is None else now + write.ttl
            run.append((write.key, write.body, now, expires_at))
    if run:
        conn.executemany(_UPSERT, run)
        put += len(run)
    return put


CapabilityStore = SQLiteStore
"""The SQLite store under its first name (``toolshim.CapabilityStore``)."""


def _fact(row: tuple[Any, ...]) -> Fact:
    _, _, name, source, value, updated_at, detail = row
    return stored_fact(name, lambda: (json.loads(str(value)), updated_at, detail), source)
