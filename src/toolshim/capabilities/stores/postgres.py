"""The PostgreSQL capability store: facts shared by several replicas, changes announced with NOTIFY.

Tables ``toolshim_facts`` (one row per upstream, model, fact and source), ``toolshim_models``
(models seen at each upstream), ``toolshim_documents`` (bounded JSON documents) and
``toolshim_schema`` (the schema version). :data:`MIGRATIONS` run on first connection, inside
a transaction that holds an advisory lock, so replicas starting at once migrate one at a
time and the others find the work done. Every write sends ``NOTIFY toolshim_facts`` with the
(upstream, model) it touched, delivered when it commits; :class:`PostgresWatch` listens on a
connection of its own and tells the registry, so every replica re-reads within milliseconds.

The server may be away: the store connects on first use (``connect_timeout`` 2 s), and any
method raises :class:`~toolshim.errors.StoreError` until it is back. The password in the URL
never appears in a message (:func:`~toolshim.capabilities.store.redact_url`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from toolshim.capabilities.facts import Fact, strongest
from toolshim.capabilities.store import (
    Changed,
    DocumentWrite,
    document_json,
    document_value,
)
from toolshim.capabilities.stores.base import Forgetting, SharedStore, layer_row, stored_fact
from toolshim.capabilities.stores.listening import ListeningWatch, Receive
from toolshim.extras import require

if TYPE_CHECKING:
    import psycopg

__all__ = ["CHANNEL", "MIGRATIONS", "PostgresStore", "PostgresWatch"]

log = logging.getLogger("toolshim.capabilities")

CHANNEL = "toolshim_facts"
"""The NOTIFY channel every write announces its (upstream, model) on."""

_LOCK_ID = 0x7001_5A1D
"""The advisory lock migrations hold (one number for every toolshim)."""

MIGRATIONS: list[tuple[str, ...]] = [
    # 1: facts per source, models seen, bounded documents.
    (
        """CREATE TABLE toolshim_facts (
            upstream   TEXT NOT NULL,
            model      TEXT NOT NULL,
            name       TEXT NOT NULL,
            source     TEXT NOT NULL,
            value      TEXT NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL,
            detail     TEXT NOT NULL DEFAULT '',
            PRIMARY KEY (upstream, model, name, source)
        )""",
        "CREATE INDEX toolshim_facts_by_model ON toolshim_facts (model)",
        """CREATE TABLE toolshim_models (
            upstream  TEXT NOT NULL,
            model     TEXT NOT NULL,
            last_seen DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (upstream, model)
        )""",
        """CREATE TABLE toolshim_documents (
            key        TEXT PRIMARY KEY,
            body       TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            expires_at DOUBLE PRECISION
        )""",
        "CREATE INDEX toolshim_documents_by_age ON toolshim_documents (created_at)",
    ),
]

_COLUMNS = "upstream, model, name, source, value, updated_at, detail"
T = TypeVar("T")


def _psycopg() -> Any:
    return require(
        "psycopg", "postgres", "a postgresql:// registry needs psycopg", param="registry"
    )


class PostgresStore(SharedStore):
    """Facts in PostgreSQL, shared by every replica that points at the same database."""

    def _connect_to(self, url: str, timeout: float) -> None:
        self._pg = _psycopg()
        self._url = url
        self._check_url()
        self._connect_timeout = max(1, round(timeout))
        self._lock = threading.Lock()
        self._conn: psycopg.Connection[Any] | None = None

    # -- connecting, migrating ----------------------------------------------------------------

    def _check_url(self) -> None:
        """ConfigError for a URL libpq cannot parse (an unknown parameter, a port that is not a
        number): a mistake to show at once, not a server that is away."""
        try:
            options = self._pg.conninfo.conninfo_to_dict(self._url)
        except self._pg.Error as exc:
            raise self._malformed(self._scrub(exc)) from exc
        for port in str(options.get("port") or "").split(","):
            if port and not port.isdigit():
                raise self._malformed(f"port {port!r} is not a number")

    def connect(self) -> psycopg.Connection[Any]:
        """A new autocommit connection (psycopg errors escape; :meth:`_run` translates them)."""
        conn: psycopg.Connection[Any] = self._pg.connect(
            self._url,
            autocommit=True,
            connect_timeout=self._connect_timeout,
            application_name="toolshim",
        )
        return conn

    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is not None and not self._conn.closed and not self._conn.broken:
            return self._conn
        if self._conn is not None:
            self._conn.close()
        self._conn = None
        conn = self.connect()
        try:
            self._migrate(conn)
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        return conn

    def _migrate(self, conn: psycopg.Connection[Any]) -> None:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_ID,))
            conn.execute("CREATE TABLE IF NOT EXISTS toolshim_schema (version INTEGER NOT NULL)")
            row = conn.execute("SELECT version FROM toolshim_schema").fetchone()
            version = int(row[0]) if row else 0
            self._check_schema(version, len(MIGRATIONS))
            for number, statements in enumerate(MIGRATIONS[version:], start=version + 1):
                for statement in statements:
                    conn.execute(statement)
                if row is None:
                    conn.execute("INSERT INTO toolshim_schema (version) VALUES (%s)", (number,))
                    row = (number,)
                else:
                    conn.execute("UPDATE toolshim_schema SET version = %s", (number,))
                log.info("migrated the capability store at %s to schema %d", self.location, number)

    def _run(self, work: Callable[[psycopg.Connection[Any]], T]) -> T:
        with self._lock:
            try:
                return work(self._connection())
            except self._pg.Error as exc:
                if self._conn is not None and (self._conn.broken or self._conn.closed):
                    self._conn = None
                raise self._unusable(exc) from exc

    def schema_version(self) -> int:
        row = self._run(lambda c: c.execute("SELECT version FROM toolshim_schema").fetchone())
        return int(row[0]) if row else 0

    # -- facts --------------------------------------------------------------------------------

    def rows(self, model: str, upstreams: Sequence[str]) -> list[tuple[str, Fact]]:
        if not upstreams:
            return []
        found = self._run(
            lambda c: c.execute(
                f"SELECT {_COLUMNS} FROM toolshim_facts WHERE model = %s AND upstream = ANY(%s)",
                (model, list(upstreams)),
            ).fetchall()
        )
        return [(str(r[0]), _fact(r)) for r in found]

    def snapshot(self) -> list[tuple[str, str, Fact]]:
        found = self._run(lambda c: c.execute(f"SELECT {_COLUMNS} FROM toolshim_facts").fetchall())
        return [(str(r[0]), str(r[1]), _fact(r)) for r in found]

    def put(self, upstream: str, model: str, fact: Fact) -> Fact:
        def work(conn: psycopg.Connection[Any]) -> list[Any]:
            with conn.transaction():
                conn.execute(
                    f"INSERT INTO toolshim_facts ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT (upstream, model, name, source) DO UPDATE SET "
                    "value = EXCLUDED.value, updated_at = EXCLUDED.updated_at, "
                    "detail = EXCLUDED.detail "
                    "WHERE EXCLUDED.updated_at >= toolshim_facts.updated_at",
                    layer_row(upstream, model, fact),
                )
                found = conn.execute(
                    f"SELECT {_COLUMNS} FROM toolshim_facts "
                    "WHERE upstream = %s AND model = %s AND name = %s",
                    (upstream, model, fact.name),
                ).fetchall()
                _notify(conn, upstream, model)
            return found

        winner = strongest(_fact(r) for r in self._run(work))
        return winner if winner is not None else fact

    def _forget(self, which: Forgetting) -> int:
        where, args = which.where("%s", lambda values: ("= ANY(%s)", [list(values)]))

        def work(conn: psycopg.Connection[Any]) -> int:
            with conn.transaction():
                removed = conn.execute(f"DELETE FROM toolshim_facts WHERE {where}", args).rowcount
                _notify(conn, which.upstream, which.model)
            return int(removed)

        return self._run(work)

    def _record_seen(self, rows: list[tuple[str, str, float]]) -> None:
        def work(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction(), conn.cursor() as cursor:
                cursor.executemany(
                    "INSERT INTO toolshim_models (upstream, model, last_seen) VALUES (%s, %s, %s) "
                    "ON CONFLICT (upstream, model) DO UPDATE SET last_seen = EXCLUDED.last_seen",
                    rows,
                )

        self._run(work)

    def _seen_rows(self) -> Iterable[Sequence[Any]]:
        sql = "SELECT upstream, model, last_seen FROM toolshim_models"
        return self._run(lambda c: c.execute(sql).fetchall())

    def watch(self, changed: Changed) -> PostgresWatch:
        return PostgresWatch(self, changed)

    # -- documents ----------------------------------------------------------------------------

    def put_document(self, key: str, document: Any, *, ttl: float | None = None) -> None:
        self.write_documents([DocumentWrite(key, document_json(key, document), ttl)])

    def write_documents(self, writes: Sequence[DocumentWrite]) -> None:
        now = time.time()

        def work(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction():
                for write in writes:
                    if write.body is None:
                        conn.execute("DELETE FROM toolshim_documents WHERE key = %s", (write.key,))
                        continue
                    conn.execute(
                        "INSERT INTO toolshim_documents (key, body, created_at, expires_at) "
                        "VALUES (%s, %s, %s, %s) ON CONFLICT (key) DO UPDATE SET "
                        "body = EXCLUDED.body, created_at = EXCLUDED.created_at, "
                        "expires_at = EXCLUDED.expires_at",
                        (
                            write.key,
                            write.body,
                            now,
                            None if write.ttl is None else now + write.ttl,
                        ),
                    )
                conn.execute("DELETE FROM toolshim_documents WHERE expires_at <= %s", (now,))
                conn.execute(
                    "DELETE FROM toolshim_documents WHERE key IN (SELECT key FROM "
                    "toolshim_documents ORDER BY created_at DESC, key DESC OFFSET %s)",
                    (self.document_limit,),
                )

        self._run(work)

    def get_document(self, key: str) -> Any | None:
        row = self._run(
            lambda c: c.execute(
                "SELECT body FROM toolshim_documents WHERE key = %s "
                "AND (expires_at IS NULL OR expires_at > %s)",
                (key, time.time()),
            ).fetchone()
        )
        return document_value(row[0]) if row else None

    def delete_document(self, key: str) -> bool:
        return self._run(
            lambda c: (
                c.execute("DELETE FROM toolshim_documents WHERE key = %s", (key,)).rowcount > 0
            )
        )

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


class PostgresWatch(ListeningWatch):
    """LISTENs on :data:`CHANNEL` on a connection of its own (a thread), calling ``changed``
    for each notification, and ``changed(None, None)`` each time it (re)connects: whatever
    happened while it was not listening must be re-read."""

    def __init__(self, store: PostgresStore, changed: Changed) -> None:
        self._store = store
        super().__init__(store.location, changed, store._pg.Error, store._scrub)

    @contextlib.contextmanager
    def _subscribed(self) -> Iterator[Receive]:
        with self._store.connect() as conn:
            conn.execute(f"LISTEN {CHANNEL}")
            yield lambda timeout: (note.payload for note in conn.notifies(timeout=timeout))


def _notify(conn: psycopg.Connection[Any], upstream: str | None, model: str) -> None:
    payload = json.dumps([upstream, model])
    if len(payload.encode()) > 7900:  # NOTIFY's limit is 8000 bytes: ask for a full re-read
        payload = "null"
    conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, payload))


def _fact(row: Sequence[Any]) -> Fact:
    _, _, name, source, value, updated_at, detail = row
    return stored_fact(name, lambda: (json.loads(value), updated_at, detail), source)
