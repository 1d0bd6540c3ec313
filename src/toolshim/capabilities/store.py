"""The capability store interface (a Protocol) and what every store shares; the stores are in
:mod:`toolshim.capabilities.stores`, whose :func:`~toolshim.capabilities.stores.open_store` picks one.

A store keeps facts per (upstream, model, fact name, source): every source its own layer, so a
weaker fact is kept but never wins (precedence is decided in one place,
:func:`~toolshim.capabilities.facts.merge`, never by a store). Three implementations share one
conformance suite (``tests/registry``):

=================  ========================  ==================================================
``--registry``     store                     for
=================  ========================  ==================================================
a path,            ``SQLiteStore``           one machine (the default): WAL, several processes,
``sqlite:///p``                              no server to run
``postgresql://``  ``PostgresStore``         several replicas, durable records; LISTEN/NOTIFY
                                             tells every replica what changed
``redis://``       ``RedisStore``            several replicas, fast shared state (Valkey too:
                                             ``valkey://``); pub/sub tells what changed
=================  ========================  ==================================================

A shared store (PostgreSQL, Redis) never needs its server to be up to be constructed: it
connects (and migrates) on first use and raises :class:`~toolshim.errors.StoreError` from any
method while its server is away; the :class:`~toolshim.capabilities.registry.Registry` keeps
serving from its cache meanwhile. Each store also offers a bounded key → JSON document store
(:class:`DocumentStore`), for state that must follow a conversation across replicas (the
Responses API's ``previous_response_id``).

Credentials in a URL are never shown: :attr:`FactStore.location` is the URL with the password
replaced by ``***`` (:func:`redact_url`), and every error message quotes that form.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit

import orjson
import platformdirs

from toolshim.capabilities.facts import Fact, Source, strongest
from toolshim.errors import StoreError

__all__ = [
    "DEFAULT_DOCUMENT_LIMIT",
    "MAX_DOCUMENT_BYTES",
    "SCHEMES",
    "Changed",
    "DocumentStore",
    "DocumentWrite",
    "FactStore",
    "Watch",
    "compact_json",
    "default_store_path",
    "document_json",
    "document_text",
    "document_value",
    "layers_by_name",
    "redact_url",
    "scrub",
    "standing_entries",
]

SCHEMES = ("sqlite", "postgresql", "postgres", "redis", "rediss", "valkey", "valkeys")
"""The URL schemes ``--registry`` accepts (anything without ``://`` is a SQLite path)."""

DEFAULT_DOCUMENT_LIMIT = 10_000
"""How many documents a store keeps at most before the oldest are evicted."""

MAX_DOCUMENT_BYTES = 4 * 1024 * 1024
"""The largest JSON document a store accepts (its serialised size)."""

Changed = Callable[[str | None, str | None], None]
"""Called by a store's watch when facts changed: ``(upstream, model)``; ``(None, model)`` for
``model`` at any upstream; ``(None, None)`` when anything may have changed (the watch had lost
its connection and has it again: the backend is back)."""


class Watch(Protocol):
    """A running subscription to a store's change notifications."""

    def close(self) -> None:
        """Stop listening (joins the listening thread)."""


class FactStore(Protocol):
    """What the registry needs from a place that keeps capability facts.

    Methods raise :class:`~toolshim.errors.StoreError` when the store cannot be used (its
    server is away, the file is read-only); nothing else escapes them.
    """

    @property
    def location(self) -> str:
        """Where the store is, fit to show (a path, or the URL without its password)."""
        ...

    @property
    def notices(self) -> tuple[str, ...]:
        """What the person running toolshim should be told about opening this store (a
        corrupt file moved aside, a read-only file used read-only); empty when all is well."""
        ...

    @property
    def shared(self) -> bool:
        """True when other machines may write to this store (it then supports :meth:`watch`)."""
        ...

    def schema_version(self) -> int:
        """The version of the store's schema (the number of migrations applied)."""
        ...

    def rows(self, model: str, upstreams: Sequence[str]) -> list[tuple[str, Fact]]:
        """Every stored layer about ``model`` at any of ``upstreams``, as (upstream, fact)."""
        ...

    def snapshot(self) -> list[tuple[str, str, Fact]]:
        """Every stored layer, as (upstream, model, fact)."""
        ...

    def put(self, upstream: str, model: str, fact: Fact) -> Fact:
        """Store ``fact`` in its source's layer (an older fact from the same source never
        replaces a newer one); return the fact that stands afterwards for its name."""
        ...

    def forget(
        self,
        upstream: str | None,
        model: str,
        names: Iterable[str] | None = None,
        sources: Iterable[Source] | None = None,
    ) -> int:
        """Delete facts about ``model`` (at ``upstream``, or at all when None), optionally only
        those called ``names`` or from ``sources``; return how many were deleted."""
        ...

    def record_seen(
        self, upstream: str, models: Iterable[str], *, when: float | None = None
    ) -> None:
        """Remember that ``upstream`` listed ``models`` (at ``when``, default now)."""
        ...

    def seen(self, upstream: str | None = None) -> list[tuple[str, str, float]]:
        """(upstream, model, last_seen) for the models ``upstream`` (or any) listed, sorted."""
        ...

    def watch(self, changed: Changed) -> Watch | None:
        """Call ``changed`` (from a thread of the store's own) whenever a fact is written or
        forgotten by anyone; None when the store cannot tell (then readers re-read)."""
        ...

    def close(self) -> None:
        """Release connections; the store is not used afterwards."""
        ...


@dataclass(frozen=True, slots=True)
class DocumentWrite:
    """One change in :meth:`DocumentStore.write_documents`: ``body`` (a document as
    :func:`document_json` made it) kept under ``key`` for ``ttl`` seconds, or, when ``body``
    is None, the document under ``key`` deleted."""

    key: str
    body: str | None
    ttl: float | None = None


class DocumentStore(Protocol):
    """A small bounded key → JSON document store on the same backend as the facts.

    For state that several replicas must share, such as a Responses API conversation behind
    ``previous_response_id``. Keys are the caller's (namespace them: ``"response:<id>"``).
    A store keeps at most ``document_limit`` documents (the oldest are evicted first) of at
    most :data:`MAX_DOCUMENT_BYTES` each, and forgets a document once its ``ttl`` has passed.
    """

    def put_document(self, key: str, document: Any, *, ttl: float | None = None) -> None:
        """Keep ``document`` (anything JSON can hold) under ``key`` for ``ttl`` seconds (None:
        until evicted by the limit); replaces what was there. StoreError when it is too big."""
        ...

    def get_document(self, key: str) -> Any | None:
        """The document under ``key``, or None if there is none (or it expired)."""
        ...

    def delete_document(self, key: str) -> bool:
        """Remove the document under ``key``; True if there was one."""
        ...

    def write_documents(self, writes: Sequence[DocumentWrite]) -> None:
        """Make ``writes`` in order, all or none (one transaction; the limit is kept once,
        after them): several documents changed together cost one round trip and one commit."""
        ...


def default_store_path() -> Path:
    """``TOOLSHIM_REGISTRY`` if it is a path, else ``capabilities.sqlite3`` in the user data dir."""
    env = os.environ.get("TOOLSHIM_REGISTRY")
    if env and "://" not in env:
        return Path(env).expanduser()
    return Path(platformdirs.user_data_dir("toolshim")) / "capabilities.sqlite3"


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (the user name stays); a path unchanged."""
    if "://" not in url:
        return url
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return url.split("://", 1)[0] + "://***"
    if password is None and "@" not in parts.netloc:
        return url
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user = userinfo.split(":", 1)[0]
    shown = f"{user}:***" if password is not None else (user or "***")
    return parts._replace(netloc=f"{shown}@{hostport}").geturl()


def scrub(text: str, secret: str | None) -> str:
    """``text`` with ``secret`` (a URL's password, as written or percent-decoded) as ``***``."""
    if not secret:
        return text
    for form in {secret, unquote(secret)}:
        text = text.replace(form, "***")
    return text


def layers_by_name(found: Iterable[Fact]) -> dict[str, list[Fact]]:
    """``found`` grouped by fact name, strongest first within each name."""
    out: dict[str, list[Fact]] = {}
    for fact in found:
        out.setdefault(fact.name, []).append(fact)
    for facts in out.values():
        facts.sort(key=lambda f: (f.source.rank, f.updated_at), reverse=True)
    return out


def standing_entries(
    rows: Iterable[tuple[str, str, Fact]],
) -> list[tuple[str, str, dict[str, Fact]]]:
    """(upstream, model, the fact that stands for each name) for every model in ``rows``, sorted."""
    grouped: dict[tuple[str, str], list[Fact]] = {}
    for upstream, model, fact in rows:
        grouped.setdefault((upstream, model), []).append(fact)
    out = []
    for (upstream, model), facts in sorted(grouped.items()):
        by_name: dict[str, Fact] = {}
        for name, layers in sorted(layers_by_name(facts).items()):
            winner = strongest(layers)
            if winner is not None:
                by_name[name] = winner
        out.append((upstream, model, by_name))
    return out


_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def compact_json(value: Any) -> str:
    """``value`` as ``json.dumps(value, ensure_ascii=False, separators=(",", ":"))`` writes it,
    without building an encoder per call (the encoder holds no state between calls)."""
    return _COMPACT.encode(value)


def document_json(key: str, document: Any) -> str:
    """``document`` as compact JSON text; StoreError if it is not JSON or is too big."""
    try:
        body = _COMPACT.encode(document)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"document {key!r} is not JSON: {exc}") from exc
    return document_text(key, body)


def document_value(body: str | bytes) -> Any:
    """The document ``body`` holds (JSON text): orjson reads it, and what orjson refuses
    (NaN, integers beyond 64 bits, lone surrogates) ``json`` reads, so any text
    :func:`document_json` wrote comes back as it would from ``json.loads``."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return json.loads(body)


def document_text(key: str, body: str) -> str:
    """``body`` (a document already written as :func:`document_json` writes it), or StoreError
    if it is too big to store."""
    if len(body) * 4 > MAX_DOCUMENT_BYTES and len(body.encode()) > MAX_DOCUMENT_BYTES:
        raise StoreError(
            f"document {key!r} is {len(body.encode())} bytes; the limit is {MAX_DOCUMENT_BYTES}"
        )
    return body
