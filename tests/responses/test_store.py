"""The response store behind previous_response_id: the registry's own document store (a real
SQLite file) surviving a reopen; memory bounded; unknown ids a 400."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolshim.capabilities.registry import Registry
from toolshim.capabilities.stores.sqlite import SQLiteStore
from toolshim.errors import InvalidRequestError
from toolshim.responses_store import MemoryDocuments, ResponseStore, open_response_store

USER = {"type": "message", "role": "user", "content": "hi"}


def response(n: int) -> dict[str, object]:
    text = {"type": "output_text", "text": f"answer {n}", "annotations": []}
    return {
        "id": f"resp_{n}",
        "output": [{"type": "message", "role": "assistant", "content": [text]}],
    }


def test_a_stored_response_survives_a_reopen_of_the_registry(tmp_path: Path) -> None:
    path = tmp_path / "capabilities.sqlite3"
    first = Registry.open(path, profiles=False)
    open_response_store(first).save(response(1), [USER])
    first.close()
    reopened = Registry.open(path, profiles=False)
    items = open_response_store(reopened).conversation("resp_1")
    reopened.close()
    assert items[0] == USER and items[1]["content"][0]["text"] == "answer 1"


def test_memory_keeps_the_newest_responses_and_an_unknown_id_is_a_400() -> None:
    store = ResponseStore(MemoryDocuments(3 + 3))  # + the owner's index (head, a page), totals
    for n in range(5):
        store.save(response(n), [USER])
    assert [store.get(f"resp_{n}") is not None for n in range(5)] == [
        False,
        False,
        True,
        True,
        True,
    ]
    with pytest.raises(InvalidRequestError) as caught:
        store.conversation("resp_0")
    assert caught.value.status == 400 and caught.value.param == "previous_response_id"
    assert "'resp_0'" in caught.value.message


def test_an_expired_response_is_gone(tmp_path: Path) -> None:
    registry = Registry.open(tmp_path / "capabilities.sqlite3", profiles=False)
    store = ResponseStore(open_response_store(registry).documents, ttl=-1.0)
    store.save(response(1), [USER])
    assert store.get("resp_1") is None
    registry.close()


def test_storing_a_response_costs_the_same_however_many_are_stored(tmp_path: Path) -> None:
    """Each stored response is written while the proxy's event loop waits: its cost must not
    grow with the store (it sorted and scanned every stored document, 33 ms a write at 10,000).
    Counted in SQLite VM steps, not time."""
    store = SQLiteStore(tmp_path / "capabilities.sqlite3", document_limit=1500)
    documents = ResponseStore(store)
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    store._conn.set_progress_handler(count, 100)  # every 100 VM instructions
    cost = {}
    for n in range(2000):
        steps = 0
        documents.save({**response(n), "id": f"resp_{n}"}, [USER] * 20)
        if n in (100, 1999):  # few stored, and beyond the limit (evicting)
            cost[n] = steps
    store.close()
    assert cost[1999] <= 2 * cost[100] + 10, cost


def test_a_key_quota_evicts_the_oldest_across_index_pages() -> None:
    """The owner's index is paged (a save costs the same however many it lists): eviction
    takes from the oldest page, deleting a page it empties, appending fills the newest."""
    from toolshim.responses_index import PAGE, OwnerIndex

    documents = MemoryDocuments(10_000)
    one = len(json.dumps({"owner": "anonymous", "input": [USER], "response": response(100)}))
    store = ResponseStore(documents, key_quota=one * 60)
    total = 3 * PAGE + 7
    for n in range(total):
        # no quota until the index has two pages, then one that keeps about 60
        store.key_quota = None if n < PAGE + 5 else one * 60
        assert store.save({**response(n), "id": f"resp_{n}"}, [USER]) is None
    kept = [n for n in range(total) if store.get(f"resp_{n}") is not None]
    assert kept == list(range(total - len(kept), total)) and 30 < len(kept) <= 70
    index = OwnerIndex(documents, "anonymous", store.ttl)
    assert index.count == len(kept) and index.first == index.last == 1
    assert documents.get_document("responses-of:anonymous:0") is None  # emptied, deleted
    assert store.delete(f"resp_{total - 1}") and not store.delete(f"resp_{total - 1}")
    assert OwnerIndex(documents, "anonymous", store.ttl).count == len(kept) - 1


def test_the_total_number_of_answers_is_made_room_for_by_the_key_holding_the_most() -> None:
    """Beneath the bounds lies the document store's own limit, oldest first whoever wrote:
    the store keeps under it, so a flood by one key never ages out a quiet key's answer."""
    store = ResponseStore(MemoryDocuments(10_000), max_responses=20)
    store.save({**response(0), "id": "resp_bob"}, [USER], owner="key:bob")
    for n in range(60):
        store.save({**response(n), "id": f"resp_{n}"}, [USER], owner="key:alice")
    alice = [n for n in range(60) if store.get(f"resp_{n}", owner="key:alice") is not None]
    assert store.get("resp_bob", owner="key:bob") is not None
    assert alice == list(range(41, 60))  # 19 of alice's, the newest, and bob's one
    with pytest.raises(InvalidRequestError, match="number of answers"):
        store.conversation("resp_0", owner="key:alice")


def test_two_stores_sharing_documents_each_see_the_answers_the_other_indexed(
    tmp_path: Path,
) -> None:
    """A store appends to the last index page it wrote without reading it again only while
    the index's head is the one it wrote: another replica's save in between is not lost."""
    from toolshim.responses_index import OwnerIndex

    path = tmp_path / "capabilities.sqlite3"
    one, two = SQLiteStore(path), SQLiteStore(path)
    first, second = ResponseStore(one), ResponseStore(two)
    try:
        for n in range(40):
            store = first if n % 3 else second
            assert store.save({**response(n), "id": f"resp_{n}"}, [USER]) is None
        index = OwnerIndex(one, "anonymous", first.ttl)
        assert index.count == 40
        assert all(index.find(f"resp_{n}") is not None for n in range(40))
        assert first.delete("resp_39") and second.get("resp_39") is None
        assert first.save({**response(40), "id": "resp_40"}, [USER]) is None
        assert OwnerIndex(two, "anonymous", second.ttl).count == 40
    finally:
        one.close()
        two.close()
