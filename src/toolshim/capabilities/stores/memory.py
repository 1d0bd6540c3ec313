"""Documents kept in this process only: the document store of a registry that has none (the
Responses API's stored answers, when toolshim runs without a capability store that keeps
documents), bounded by count, each with its time to live."""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from toolshim.capabilities.store import DocumentWrite

__all__ = ["DEFAULT_LIMIT", "MemoryDocuments"]

DEFAULT_LIMIT = 1000
"""How many documents :class:`MemoryDocuments` keeps at most."""


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
