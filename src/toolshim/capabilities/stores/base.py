"""What the three capability stores share: the front of ``forget``, ``record_seen`` and
``seen`` (each store only deletes, writes or reads its rows), the SQL ``WHERE`` of a deletion, reading a stored layer back
into a :class:`~toolshim.capabilities.facts.Fact`, and for the shared stores (PostgreSQL,
Redis) their URL, password scrubbing, errors and the early connection attempt."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

from toolshim.capabilities.facts import Fact, Source
from toolshim.capabilities.store import DEFAULT_DOCUMENT_LIMIT, redact_url, scrub
from toolshim.errors import ConfigError, StoreError

__all__ = ["Forgetting", "SharedStore", "StoreFront", "layer_row", "stored_fact"]

log = logging.getLogger("toolshim.capabilities")

T = TypeVar("T")


@dataclass(frozen=True)
class Forgetting:
    """Which facts a ``forget`` deletes: those about ``model`` at ``upstream`` (at any when
    None), only those called ``names`` and from ``sources`` where these are given."""

    upstream: str | None
    model: str
    names: tuple[str, ...] | None
    sources: tuple[str, ...] | None

    def where(
        self, placeholder: str, one_of: Callable[[tuple[str, ...]], tuple[str, list[Any]]]
    ) -> tuple[str, list[Any]]:
        """The SQL condition and its arguments, ``placeholder`` standing for one argument and
        ``one_of(values)`` giving the test of a column against a list and its arguments."""
        sql = f"model = {placeholder}"
        args: list[Any] = [self.model]
        if self.upstream is not None:
            sql += f" AND upstream = {placeholder}"
            args.append(self.upstream)
        for column, chosen in (("name", self.names), ("source", self.sources)):
            if chosen:
                test, values = one_of(chosen)
                sql += f" AND {column} {test}"
                args += values
        return sql, args


class StoreFront:
    """The methods every store reads the same way around its own storage: a store implements
    ``_forget(which)``, ``_record_seen(rows)`` and ``_seen_rows()``."""

    def forget(
        self,
        upstream: str | None,
        model: str,
        names: Iterable[str] | None = None,
        sources: Iterable[Source] | None = None,
    ) -> int:
        return self._forget(
            Forgetting(
                upstream,
                model,
                None if names is None else tuple(str(n) for n in names),
                None if sources is None else tuple(str(s) for s in sources),
            )
        )

    def record_seen(
        self, upstream: str, models: Iterable[str], *, when: float | None = None
    ) -> None:
        stamp = time.time() if when is None else when
        rows = [(upstream, m, stamp) for m in models]
        if rows:
            self._record_seen(rows)

    def seen(self, upstream: str | None = None) -> list[tuple[str, str, float]]:
        return sorted(
            (str(where), str(model), float(stamp))
            for where, model, stamp in self._seen_rows()
            if upstream in (None, where)
        )

    def _forget(self, which: Forgetting) -> int:
        raise NotImplementedError

    def _seen_rows(self) -> Iterable[Sequence[Any]]:
        """Every (upstream, model, last seen) the store holds."""
        raise NotImplementedError

    def _record_seen(self, rows: list[tuple[str, str, float]]) -> None:
        raise NotImplementedError


def layer_row(upstream: str, model: str, fact: Fact) -> tuple[str, str, str, str, str, float, str]:
    """``fact`` as a SQL store's row: upstream, model, name, source, JSON value, updated_at,
    detail (the order :func:`stored_fact`'s callers read back)."""
    return (
        upstream,
        model,
        fact.name,
        fact.source.value,
        json.dumps(fact.value),
        fact.updated_at,
        fact.detail,
    )


def stored_fact(name: Any, value: Callable[[], tuple[Any, Any, Any]], source: Any) -> Fact:
    """The :class:`Fact` ``name`` read back from a store: ``value()`` gives its (value,
    updated_at, detail); StoreError when the layer cannot be read."""
    try:
        found, updated_at, detail = value()
        return Fact(str(name), found, Source(str(source)), float(updated_at), str(detail))
    except (ValueError, TypeError) as exc:
        raise StoreError(f"unreadable fact {name!r} in the capability store: {exc}") from exc


class SharedStore(StoreFront):
    """A store on a server several replicas share, given by URL: never shows the URL's
    password, and tries to connect (and migrate) when made, the server being allowed to be
    away (every method then raises StoreError until it is back). A store implements
    ``_connect_to(url, timeout)`` and ``_run(work)``."""

    shared = True

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 2.0,
        document_limit: int = DEFAULT_DOCUMENT_LIMIT,
    ) -> None:
        self._secret = urlsplit(url).password
        self.location = redact_url(url)
        self.notices: tuple[str, ...] = ()
        self.document_limit = document_limit
        self._connect_to(url, timeout)
        try:
            self._run(lambda conn: None)  # connect and migrate now if the server is there
        except StoreError as exc:
            log.debug("%s", exc.message)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.location!r})"

    def _connect_to(self, url: str, timeout: float) -> None:
        raise NotImplementedError

    def _run(self, work: Callable[[Any], T]) -> T:
        raise NotImplementedError

    def _scrub(self, exc: BaseException) -> str:
        text = str(exc).strip()
        return scrub(text.splitlines()[0] if text else type(exc).__name__, self._secret)

    def _malformed(self, why: str) -> ConfigError:
        return ConfigError(
            f"the registry URL {self.location!r} is malformed: {why}", param="registry"
        )

    def _unusable(self, exc: BaseException) -> StoreError:
        return StoreError(
            f"the capability store at {self.location} cannot be used: {self._scrub(exc)}"
        )

    def _check_schema(self, version: int, known: int) -> None:
        if version > known:
            raise StoreError(
                f"the capability store at {self.location} has schema version {version}, "
                f"newer than this toolshim knows ({known}); upgrade toolshim"
            )
