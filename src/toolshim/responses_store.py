"""The store of recent Responses API answers behind ``previous_response_id``, owned per caller.

Each stored response lives under ``response:<id>`` in the capability registry's bounded
document store (:attr:`toolshim.capabilities.registry.Registry.documents`: the same SQLite file,
or the PostgreSQL or Redis store several replicas share), so a response survives a restart. A
registry without a document store keeps them in memory
(:class:`~toolshim.capabilities.stores.memory.MemoryDocuments`). A request with
``store: false`` leaves nothing in it.

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
  many it lists) and one document of totals (``responses-usage``). They are kept in memory and
  written at most every :data:`BOOKKEEPING_DELAY` seconds, in one transaction whatever the
  number of answers saved meanwhile (with the save that finds them due; by
  :meth:`ResponseStore.close`, which the proxy calls when it stops): an answer is then one
  document written, not four. A process killed in between leaves its last second's answers
  stored but unindexed (they age out with their TTL). Replicas sharing a store keep the bounds
  approximately: each decides from what it knows, and where another wrote an index since, its
  own changes are made again on that one when written, so no replica's entries are lost.
* **Honest.** :meth:`ResponseStore.save` returns why a response could not be stored (too big,
  the store failed) so the caller is told; the reason (and an eviction's) is kept in the
  owner's index, and a later ``previous_response_id`` naming that id gets it in its 400.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from typing import Any, cast

from toolshim.capabilities.store import DocumentWrite, compact_json, document_text
from toolshim.capabilities.stores.memory import MemoryDocuments
from toolshim.errors import InvalidRequestError, StoreError
from toolshim.responses_index import Documents, OwnerIndex, WriteBatch, head_key

__all__ = [
    "ANONYMOUS",
    "BOOKKEEPING_DELAY",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_RESPONSES",
    "DEFAULT_TTL",
    "MAX_RESPONSES_PER_KEY",
    "OWNER",
    "Documents",
    "ResponseStore",
    "open_response_store",
]

log = logging.getLogger("toolshim.server")

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
BOOKKEEPING_DELAY = 1.0
"""Seconds the owners' indexes and the totals wait in memory before they are written."""
INDEXES_KEPT = 256
"""Owners whose index a store keeps in memory once written (the most recently used)."""
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


def _size(value: Any) -> int:
    return len(compact_json(value).encode())


class ResponseStore:
    """Responses by id and owner: what ``previous_response_id`` continues from, kept in
    ``documents`` (None: in this process only, a
    :class:`~toolshim.capabilities.stores.memory.MemoryDocuments`)."""

    def __init__(
        self,
        documents: Documents | None = None,
        *,
        ttl: float | None = DEFAULT_TTL,
        max_bytes: int | None = DEFAULT_MAX_BYTES,
        key_quota: int | None = None,
        max_items: int | None = None,
        max_chain_bytes: int | None = None,
        max_responses: int | None = DEFAULT_MAX_RESPONSES,
        delay: float = BOOKKEEPING_DELAY,
    ) -> None:
        self.documents = documents if documents is not None else MemoryDocuments()
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
        self.delay = delay
        """Seconds the indexes and totals wait in memory before they are written (0: with each
        answer, in its transaction)."""
        self._lock = threading.Lock()
        self._indexes: OrderedDict[str, OwnerIndex] = OrderedDict()
        """Each owner's index as this store knows it, the most recently used last; the changes
        of its pages not written yet wait in its :class:`WriteBatch`."""
        self._ops: dict[str, list[tuple[Any, ...]]] = {}
        """What each index whose bookkeeping waits went through since it was written: made
        again on the stored index when another writer changed that one meanwhile."""
        self._usage_known: dict[str, tuple[int, int]] | None = None
        """(bytes, answers) per owner, as last read and changed since."""
        self._due: float | None = None
        """When the bookkeeping waiting is to be written (None: none waits)."""

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
        heaviest owner while the total would pass ``max_bytes``), then write the answer
        (``body``, its JSON) and delete those evicted; the indexes and totals follow
        (:meth:`_write`)."""
        key = f"response:{response_id}"
        put = DocumentWrite(key, document_text(key, body), self.ttl)  # (too big: nothing done)
        try:
            self._make_room_and_write(owner, response_id, put, size)
        except StoreError:
            self._forget_waiting()  # it may describe writes that were not made
            raise

    def _make_room_and_write(
        self, owner: str, response_id: str, put: DocumentWrite, size: int
    ) -> None:
        index = self._index(owner)
        evicted: list[str] = []
        while index.count >= MAX_RESPONSES_PER_KEY or (
            self.key_quota is not None and index.count and index.bytes + size > self.key_quota
        ):
            if not self._evict(index, _EVICTED_BY_QUOTA, evicted):
                break
        usage = self._usage()
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
            theirs = self._index(heaviest)
            done = self._evict(theirs, reason, evicted)
            usage[heaviest] = (theirs.bytes, theirs.count)
            if not done or not theirs.count:
                usage.pop(heaviest)
        stored_at = time.time()
        index.append(response_id, size, stored_at=stored_at)
        self._ops[owner].append(("append", response_id, size, stored_at))
        usage[owner] = (index.bytes, index.count)
        self._write([*(DocumentWrite(f"response:{gone}", None) for gone in evicted), put])

    def _index(self, owner: str) -> OwnerIndex:
        """``owner``'s index as known here (read from the store the first time), its changes
        from now on waiting to be written."""
        index = self._indexes.get(owner)
        if index is None:
            index = self._indexes[owner] = OwnerIndex(WriteBatch(self.documents), owner, self.ttl)
        else:
            self._indexes.move_to_end(owner)
        self._ops.setdefault(owner, [])
        return index

    def _evict(self, index: OwnerIndex, reason: str, evicted: list[str]) -> bool:
        """Take the oldest answer ``index`` lists (its document joins ``evicted``, to be
        deleted); False when it lists none."""
        oldest = index.pop_oldest()
        if oldest is None:
            return False
        evicted.append(oldest[0])
        index.gone(oldest[0], reason)
        self._ops[index.owner] += [("remove", oldest[0]), ("gone", oldest[0], reason)]
        return True

    def _write(self, writes: list[DocumentWrite], *, now: bool = False) -> None:
        """Make ``writes`` (answers put or deleted), with the bookkeeping when it is due (or
        ``now``), in one transaction. When the store fails, what waits here is forgotten (read
        again from the store next time): it may describe writes that were not made."""
        try:
            if now or self.delay <= 0 or (self._due is not None and time.monotonic() >= self._due):
                self._flush(writes)
                return
            if writes:
                self.documents.write_documents(writes)
        except StoreError:
            self._forget_waiting()
            raise
        if self._due is None and self._ops:
            self._due = time.monotonic() + self.delay

    def _forget_waiting(self) -> None:
        """Drop what waits here (read again from the store next time)."""
        self._indexes.clear()
        self._ops.clear()
        self._usage_known = None
        self._due = None

    def _flush(self, writes: list[DocumentWrite]) -> None:
        """Write what waits (each index, then the totals) with ``writes``. An index another
        writer changed since this one was read or written is read again and this one's changes
        made on it."""
        owners = list(self._ops)
        if owners:
            stored = self._read([*(head_key(o) for o in owners), _USAGE_KEY])
            for owner, head in zip(owners, stored, strict=False):
                index = self._indexes[owner]
                token = head.get("token") if isinstance(head, Mapping) else None
                if token != index.token:  # another replica wrote it meanwhile
                    cast(WriteBatch, index.documents).take()  # (made on a stale page)
                    index = OwnerIndex(WriteBatch(self.documents), owner, self.ttl)
                    _replay(index, self._ops[owner])
                    self._indexes[owner] = index
                index.save()
                writes = [*writes, *cast(WriteBatch, index.documents).take()]
            usage = _usage_of(stored[-1])
            usage.update({o: (self._indexes[o].bytes, self._indexes[o].count) for o in owners})
            kept = {k: list(v) for k, v in usage.items() if v[1] > 0}
            writes.append(DocumentWrite(_USAGE_KEY, compact_json(kept)))
            self._usage_known = {k: (v[0], v[1]) for k, v in kept.items()}
        if writes:
            self.documents.write_documents(writes)
        self._ops.clear()
        self._due = None
        while len(self._indexes) > INDEXES_KEPT:
            self._indexes.popitem(last=False)

    def flush(self) -> None:
        """Write the indexes and totals waiting in memory now."""
        with self._lock:
            self._write([], now=True)

    def close(self) -> None:
        """Write what waits (the proxy calls it when it stops); the store stays usable."""
        self.flush()

    def _read(self, keys: list[str]) -> list[Any | None]:
        read = getattr(self.documents, "get_documents", None)
        if read is not None:
            return list(read(keys))
        return [self.documents.get_document(key) for key in keys]

    def _remember_gone(self, owner: str, response_id: str, reason: str) -> None:
        try:
            self._index(owner).gone(response_id, reason)
            self._ops[owner].append(("gone", response_id, reason))
            self._write([])
        except StoreError:
            pass  # the reason is logged; the 400 will then be the generic one

    def _usage(self) -> dict[str, tuple[int, int]]:
        """(bytes, answers) stored per owner, as known here."""
        if self._usage_known is None:
            self._usage_known = _usage_of(self.documents.get_document(_USAGE_KEY))
        return self._usage_known

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
            with self._lock:
                index = self._indexes.get(owner) or OwnerIndex(self.documents, owner, self.ttl)
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
            index = self._index(owner)
            index.remove(response_id)
            index.gone(response_id, "it was deleted")
            self._ops[owner] += [("remove", response_id), ("gone", response_id, "it was deleted")]
            self._usage()[owner] = (index.bytes, index.count)
            self._write([DocumentWrite(f"response:{response_id}", None)])
        return True


def _replay(index: OwnerIndex, ops: Sequence[tuple[Any, ...]]) -> None:
    """Make again on ``index`` what :attr:`ResponseStore._ops` recorded."""
    for op in ops:
        if op[0] == "append":
            index.append(op[1], op[2], stored_at=op[3])
        elif op[0] == "remove":
            index.remove(op[1])
        else:
            index.gone(op[1], op[2])


def _usage_of(found: Any) -> dict[str, tuple[int, int]]:
    """The totals document read back: (bytes, answers) per owner."""
    if type(found) is not dict and not isinstance(found, Mapping):
        return {}
    usage = {}
    for owner, value in found.items():
        if isinstance(value, list) and len(value) == 2:
            size, count = value
            if isinstance(size, int) and isinstance(count, int):
                usage[str(owner)] = (size, count)
    return usage


def open_response_store(registry: Any, **bounds: Any) -> ResponseStore:
    """The registry's document store when it has one, else memory (with a warning);
    ``bounds`` are :class:`ResponseStore`'s keyword arguments."""
    documents = getattr(registry, "documents", None)
    if documents is not None:
        return ResponseStore(documents, **bounds)
    log.warning("the capability store keeps no documents: responses are kept in memory only")
    return ResponseStore(**bounds)
