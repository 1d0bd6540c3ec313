"""The capability stores, one module per kind: :mod:`.sqlite` (the default; opening the file is
:mod:`.sqlite_opening`), :mod:`.postgres` and :mod:`.redis` (shared by several replicas, with
:mod:`.listening` telling each replica what changed). They implement
:class:`~toolshim.capabilities.store.FactStore`; :func:`open_store` picks one from a
``--registry`` value. A kind's module is imported only when a store of that kind is opened:
the PostgreSQL and Redis clients are optional."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import SplitResult, unquote, urlsplit

from toolshim.capabilities.store import FactStore, default_store_path, redact_url
from toolshim.errors import ConfigError

__all__ = ["open_store"]


def open_store(where: str | os.PathLike[str] | None = None, *, timeout: float = 10.0) -> FactStore:
    """The store a ``--registry`` value names: a path or ``sqlite:///path`` (``":memory:"`` for a
    private one), ``postgresql://…``, ``redis://…`` (``valkey://`` too); None: the default.

    ConfigError for a scheme toolshim does not know or a client library that is not
    installed; StoreError for a SQLite file that cannot be used at all.
    """
    if where is None:
        where = os.environ.get("TOOLSHIM_REGISTRY") or default_store_path()
    text = os.fspath(where)
    if "://" not in text:
        from toolshim.capabilities.stores.sqlite import SQLiteStore

        return SQLiteStore(text if text == ":memory:" else Path(text).expanduser(), timeout=timeout)
    try:
        parts = urlsplit(text)
    except ValueError as exc:
        raise ConfigError(
            f"the registry URL {redact_url(text)!r} is malformed: {exc}", param="registry"
        ) from exc
    scheme = parts.scheme.lower()
    if scheme == "sqlite":
        from toolshim.capabilities.stores.sqlite import SQLiteStore

        return SQLiteStore(_sqlite_path(parts), timeout=timeout)
    if scheme in ("postgresql", "postgres"):
        from toolshim.capabilities.stores.postgres import PostgresStore

        return PostgresStore(text)
    if scheme in ("redis", "rediss", "valkey", "valkeys"):
        from toolshim.capabilities.stores.redis import RedisStore

        return RedisStore(text)
    raise ConfigError(
        f"unknown registry URL scheme {parts.scheme!r} in {redact_url(text)!r}; use a SQLite "
        "path, sqlite:///path, postgresql://user@host/db or redis://host:6379/0",
        param="registry",
    )


def _sqlite_path(parts: SplitResult) -> str:
    """The file a ``sqlite:`` URL names: ``sqlite:///abs/path`` (or ``sqlite:////abs/path``),
    ``sqlite:///:memory:`` or ``sqlite://`` for a private in-memory store."""
    path = unquote(parts.path)
    if parts.netloc:
        raise ConfigError(
            f"a sqlite: registry URL names a file, not a host ({parts.netloc!r}); "
            "write sqlite:///path/to/file.sqlite3",
            param="registry",
        )
    if path in ("", "/", "/:memory:"):
        return ":memory:"
    return "/" + path.lstrip("/")
