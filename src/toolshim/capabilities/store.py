"""The capability store: facts per (upstream, model, source) in SQLite, safe with several processes.

Every source keeps its own layer (one row per upstream, model, fact and source), so a weaker
fact is kept but never wins, and ``toolshim models show`` can say what each source said. WAL
journaling and ``BEGIN IMMEDIATE`` make each write atomic across processes. The schema is
versioned with ``PRAGMA user_version`` and upgraded by the :data:`MIGRATIONS` list.

A file that is corrupt or unreadable (garbage bytes, a truncated database, a directory in its
place, no permission) is moved aside to ``<name>.corrupt-<time>`` with a warning and a fresh
store is built in its place. A store that is busy, of a newer schema, or not toolshim's is
left alone and reported as :class:`~toolshim.errors.StoreError`; :meth:`Registry.open` then
keeps facts in memory. Either way the caller never crashes.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import platformdirs

from toolshim.capabilities.facts import Fact, Source, strongest
from toolshim.errors import StoreError

__all__ = ["MIGRATIONS", "CapabilityStore", "default_store_path"]

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
]

_OUR_TABLES = frozenset({"facts", "models", "facts_by_source"})
_COLUMNS = "upstream, model, name, source, value, updated_at, detail"
Row = tuple[str, str, str, str, str, float, str]


def default_store_path() -> Path:
    """``TOOLSHIM_REGISTRY`` if set, else ``capabilities.sqlite3`` in the user data dir."""
    env = os.environ.get("TOOLSHIM_REGISTRY")
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_data_dir("toolshim")) / "capabilities.sqlite3"


class CapabilityStore:
    """Facts per (upstream, model) in a SQLite file (``":memory:"`` for a private store).

    ``moved_aside`` names the file a corrupt store was moved to when this one was opened.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, timeout: float = 10.0):
        self.path = str(path) if path is not None else str(default_store_path())
        self.moved_aside: str | None = None
        self._timeout = timeout
        self._lock = threading.Lock()
        self._conn = self._open()

    def __repr__(self) -> str:
        return f"CapabilityStore({self.path!r})"

    @property
    def schema_version(self) -> int:
        with self._lock:
            return int(self._conn.execute("PRAGMA user_version").fetchone()[0])

    # -- opening, migrating, recovering -----------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        try:
            return self._connect_when_free()
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
            self._move_aside(exc)
        try:
            return self._connect()
        except (sqlite3.Error, OSError) as again:
            raise StoreError(
                f"cannot rebuild the capability store at {self.path}: {again}"
            ) from again

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
            check = conn.execute("PRAGMA quick_check").fetchone()
            if not check or check[0] != "ok":
                raise sqlite3.DatabaseError(f"integrity check failed: {check and check[0]}")
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
        log.warning(
            "the capability store at %s was unreadable (%s); moved it to %s and started a new one",
            self.path,
            exc,
            target,
        )

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
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
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise StoreError(
                        f"cannot write to the capability store at {self.path}: {exc}"
                    ) from exc
                raise

    def _query(self, sql: str, args: Sequence[object] = ()) -> list[tuple[object, ...]]:
        with self._lock:
            try:
                return self._conn.execute(sql, args).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"cannot read the capability store at {self.path}: {exc}") from exc

    # -- facts ------------------------------------------------------------------------------

    def rows(self, model: str, upstreams: Sequence[str]) -> list[tuple[str, Fact]]:
        """Every stored layer about ``model`` at any of ``upstreams``, as (upstream, fact)."""
        if not upstreams:
            return []
        marks = ",".join("?" * len(upstreams))
        found = self._query(
            f"SELECT {_COLUMNS} FROM facts WHERE model = ? AND upstream IN ({marks})",
            (model, *upstreams),
        )
        return [(str(row[0]), _fact(row)) for row in found]

    def layers(self, upstream: str, model: str) -> dict[str, list[Fact]]:
        """Every stored fact about ``model`` at ``upstream``, by name, strongest first."""
        out: dict[str, list[Fact]] = {}
        for _, fact in self.rows(model, [upstream]):
            out.setdefault(fact.name, []).append(fact)
        for facts in out.values():
            facts.sort(key=lambda f: (f.source.rank, f.updated_at), reverse=True)
        return out

    def get(self, upstream: str, model: str) -> dict[str, Fact]:
        """The fact that stands for each name about ``model`` at ``upstream``."""
        return {name: facts[0] for name, facts in self.layers(upstream, model).items()}

    def put(self, upstream: str, model: str, fact: Fact) -> Fact:
        """Store ``fact`` in its source's layer (a newer fact from the same source replaces an
        older one); return the fact that stands afterwards, which may be a stronger one."""
        with self._transaction() as conn:
            conn.execute(
                f"INSERT INTO facts ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (upstream, model, name, source) DO UPDATE SET "
                "value = excluded.value, updated_at = excluded.updated_at, "
                "detail = excluded.detail WHERE excluded.updated_at >= facts.updated_at",
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
                f"SELECT {_COLUMNS} FROM facts WHERE upstream = ? AND model = ? AND name = ?",
                (upstream, model, fact.name),
            ).fetchall()
        winner = strongest(_fact(row) for row in found)
        return winner if winner is not None else fact

    def forget(
        self,
        upstream: str | None,
        model: str,
        names: Iterable[str] | None = None,
        sources: Iterable[Source] | None = None,
    ) -> int:
        """Delete facts about ``model`` (at one upstream, or all when ``upstream`` is None),
        optionally only the facts called ``names`` or from ``sources``; return how many."""
        sql = "DELETE FROM facts WHERE model = ?"
        args: list[str] = [model]
        if upstream is not None:
            sql += " AND upstream = ?"
            args.append(upstream)
        for column, values in (("name", names), ("source", sources)):
            chosen = [str(v) for v in values] if values is not None else []
            if chosen:
                sql += f" AND {column} IN ({','.join('?' * len(chosen))})"
                args.extend(chosen)
        with self._transaction() as conn:
            return int(conn.execute(sql, args).rowcount)

    def entries(self) -> list[tuple[str, str, dict[str, Fact]]]:
        """Every (upstream, model, standing facts) in the store, sorted."""
        out: dict[tuple[str, str], list[Fact]] = {}
        for row in self._query(f"SELECT {_COLUMNS} FROM facts ORDER BY upstream, model, name"):
            out.setdefault((str(row[0]), str(row[1])), []).append(_fact(row))
        result = []
        for (upstream, model), facts in out.items():
            by_name: dict[str, list[Fact]] = {}
            for fact in facts:
                by_name.setdefault(fact.name, []).append(fact)
            standing = {n: strongest(fs) for n, fs in by_name.items()}
            result.append((upstream, model, {n: f for n, f in standing.items() if f is not None}))
        return result

    # -- models seen at an upstream -----------------------------------------------------------

    def record_seen(
        self, upstream: str, models: Iterable[str], *, when: float | None = None
    ) -> None:
        """Remember that ``models`` were listed by ``upstream`` (seed 004's ``last_seen``)."""
        stamp = time.time() if when is None else when
        rows = [(upstream, m, stamp) for m in models]
        if not rows:
            return
        with self._transaction() as conn:
            conn.executemany(
                "INSERT INTO models (upstream, model, last_seen) VALUES (?, ?, ?) "
                "ON CONFLICT (upstream, model) DO UPDATE SET last_seen = excluded.last_seen",
                rows,
            )

    def seen(self, upstream: str | None = None) -> list[tuple[str, str, float]]:
        """(upstream, model, last_seen) for models listed by ``upstream`` (or by any)."""
        sql = "SELECT upstream, model, last_seen FROM models"
        args: tuple[str, ...] = ()
        if upstream is not None:
            sql += " WHERE upstream = ?"
            args = (upstream,)
        rows = self._query(sql + " ORDER BY upstream, model", args)
        return [(str(r[0]), str(r[1]), float(r[2])) for r in rows]  # type: ignore[arg-type]

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def _transient(exc: sqlite3.Error) -> bool:
    text = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


def _foreign_tables(conn: sqlite3.Connection) -> set[str]:
    names = {
        str(row[0])
        for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    }
    return names - _OUR_TABLES


def _fact(row: tuple[object, ...]) -> Fact:
    _, _, name, source, value, updated_at, detail = row
    try:
        return Fact(
            str(name),
            json.loads(str(value)),
            Source(str(source)),
            float(updated_at),  # type: ignore[arg-type]
            str(detail),
        )
    except ValueError as exc:
        raise StoreError(f"unreadable fact {name!r} in the capability store: {exc}") from exc
