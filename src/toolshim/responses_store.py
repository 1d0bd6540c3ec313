"""The store of recent Responses API answers behind ``previous_response_id``.

Each stored response keeps its conversation (the input items, the earlier responses'
included) and its output items, under ``response:<id>``, in the capability registry's
bounded document store (:attr:`toolshim.capabilities.registry.Registry.documents`: the same
SQLite file, or the PostgreSQL or Redis store several replicas share), so a response survives
a restart; the oldest documents are evicted first, and a response is forgotten after
:data:`DEFAULT_TTL` seconds. A registry without a document store keeps them in memory
(:class:`MemoryDocuments`). A request with ``store: false`` leaves nothing in it.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from toolshim.errors import InvalidRequestError, StoreError

__all__ = [
    "DEFAULT_LIMIT",
    "DEFAULT_TTL",
    "Documents",
    "MemoryDocuments",
    "ResponseStore",
    "open_response_store",
]

log = logging.getLogger("toolshim.server")

DEFAULT_LIMIT = 1000
"""How many responses :class:`MemoryDocuments` keeps at most."""
DEFAULT_TTL = 30 * 24 * 3600.0
"""Seconds a stored response stays retrievable (OpenAI keeps them 30 days)."""


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
    """The registry's document store when it has one, else memory (with a warning)."""
    documents = getattr(registry, "documents", None)
    if documents is not None:
        return ResponseStore(documents)
    log.warning("the capability store keeps no documents: responses are kept in memory only")
    return ResponseStore(MemoryDocuments())
