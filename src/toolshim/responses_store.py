"""The store of recent Responses API answers behind ``previous_response_id``, owned per caller.

Each stored response lives under ``response:<id>`` in the capability registry's bounded
document store (:attr:`toolshim.capabilities.registry.Registry.documents`: the same SQLite file,
or the PostgreSQL or Redis store several replicas share), so a response survives a restart. A
registry without a document store keeps them in memory (:class:`MemoryDocuments`). A request
with ``store: false`` leaves nothing in it.

Contracts:

* **Owned.** A response belongs to the caller that stored it (:data:`OWNER`: the access key's
  name, or :data:`ANONYMOUS` without keys). Every read (``previous_response_id``, ``GET``,
  ``DELETE``, ``input_items``) by another caller is answered exactly like an unknown id.
* **Linear.** A document holds only what its request added (the new input items and the
  output) and the id of the response it continued; a conversation is read by walking that
  chain, so a chain of *n* turns takes *n* documents, not *n²* items. The walk stops (a 400) as
  soon as the conversation passes ``max_items`` items or ``max_bytes`` bytes: what would go
  upstream is bounded before it is read whole.
* **Bounded.** At most ``max_bytes`` bytes and ``max_responses`` answers in all, and
  ``key_quota`` bytes (and :data:`MAX_RESPONSES_PER_KEY` answers) per caller; to make room, the
  oldest answer of the caller over its quota goes first, and for a total, the oldest of the
  caller who holds the most (bytes, or answers). The bookkeeping is each caller's
  :class:`~toolshim.responses_index.OwnerIndex` (a few documents: a save costs the same however
  many it lists) and one document of totals (``responses-usage``), written with the answer in
  one transaction of the document store; replicas sharing a store keep them approximately (two writes at once may each miss the other's entry, which then ages
  out with its TTL).
* **Honest.** :meth:`ResponseStore.save` returns why a response could not be stored (too big,
  the store failed) so the caller is told; the reason (and an eviction's) is kept in the
  owner's index, and a later ``previous_response_id`` naming that id gets it in its 400.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from typing import Any

from toolshim.capabilities.store import DocumentWrite, compact_json
from toolshim.errors import InvalidRequestError, StoreError
from toolshim.responses_index import Documents, LastPage, OwnerIndex, WriteBatch, head_key

__all__ = [
    "ANONYMOUS",
    "DEFAULT_LIMIT",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_RESPONSES",
    "DEFAULT_TTL",
    "MAX_RESPONSES_PER_KEY",
    "OWNER",
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
DEFAULT_MAX_BYTES = 1024 * 1024 * 1024
"""Bytes of stored responses kept at most, all callers together (``--store-max-size``)."""
MAX_RESPONSES_PER_KEY = 5000
"""Responses one caller keeps at most, whatever their size."""
DEFAULT_MAX_RESPONSES = 8000
"""Responses kept at most, all callers together: under the document store's own limit
(:data:`~toolshim.capabilities.store.DEFAULT_DOCUMENT_LIMIT`, 10,000, oldest first whoever wrote
them) with room for the indexes, so that the store makes room from the key holding the most,
never from a quiet one."""
ANONYMOUS = "anonymous"
"""The owner of what is stored when the proxy runs without access keys."""
OWNER: ContextVar[str] = ContextVar("toolshim_response_owner", default=ANONYMOUS)
"""Who is asking, for the request being served (the proxy's guard sets it per access key)."""

_USAGE_KEY = "responses-usage"
_EVICTED_BY_QUOTA = "it was evicted to keep this key's stored responses within --store-key-quota"
_EVICTED_BY_TOTAL = "it was evicted to keep the response store within --store-max-size"
_EVICTED_BY_COUNT = (
    "it was evicted to keep the response store within its number of answers (the key holding "
    "the most loses its oldest first)"
)


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

    def delete_document(self, key: str) -> bool:
        with self._lock:
            return self._items.pop(key, None) is not None

    def write_documents(self, writes: Sequence[DocumentWrite]) -> None:
        for write in writes:
            if write.body is None:
                self.delete_document(write.key)
            else:
                self.put_document(write.key, json.loads(write.body), ttl=write.ttl)


def _size(value: Any) -> int:
    return len(compact_json(value).encode())


class ResponseStore:
    """Responses by id and owner: what ``previous_response_id`` continues from."""

    def __init__(
        self,
        documents: Documents,
        *,
        ttl: float | None = DEFAULT_TTL,
        max_bytes: int | None = DEFAULT_MAX_BYTES,
        key_quota: int | None = None,
        max_items: int | None = None,
        max_chain_bytes: int | None = None,
        max_responses: int | None = DEFAULT_MAX_RESPONSES,
    ) -> None:
        self.documents = documents
        self.ttl = ttl
        self.max_bytes = max_bytes or None
        """Bytes stored in all (None: no bound beyond the document store's own)."""
        self.key_quota = key_quota or None
        """Bytes stored per owner (None: only the total bounds an owner)."""
        self.max_items = max_items or None
        """Items a conversation read back may hold (the proxy's ``--max-messages``)."""
        self.max_chain_bytes = max_chain_bytes or None
        """Bytes a conversation read back may hold (the proxy's ``--max-body-size``)."""
        self.max_responses = max_responses or None
        """Responses kept in all; beyond it the owner holding the most loses its oldest."""
        self._lock = threading.Lock()
        self._last_pages: dict[str, LastPage] = {}
        """The last index page written here, per owner (appending then needs no read)."""

    def __repr__(self) -> str:
        return f"ResponseStore({self.documents!r})"

    # -- writing ------------------------------------------------------------------------------

    def save(
        self,
        response: Mapping[str, Any],
        new_items: Sequence[Mapping[str, Any]],
        *,
        previous: str | None = None,
        owner: str | None = None,
    ) -> str | None:
        """Keep ``response`` with the items its request added to the conversation
        ``previous`` names. Returns None when stored, else why not (the answer has been given
        already: the caller is told in it, nothing is raised)."""
        owner = owner or OWNER.get()
        response_id = str(response["id"])
        document = {
            "owner": owner,
            "previous": previous,
            "input": [dict(i) for i in new_items],
            "response": dict(response),
        }
        body = compact_json(document)
        size = len(body.encode())
        with self._lock:
            try:
                reason = self._too_big(size)
                if reason is None:
                    self._store(owner, response_id, body, size)
                    return None
            except StoreError as exc:
                reason = f"the response store failed: {exc.message}"
            log.warning("response %s not stored: %s", response_id, reason)
            self._remember_gone(owner, response_id, f"it was not stored: {reason}")
            return reason

    def _too_big(self, size: int) -> str | None:
        for limit, flag in (
            (self.key_quota, "--store-key-quota"),
            (self.max_bytes, "--store-max-size"),
        ):
            if limit is not None and size > limit:
                return f"it is {size} bytes, more than this proxy stores ({limit}, {flag})"
        return None

    def _store(self, owner: str, response_id: str, body: str, size: int) -> None:
        """Make room (the oldest of ``owner`` beyond its quota, then the oldest of the
        heaviest owner while the total would pass ``max_bytes``), then write: the answer
        (``body``, its JSON), the indexes and the totals in one batch."""
        batch = WriteBatch(self.documents)
        batch.prefetch((head_key(owner), _USAGE_KEY))  # the two read on every save, together
        index = OwnerIndex(batch, owner, self.ttl, self._last_pages)
        while index.count >= MAX_RESPONSES_PER_KEY or (
            self.key_quota is not None and index.count and index.bytes + size > self.key_quota
        ):
            if not self._evict(index, _EVICTED_BY_QUOTA):
                break
        usage = self._usage(batch)
        usage[owner] = (index.bytes, index.count)
        while usage:
            if self.max_bytes is not None and sum(u[0] for u in usage.values()) + size > (
                self.max_bytes
            ):
                measure, reason = 0, _EVICTED_BY_TOTAL  # bytes
            elif self.max_responses is not None and sum(u[1] for u in usage.values()) >= (
                self.max_responses
            ):
                measure, reason = 1, _EVICTED_BY_COUNT  # answers
            else:
                break
            heaviest = max(usage, key=lambda o: usage[o][measure])
            theirs = (
                index
                if heaviest == owner
                else OwnerIndex(batch, heaviest, self.ttl, self._last_pages)
            )
            evicted = self._evict(theirs, reason)
            if theirs is not index:
                theirs.save()
            usage[heaviest] = (theirs.bytes, theirs.count)
            if not evicted or not theirs.count:
                usage.pop(heaviest)
        batch.put_text(f"response:{response_id}", body, ttl=self.ttl)
        index.append(response_id, size)
        index.save()
        usage[owner] = (index.bytes, index.count)
        self._put_usage(batch, usage)
        batch.commit()

    def _evict(self, index: OwnerIndex, reason: str) -> bool:
        """Delete the oldest answer ``index`` lists; False when it lists none."""
        oldest = index.pop_oldest()
        if oldest is None:
            return False
        index.documents.delete_document(f"response:{oldest[0]}")
        index.gone(oldest[0], reason)
        return True

    def _remember_gone(self, owner: str, response_id: str, reason: str) -> None:
        try:
            batch = WriteBatch(self.documents)
            index = OwnerIndex(batch, owner, self.ttl, self._last_pages)
            index.gone(response_id, reason)
            index.save()
            batch.commit()
        except StoreError:
            pass  # the reason is logged; the 400 will then be the generic one

    def _usage(self, documents: Documents) -> dict[str, tuple[int, int]]:
        """(bytes, answers) stored per owner."""
        found = documents.get_document(_USAGE_KEY)
        if type(found) is not dict and not isinstance(found, Mapping):
            return {}
        usage = {}
        for owner, value in found.items():
            if isinstance(value, list) and len(value) == 2:
                size, count = value
                if isinstance(size, int) and isinstance(count, int):
                    usage[str(owner)] = (size, count)
        return usage

    def _put_usage(self, documents: Documents, usage: Mapping[str, tuple[int, int]]) -> None:
        kept = {k: list(v) for k, v in usage.items() if v[1] > 0}
        documents.put_document(_USAGE_KEY, kept)

    # -- reading ------------------------------------------------------------------------------

    def conversation(self, response_id: str, *, owner: str | None = None) -> list[dict[str, Any]]:
        """The items a request that continues ``response_id`` starts from: every input and
        output of its chain, oldest first. An id unknown to ``owner`` (or expired, never
        stored, or another owner's) is an :class:`InvalidRequestError` (400) that says why
        when the reason is known; so is a chain past ``max_items`` or ``max_chain_bytes``."""
        owner = owner or OWNER.get()
        if not isinstance(response_id, str) or not response_id:
            raise InvalidRequestError(
                "previous_response_id must be a response id such as 'resp_…'",
                param="previous_response_id",
            )
        segments: list[list[dict[str, Any]]] = []
        items = size = 0
        seen: set[str] = set()
        current: str | None = response_id
        while current is not None and current not in seen:
            seen.add(current)
            document = self._owned(current, owner)
            if document is None:
                raise self._missing(response_id, current, owner)
            segment = [*document.get("input", ()), *(document["response"].get("output") or ())]
            items += len(segment)
            size += _size(segment)
            self._check_chain(response_id, items, size)
            segments.append(segment)
            previous = document.get("previous")
            current = previous if isinstance(previous, str) and previous else None
        return [item for segment in reversed(segments) for item in segment]

    def _check_chain(self, response_id: str, items: int, size: int) -> None:
        for value, limit, what, flag in (
            (items, self.max_items, "items", "--max-messages"),
            (size, self.max_chain_bytes, "bytes", "--max-body-size"),
        ):
            if limit is not None and value > limit:
                raise InvalidRequestError(
                    f"the conversation behind previous_response_id {response_id!r} holds more "
                    f"than {limit} {what}; this proxy sends at most {limit} upstream ({flag}): "
                    "start a new conversation, or send a shorter input",
                    param="previous_response_id",
                    code="too_many_messages" if what == "items" else "request_too_large",
                )

    def _missing(self, asked: str, missing: str, owner: str) -> InvalidRequestError:
        reason = self._gone_reason(missing, owner)
        if missing != asked:
            message = (
                f"previous response {asked!r} continues {missing!r}, which is no longer "
                f"stored ({reason or 'it expired or was evicted'}): start a new conversation"
            )
        elif reason is not None:
            message = f"previous response {asked!r} not found: {reason}"
        else:
            message = (
                f"previous response {asked!r} not found: toolshim keeps the last responses "
                "sent with store: true (not those with store: false), for a while"
            )
        return InvalidRequestError(
            message, param="previous_response_id", code="previous_response_not_found"
        )

    def _gone_reason(self, response_id: str, owner: str) -> str | None:
        try:
            index = OwnerIndex(self.documents, owner, self.ttl)
            reason = index.gone_reason(response_id)
            entry = index.find(response_id) if reason is None else None
        except StoreError:
            return None
        if entry is not None:  # indexed, yet its document is gone
            if self.ttl is not None and entry[1] + self.ttl < time.time():
                return f"it expired (responses are kept {self.ttl / 86400:g} days)"
            return "the document store evicted it to stay within its document limit"
        return reason

    def _owned(self, response_id: str, owner: str) -> Mapping[str, Any] | None:
        document = self.documents.get_document(f"response:{response_id}")
        if not isinstance(document, Mapping) or not isinstance(document.get("response"), Mapping):
            return None
        if document.get("owner", ANONYMOUS) != owner:
            return None  # another caller's: answered as if it did not exist
        return document

    def get(self, response_id: str, *, owner: str | None = None) -> dict[str, Any] | None:
        """The stored response object, or None (unknown, or another owner's)."""
        document = self._owned(response_id, owner or OWNER.get())
        return dict(document["response"]) if document is not None else None

    def input_items(
        self, response_id: str, *, owner: str | None = None
    ) -> list[dict[str, Any]] | None:
        """The items a stored response answered (its chain's included, oldest first), or
        None (unknown, or another owner's)."""
        owner = owner or OWNER.get()
        document = self._owned(response_id, owner)
        if document is None:
            return None
        previous = document.get("previous")
        history = self.conversation(previous, owner=owner) if isinstance(previous, str) else []
        return [*history, *(dict(i) for i in document.get("input", ()))]

    def delete(self, response_id: str, *, owner: str | None = None) -> bool:
        """Forget a stored response; False when ``owner`` has none by that id."""
        owner = owner or OWNER.get()
        with self._lock:
            if self._owned(response_id, owner) is None:
                return False
            batch = WriteBatch(self.documents)
            batch.delete_document(f"response:{response_id}")
            index = OwnerIndex(batch, owner, self.ttl, self._last_pages)
            index.remove(response_id)
            index.gone(response_id, "it was deleted")
            index.save()
            usage = self._usage(batch)
            usage[owner] = (index.bytes, index.count)
            self._put_usage(batch, usage)
            batch.commit()
        return True


def open_response_store(registry: Any, **bounds: Any) -> ResponseStore:
    """The registry's document store when it has one, else memory (with a warning);
    ``bounds`` are :class:`ResponseStore`'s keyword arguments."""
    documents = getattr(registry, "documents", None)
    if documents is not None:
        return ResponseStore(documents, **bounds)
    log.warning("the capability store keeps no documents: responses are kept in memory only")
    return ResponseStore(MemoryDocuments(), **bounds)
