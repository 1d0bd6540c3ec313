"""Opening the SQLite capability file: schema migrations, recovery from corruption, read-only use.

:class:`SQLiteOpening` is the part of :class:`~toolshim.capabilities.stores.sqlite.SQLiteStore`
that turns a path into a connection. The schema is versioned with ``PRAGMA user_version`` and
upgraded by the :data:`MIGRATIONS` list, in one ``BEGIN IMMEDIATE`` transaction (processes
opening a new file at once migrate one at a time). Only real corruption moves a file aside (a
file that is not a database, a damaged one, a directory in its place): it is renamed
``<name>.corrupt-<time>`` with a notice and a fresh store is built. A valid store that toolshim
may read but not write is used read-only with a notice. A store that is busy, unreadable, of a
newer schema, or not toolshim's is left alone and reported as
:class:`~toolshim.errors.StoreError`.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from pathlib import Path
from urllib.parse import quote

from toolshim.errors import StoreError

__all__ = ["MIGRATIONS", "SQLiteOpening"]

log = logging.getLogger("toolshim.capabilities")

MIGRATIONS: list[tuple[str, ...]] = [
    # 1: one fact per upstream, model and name (the winner only).
    (
        """CREATE TABLE facts (
            upstream   TEXT NOT NULL,
            model      TEXT NOT NULL,
            name       TEXT NOT NULL,
            value      TEXT NOT NULL,
            source     TEXT NOT NULL,
            updated_at REAL NOT NULL,
            detail     TEXT NOT NULL DEFAULT '',
            PRIMARY KEY (upstream, model, name)
        )""",
    ),
    # 2: one layer per source (weaker facts are kept, never win); models seen at each upstream.
    (
        """CREATE TABLE facts_by_source (
            upstream   TEXT NOT NULL,
            model      TEXT NOT NULL,
            name       TEXT NOT NULL,
            source     TEXT NOT NULL,
            value      TEXT NOT NULL,
            updated_at REAL NOT NULL,
            detail     TEXT NOT NULL DEFAULT '',
            PRIMARY KEY (upstream, model, name, source)
        )""",
        """INSERT INTO facts_by_source (upstream, model, name, source, value, updated_at, detail)
           SELECT upstream, model, name, source, value, updated_at, detail FROM facts""",
        "DROP TABLE facts",
        "ALTER TABLE facts_by_source RENAME TO facts",
        "CREATE INDEX facts_by_model ON facts (model)",
        """CREATE TABLE models (
            upstream  TEXT NOT NULL,
            model     TEXT NOT NULL,
            last_seen REAL NOT NULL,
            detail    TEXT NOT NULL DEFAULT '',
            PRIMARY KEY (upstream, model)
        )""",
    ),
    # 3: bounded JSON documents (the Responses API's previous_response_id, shared state).
    (
        """CREATE TABLE documents (
            key        TEXT PRIMARY KEY,
            body       TEXT NOT NULL,
            created_at REAL NOT NULL,
            expires_at REAL
        )""",
        "CREATE INDEX documents_by_age ON documents (created_at)",
    ),
]

_OUR_TABLES = frozenset({"facts", "models", "facts_by_source", "documents"})
_CORRUPT_CODES = frozenset({11, 26})  # SQLITE_CORRUPT, SQLITE_NOTADB
_READONLY_CODE = 8  # SQLITE_READONLY (and its extended codes)


class _Damaged(sqlite3.DatabaseError):
    """The file opened but failed SQLite's integrity check."""


class SQLiteOpening:
    """Opens ``path`` (see the module): what :class:`SQLiteStore` is built on. Sets
    ``read_only``, ``moved_aside`` and the notices of what happened."""

    path: str
    read_only: bool
    moved_aside: str | None
    _notices: list[str]
    _timeout: float

    def _open(self) -> sqlite3.Connection:
        try:
            conn = self._connect_when_free()
            if self.path != ":memory:" and not _writable(self.path):
                # SQLite opened it read-only by itself: say so, and never try to write.
                self._use_read_only("no permission to write it")
            return conn
        except StoreError:
            raise
        except OSError as exc:
            raise StoreError(f"cannot open the capability store at {self.path}: {exc}") from exc
        except sqlite3.Error as exc:
            if _transient(exc):
                raise StoreError(
                    f"the capability store at {self.path} is busy ({exc}); try again"
                ) from exc
            if self.path == ":memory:" or not os.path.lexists(self.path):
                raise StoreError(
                    f"cannot create the capability store at {self.path}: {exc}"
                ) from exc
            if not os.path.isdir(self.path) and not _corrupt(exc):
                if _read_only(exc) or not _writable(self.path):
                    return self._open_read_only(exc)
                raise StoreError(
                    f"cannot use the capability store at {self.path} ({exc}); it was left as it is"
                ) from exc
            self._move_aside(exc)
        try:
            return self._connect()
        except (sqlite3.Error, OSError) as again:
            raise StoreError(
                f"cannot rebuild the capability store at {self.path}: {again}"
            ) from again

    def _open_read_only(self, cause: sqlite3.Error) -> sqlite3.Connection:
        """A valid store toolshim may not write: used read-only, with a notice."""
        last: sqlite3.Error = cause
        for flags in ("mode=ro", "immutable=1"):  # immutable: no -shm can be made beside it
            try:
                conn = sqlite3.connect(
                    f"file:{quote(self.path)}?{flags}",
                    uri=True,
                    timeout=self._timeout,
                    isolation_level=None,
                    check_same_thread=False,
                )
            except sqlite3.Error as exc:
                last = exc
                continue
            try:
                version = self._check_ours(conn)
                if version != len(MIGRATIONS):
                    raise StoreError(
                        f"the capability store at {self.path} is read-only and has schema "
                        f"version {version}; this toolshim needs {len(MIGRATIONS)} and cannot "
                        "upgrade it: make it writable or pass another --registry"
                    )
                _integrity(conn)
                conn.execute("SELECT count(*) FROM facts").fetchone()
            except sqlite3.Error as exc:
                conn.close()
                last = exc
                continue
            except BaseException:
                conn.close()
                raise
            self._use_read_only(str(cause))
            return conn
        raise StoreError(
            f"the capability store at {self.path} cannot be written ({cause}) nor read ({last}); "
            "it was left as it is"
        ) from last

    def _use_read_only(self, why: str) -> None:
        self.read_only = True
        self._notices.append(
            f"the capability store at {self.path} is read-only ({why}); its facts are used, "
            "what is learned now is kept in memory only"
        )
        log.warning("%s", self._notices[-1])

    def _connect_when_free(self) -> sqlite3.Connection:
        """:meth:`_connect`, tried again while another process holds the file (opening runs
        steps SQLite's busy timeout does not cover, such as the journal-mode change), until
        the store's timeout."""
        deadline = time.monotonic() + self._timeout
        pause = 0.02
        while True:
            try:
                return self._connect()
            except sqlite3.OperationalError as exc:
                if not _transient(exc) or time.monotonic() + pause > deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, 0.5)

    def _connect(self) -> sqlite3.Connection:
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(
            self.path, timeout=self._timeout, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self._timeout * 1000)}")
            self._check_ours(conn)  # before anything writes to a file that may not be ours
            if self.path != ":memory:":
                # WAL stays set in the file: only the first opening has to switch (and take
                # the exclusive lock that switching needs).
                mode = conn.execute("PRAGMA journal_mode").fetchone()
                if not mode or str(mode[0]).lower() != "wal":
                    conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
            self._migrate(conn)
            _integrity(conn)
            conn.execute("SELECT count(*) FROM facts").fetchone()
        except BaseException:
            conn.close()
            raise
        return conn

    def _check_ours(self, conn: sqlite3.Connection) -> int:
        """The schema version; StoreError for a newer toolshim's store or another program's
        database (both are left untouched)."""
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if version > len(MIGRATIONS):
            raise StoreError(
                f"the capability store at {self.path} has schema version {version}, newer "
                f"than this toolshim knows ({len(MIGRATIONS)}); upgrade toolshim or pass "
                "another --registry"
            )
        if version == 0:
            foreign = _foreign_tables(conn)
            if foreign:
                raise StoreError(
                    f"{self.path} is a SQLite database but not a toolshim capability store "
                    f"(it has tables {', '.join(sorted(foreign))}); pass another --registry"
                )
        return version

    def _migrate(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = self._check_ours(conn)  # again: another process may have migrated
            for number, statements in enumerate(MIGRATIONS[version:], start=version + 1):
                for statement in statements:
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {number}")
                if version:
                    log.info("upgraded the capability store at %s to schema %d", self.path, number)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _move_aside(self, exc: Exception) -> None:
        target = f"{self.path}.corrupt-{int(time.time())}"
        for n in range(1, 1000):
            if not any(os.path.lexists(target + x) for x in ("", "-wal", "-shm")):
                break
            target = f"{self.path}.corrupt-{int(time.time())}-{n}"
        for suffix in ("", "-wal", "-shm"):
            try:
                os.replace(self.path + suffix, target + suffix)
            except FileNotFoundError:
                pass
            except OSError as err:
                raise StoreError(
                    f"the capability store at {self.path} is unreadable ({exc}) and cannot be "
                    f"moved aside: {err}"
                ) from err
        self.moved_aside = target
        self._notices.append(
            f"the capability store at {self.path} was corrupt ({exc}); moved it to {target} "
            "and started a new one"
        )
        log.warning("%s", self._notices[-1])


def _code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def _transient(exc: sqlite3.Error) -> bool:
    text = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


def _corrupt(exc: sqlite3.Error) -> bool:
    """True only for a file that is not a database or is damaged (never for I/O or permission)."""
    if isinstance(exc, _Damaged) or _code(exc) in _CORRUPT_CODES:
        return True
    text = str(exc).lower()
    return "not a database" in text or "malformed" in text


def _read_only(exc: sqlite3.Error) -> bool:
    return _code(exc) == _READONLY_CODE or "readonly" in str(exc).lower().replace("-", "")


def _writable(path: str) -> bool:
    """Whether this process may write the store and make its journal files beside it."""
    return os.access(path, os.W_OK) and os.access(os.path.dirname(path) or ".", os.W_OK)


def _integrity(conn: sqlite3.Connection) -> None:
    check = conn.execute("PRAGMA quick_check").fetchone()
    if not check or check[0] != "ok":
        raise _Damaged(f"integrity check failed: {check and check[0]}")


def _foreign_tables(conn: sqlite3.Connection) -> set[str]:
    names = {
        str(row[0])
        for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    }
    return names - _OUR_TABLES
