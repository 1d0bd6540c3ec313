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
from urllib.parse import urlsplit

from toolshim.capabilities.facts import Fact, Source, strongest
from toolshim.capabilities.store import (
    DEFAULT_DOCUMENT_LIMIT,
    Changed,
    document_json,
    redact_url,
    scrub,
)
from toolshim.capabilities.stores.listening import ListeningWatch, Receive
from toolshim.errors import ConfigError, StoreError

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
    try:
        import psycopg
    except ImportError as exc:
        raise ConfigError(
            "a postgresql:// registry needs psycopg: pip install 'toolshim[postgres]'",
            param="registry",
        ) from exc
    return psycopg


class PostgresStore:
    """Facts in PostgreSQL, shared by every replica that points at the same database."""

    shared = True

    def __init__(
        self,
        url: str,
        *,
        connect_timeout: float = 2.0,
        document_limit: int = DEFAULT_DOCUMENT_LIMIT,
    ) -> None:
        self._pg = _psycopg()
        self._url = url
        self._secret = urlsplit(url).password
        self.location = redact_url(url)
        self._check_url()
        self.notices: tuple[str, ...] = ()
        self.document_limit = document_limit
        self._connect_timeout = max(1, round(connect_timeout))
        self._lock = threading.Lock()
        self._conn: psycopg.Connection[Any] | None = None
        try:
            self._run(lambda conn: None)  # connect and migrate now if the server is there
        except StoreError as exc:
            log.debug("%s", exc.message)

    def __repr__(self) -> str:
        return f"PostgresStore({self.location!r})"

    # -- connecting, migrating ----------------------------------------------------------------

    def _check_url(self) -> None:
        """ConfigError for a URL libpq cannot parse (an unknown parameter, a port that is not a
        number): a mistake to show at once, not a server that is away."""
        try:
            options = self._pg.conninfo.conninfo_to_dict(self._url)
        except self._pg.Error as exc:
            raise ConfigError(
                f"the registry URL {self.location!r} is malformed: {self._scrub(exc)}",
                param="registry",
            ) from exc
        for port in str(options.get("port") or "").split(","):
            if port and not port.isdigit():
                raise ConfigError(
                    f"the registry URL {self.location!r} is malformed: port {port!r} is not a "
                    "number",
                    param="registry",
                )

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
            if version > len(MIGRATIONS):
                raise StoreError(
                    f"the capability store at {self.location} has schema version {version}, "
                    f"newer than this toolshim knows ({len(MIGRATIONS)}); upgrade toolshim"
                )
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
                raise StoreError(
                    f"the capability store at {self.location} cannot be used: {self._scrub(exc)}"
                ) from exc

    def _scrub(self, exc: BaseException) -> str:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return scrub(text, self._secret)

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
                    (
                        upstream,
                        model,
                        fact.name,
                        fact.source.value,
                        json.dumps(fact.value),
                        fact.updated_at,
                        fact.detail,
                    ),
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

    def forget(
        self,
        upstream: str | None,
        model: str,
        names: Iterable[str] | None = None,
        sources: Iterable[Source] | None = None,
    ) -> int:
        sql = "DELETE FROM toolshim_facts WHERE model = %s"
        args: list[Any] = [model]
        if upstream is not None:
            sql += " AND upstream = %s"
            args.append(upstream)
        for column, values in (("name", names), ("source", sources)):
            chosen = [str(v) for v in values] if values is not None else []
            if chosen:
                sql += f" AND {column} = ANY(%s)"
                args.append(chosen)

        def work(conn: psycopg.Connection[Any]) -> int:
            with conn.transaction():
                removed = conn.execute(sql, args).rowcount
                _notify(conn, upstream, model)
            return int(removed)

        return self._run(work)

    def record_seen(
        self, upstream: str, models: Iterable[str], *, when: float | None = None
    ) -> None:
        stamp = time.time() if when is None else when
        rows = [(upstream, m, stamp) for m in models]
        if not rows:
            return

        def work(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction(), conn.cursor() as cursor:
                cursor.executemany(
                    "INSERT INTO toolshim_models (upstream, model, last_seen) VALUES (%s, %s, %s) "
                    "ON CONFLICT (upstream, model) DO UPDATE SET last_seen = EXCLUDED.last_seen",
                    rows,
                )

        self._run(work)

    def seen(self, upstream: str | None = None) -> list[tuple[str, str, float]]:
        sql = "SELECT upstream, model, last_seen FROM toolshim_models"
        args: tuple[str, ...] = ()
        if upstream is not None:
            sql += " WHERE upstream = %s"
            args = (upstream,)
        found = self._run(lambda c: c.execute(sql + " ORDER BY upstream, model", args).fetchall())
        return [(str(r[0]), str(r[1]), float(r[2])) for r in found]

    def watch(self, changed: Changed) -> PostgresWatch:
        return PostgresWatch(self, changed)

    # -- documents ----------------------------------------------------------------------------

    def put_document(self, key: str, document: Any, *, ttl: float | None = None) -> None:
        body = document_json(key, document)
        now = time.time()

        def work(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction():
                conn.execute(
                    "INSERT INTO toolshim_documents (key, body, created_at, expires_at) "
                    "VALUES (%s, %s, %s, %s) ON CONFLICT (key) DO UPDATE SET "
                    "body = EXCLUDED.body, created_at = EXCLUDED.created_at, "
                    "expires_at = EXCLUDED.expires_at",
                    (key, body, now, None if ttl is None else now + ttl),
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
        return json.loads(row[0]) if row else None

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
    try:
        return Fact(str(name), json.loads(value), Source(str(source)), float(updated_at), detail)
    except ValueError as exc:
        raise StoreError(f"unreadable fact {name!r} in the capability store: {exc}") from exc
