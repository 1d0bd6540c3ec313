"""The response store behind previous_response_id: the registry's own document store (a real
SQLite file) surviving a reopen; memory bounded; unknown ids a 400."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from toolshim.capabilities.registry import Registry
from toolshim.capabilities.store import DocumentWrite
from toolshim.capabilities.stores.memory import MemoryDocuments
from toolshim.capabilities.stores.sqlite import SQLiteStore
from toolshim.errors import InvalidRequestError
from toolshim.responses_store import ResponseStore, open_response_store

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
    # the bookkeeping written with each answer: + the owner's index (head, a page), totals
    store = ResponseStore(MemoryDocuments(3 + 3), delay=0)
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
    documents = ResponseStore(store, delay=0)  # the bookkeeping written with every answer
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
    store.flush()
    index = OwnerIndex(documents, "anonymous", store.ttl)
    assert index.count == len(kept) and index.first == index.last == 1
    assert documents.get_document("responses-of:anonymous:0") is None  # emptied, deleted
    assert store.delete(f"resp_{total - 1}") and not store.delete(f"resp_{total - 1}")
    store.flush()
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
    """Each store keeps its index in memory and writes it a while later: where the other
    replica wrote the index meanwhile, its own changes are made again on that one, so neither
    replica's answers are lost from it."""
    from toolshim.responses_index import OwnerIndex

    path = tmp_path / "capabilities.sqlite3"
    one, two = SQLiteStore(path), SQLiteStore(path)
    first, second = ResponseStore(one), ResponseStore(two)
    try:
        for n in range(40):
            store = first if n % 3 else second
            assert store.save({**response(n), "id": f"resp_{n}"}, [USER]) is None
        assert OwnerIndex(one, "anonymous", first.ttl).count == 0  # (not written yet)
        first.flush()
        second.flush()  # after first wrote the index: its 13 made again on first's 27
        index = OwnerIndex(one, "anonymous", first.ttl)
        assert index.count == 40
        assert all(index.find(f"resp_{n}") is not None for n in range(40))
        assert first.delete("resp_39") and second.get("resp_39") is None
        assert first.save({**response(40), "id": "resp_40"}, [USER]) is None
        first.flush()
        assert OwnerIndex(two, "anonymous", second.ttl).count == 40
    finally:
        one.close()
        two.close()


class CountedDocuments(MemoryDocuments):
    """Memory documents that count the transactions written and the documents in each."""

    def __init__(self) -> None:
        super().__init__(10_000)
        self.transactions: list[list[str]] = []

    def write_documents(self, writes: Sequence[DocumentWrite]) -> None:
        self.transactions.append([w.key for w in writes])
        super().write_documents(writes)


def test_an_answer_is_one_document_written_while_its_bookkeeping_waits() -> None:
    """The owners' indexes and the totals wait in memory and are written together later: a
    save writes only its answer, and what waits is what a later reader needs."""
    from toolshim.responses_index import OwnerIndex

    documents = CountedDocuments()
    store = ResponseStore(documents, delay=3600, key_quota=None)
    for n in range(100):
        assert store.save({**response(n), "id": f"resp_{n}"}, [USER]) is None
    assert documents.transactions == [[f"response:resp_{n}"] for n in range(100)]
    assert documents.get_document("responses-of:anonymous") is None
    store.flush()
    last = documents.transactions[-1]
    assert len(documents.transactions) == 101 and "responses-usage" in last
    assert "responses-of:anonymous" in last and "responses-of:anonymous:1" in last  # 2 pages
    index = OwnerIndex(documents, "anonymous", store.ttl)
    assert index.count == 100 and all(index.find(f"resp_{n}") for n in (0, 63, 64, 99))
    assert documents.get_document("responses-usage") == {"anonymous": [index.bytes, 100]}
    store.flush()  # nothing waits: nothing written
    assert len(documents.transactions) == 101


def test_the_bookkeeping_is_written_by_the_save_that_finds_it_due() -> None:
    import time

    from toolshim.responses_index import OwnerIndex

    documents = CountedDocuments()
    store = ResponseStore(documents, delay=0.05)
    store.save(response(1), [USER])
    assert OwnerIndex(documents, "anonymous", store.ttl).count == 0
    time.sleep(0.1)
    store.save(response(2), [USER])  # due: written with this answer, in one transaction
    assert len(documents.transactions) == 2 and len(documents.transactions[-1]) == 4
    assert OwnerIndex(documents, "anonymous", store.ttl).count == 2


def test_a_quota_holds_while_the_bookkeeping_waits() -> None:
    one = len(json.dumps({"owner": "anonymous", "input": [USER], "response": response(100)}))
    documents = CountedDocuments()
    store = ResponseStore(documents, delay=3600, key_quota=one * 10)
    for n in range(30):
        assert store.save({**response(n + 100), "id": f"resp_{n}"}, [USER]) is None
    kept = [n for n in range(30) if store.get(f"resp_{n}") is not None]
    assert kept == list(range(30 - len(kept), 30)) and 8 <= len(kept) <= 10
    with pytest.raises(InvalidRequestError, match="store-key-quota"):
        store.conversation("resp_0")  # why it is gone, known before anything is written


def test_the_proxy_writes_the_waiting_bookkeeping_when_it_stops(tmp_path: Path) -> None:
    """What waits in memory is written when the proxy stops (uvicorn's shutdown), so a
    restart finds every answer in its owner's index."""
    import httpx

    from toolshim.engine import Engine
    from toolshim.responses_index import OwnerIndex
    from toolshim.server import create_app
    from toolshim.testing import FakeUpstream, ServedApp

    path = tmp_path / "capabilities.sqlite3"
    registry = Registry.open(path, profiles=False)
    app = create_app(Engine(FakeUpstream(["Hello."] * 3), registry=registry))
    with ServedApp(app) as served:
        for _ in range(3):
            answer = httpx.post(f"{served.base_url}/responses", json={"model": "m", "input": "hi"})
            assert answer.status_code == 200, answer.text
        reader = SQLiteStore(path)
        assert OwnerIndex(reader, "anonymous", None).count == 0  # waiting in memory
    assert OwnerIndex(reader, "anonymous", None).count == 3
    reader.close()
    registry.close()


def test_an_answer_too_big_for_the_documents_leaves_no_entry_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from toolshim.capabilities import store as document_store
    from toolshim.responses_index import OwnerIndex

    documents = CountedDocuments()
    store = ResponseStore(documents, delay=3600)
    monkeypatch.setattr(document_store, "MAX_DOCUMENT_BYTES", 400)
    big = {**response(1), "output": [{"type": "message", "content": "x" * 500}]}
    reason = store.save(big, [USER])
    assert reason is not None and "bytes" in reason
    assert store.save(response(2), [USER]) is None
    store.flush()
    index = OwnerIndex(documents, "anonymous", store.ttl)
    assert index.count == 1 and index.find("resp_2") and not index.find("resp_1")
    with pytest.raises(InvalidRequestError, match="not stored"):
        store.conversation("resp_1")
