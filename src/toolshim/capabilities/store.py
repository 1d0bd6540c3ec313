"""The capability store: facts per (upstream, model) in SQLite, safe with several processes.

WAL journaling and ``BEGIN IMMEDIATE`` make each read-merge-write atomic across processes.
The schema is versioned with ``PRAGMA user_version`` and upgraded by the :data:`MIGRATIONS`
list. A file that is corrupt or not a database is moved aside (``<name>.corrupt-<time>``) with a
warning and a fresh store is built in its place: the store never crashes its caller.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import platformdirs

from toolshim.capabilities.facts import Fact, Source, merge
from toolshim.errors import StoreError

__all__ = ["MIGRATIONS", "CapabilityStore", "default_store_path"]

log = logging.getLogger("toolshim.capabilities")

MIGRATIONS: list[str] = [
    # 1: facts keyed by upstream, model and fact name.
    """
    CREATE TABLE facts (
        upstream   TEXT NOT NULL,
        model      TEXT NOT NULL,
        name       TEXT NOT NULL,
        value      TEXT NOT NULL,
        source     TEXT NOT NULL,
        updated_at REAL NOT NULL,
        detail     TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (upstream, model, name)
    );
    """,
]


def default_store_path() -> Path:
    """``TOOLSHIM_REGISTRY`` if set, else ``capabilities.sqlite3`` in the user data dir."""
    env = os.environ.get("TOOLSHIM_REGISTRY")
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_data_dir("toolshim")) / "capabilities.sqlite3"


class CapabilityStore:
    """Facts per (upstream, model) in a SQLite file (``":memory:"`` for a private store)."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *, timeout: float = 10.0):
        self.path = str(path) if path is not None else str(default_store_path())
        self._timeout = timeout
        self._lock = threading.Lock()
        self._conn = self._open()

    def __repr__(self) -> str:
        return f"CapabilityStore({self.path!r})"

    # -- opening, migrating, recovering -----------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        try:
            return self._connect()
        except sqlite3.DatabaseError as exc:
            if self.path == ":memory:":
                raise StoreError(f"cannot open an in-memory store: {exc}") from exc
            self._move_aside(exc)
            try:
                return self._connect()
            except sqlite3.Error as again:
                raise StoreError(
                    f"cannot rebuild the capability store at {self.path}: {again}"
                ) from again
        except OSError as exc:
            raise StoreError(f"cannot open the capability store at {self.path}: {exc}") from exc

    def _connect(self) -> sqlite3.Connection:
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(
            self.path, timeout=self._timeout, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self._timeout * 1000)}")
            if self.path != ":memory:":
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
            self._migrate(conn)
            conn.execute("SELECT count(*) FROM facts").fetchone()
        except sqlite3.Error:
            conn.close()
            raise
        return conn

    @staticmethod
    def _migrate(conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > len(MIGRATIONS):
                raise StoreError(
                    f"the capability store has schema version {version}, newer than this "
                    f"toolshim knows ({len(MIGRATIONS)}); upgrade toolshim"
                )
            for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
                conn.execute(script)
                conn.execute(f"PRAGMA user_version = {number}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _move_aside(self, exc: Exception) -> None:
        target = f"{self.path}.corrupt-{int(time.time())}"
        log.warning(
            "the capability store at %s is unreadable (%s); moved it to %s and started a new one",
            self.path,
            exc,
            target,
        )
        for suffix in ("", "-wal", "-shm"):
            try:
                os.replace(self.path + suffix, target + suffix)
            except FileNotFoundError:
                pass
            except OSError as err:
                raise StoreError(f"cannot move the corrupt store {self.path} aside: {err}") from err

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
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            else:
                self._conn.execute("COMMIT")

    # -- facts ------------------------------------------------------------------------------

    def get(self, upstream: str, model: str) -> dict[str, Fact]:
        """Every stored fact about ``model`` at ``upstream``, by name."""
        with self._lock:
            try:
                rows = self._conn.execute(
                    "SELECT name, value, source, updated_at, detail FROM facts "
                    "WHERE upstream = ? AND model = ?",
                    (upstream, model),
                ).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"cannot read the capability store at {self.path}: {exc}") from exc
        return {row[0]: _fact(row) for row in rows}

    def put(self, upstream: str, model: str, fact: Fact) -> Fact:
        """Merge ``fact`` into the store (a weaker source never wins); return the fact that stands."""
        with self._transaction() as conn:
            row = conn.execute(
                "SELECT name, value, source, updated_at, detail FROM facts "
                "WHERE upstream = ? AND model = ? AND name = ?",
                (upstream, model, fact.name),
            ).fetchone()
            winner = merge(_fact(row) if row else None, fact)
            if winner is fact:
                conn.execute(
                    "INSERT OR REPLACE INTO facts VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        upstream,
                        model,
                        fact.name,
                        json.dumps(fact.value),
                        fact.source.value,
                        fact.updated_at,
                        fact.detail,
                    ),
                )
        return winner

    def forget(self, upstream: str | None, model: str, names: list[str] | None = None) -> int:
        """Delete facts about ``model`` (at one upstream, or all when ``upstream`` is None)."""
        sql = "DELETE FROM facts WHERE model = ?"
        args: list[str] = [model]
        if upstream is not None:
            sql += " AND upstream = ?"
            args.append(upstream)
        if names:
            sql += f" AND name IN ({','.join('?' * len(names))})"
            args.extend(names)
        with self._transaction() as conn:
            return conn.execute(sql, args).rowcount

    def entries(self) -> list[tuple[str, str, dict[str, Fact]]]:
        """Every (upstream, model, facts) in the store, sorted."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT upstream, model, name, value, source, updated_at, detail FROM facts "
                "ORDER BY upstream, model, name"
            ).fetchall()
        out: dict[tuple[str, str], dict[str, Fact]] = {}
        for row in rows:
            out.setdefault((row[0], row[1]), {})[row[2]] = _fact(row[2:])
        return [(u, m, facts) for (u, m), facts in out.items()]

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def _fact(row: tuple[str, str, str, float, str]) -> Fact:
    name, value, source, updated_at, detail = row
    return Fact(name, json.loads(value), Source(source), float(updated_at), detail)
