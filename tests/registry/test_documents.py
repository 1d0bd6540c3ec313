"""The registry's documents (the Responses API's previous_response_id) while the shared store
goes away and comes back: nothing fails, nothing is lost, the outage is said once."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from tests.registry.servers import PostgresServer, RedisServer, running
from tests.registry.test_replicas import eventually
from toolshim.capabilities.documents import HeldDocuments
from toolshim.capabilities.registry import Registry
from toolshim.capabilities.stores import open_store
from toolshim.capabilities.stores.sqlite import SQLiteStore
from toolshim.errors import StoreError
from toolshim.responses_store import open_response_store


def stored_document(url: str, key: str) -> object:
    store = open_store(url)
    try:
        return store.get_document(key)  # type: ignore[attr-defined]
    finally:
        store.close()


@pytest.mark.parametrize("kind", ["postgres", "redis"])
def test_documents_written_while_the_store_is_away_are_served_and_written_back(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    with running(kind) as server:
        assert isinstance(server, PostgresServer | RedisServer)
        url = server.new_database()
        registry = Registry.open(url, profiles=False)
        try:
            responses = open_response_store(registry)
            docs = registry.documents
            assert docs is not None and docs is registry.documents  # one per registry
            before = {"id": "resp_before", "output": [{"type": "message", "content": []}]}
            responses.save(before, [{"role": "user", "content": "one"}])
            assert stored_document(url, "response:resp_before") is not None
            server.stop()
            # Written during the outage: no error, no warning per response, served from here.
            for n in range(3):
                responses.save({"id": f"resp_during{n}", "output": []}, [{"content": f"{n}"}])
            assert responses.conversation("resp_during2") == [{"content": "2"}]
            assert responses.get("resp_before") == before  # written here before: still served
            with pytest.raises(StoreError, match=r"unavailable|cannot be used"):
                docs.get_document("response:never-here")  # not "not found": the store is away
            assert not registry.available
            server.start()
            assert eventually(lambda: stored_document(url, "response:resp_during2") is not None, 30)
            assert eventually(lambda: registry.available, 30)
            assert all(
                stored_document(url, f"response:resp_during{n}") is not None for n in range(3)
            )
        finally:
            registry.close()
    messages = [r.getMessage() for r in caplog.records]
    assert sum("capability store unavailable" in m for m in messages) == 1, messages
    assert not any("not stored" in m for m in messages), messages
    assert all("s3cret" not in m for m in messages)


def test_the_documents_held_in_memory_are_bounded_oldest_first(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "caps.sqlite3")
    away = True
    failures: list[StoreError] = []
    docs = HeldDocuments(store, away=lambda: away, failed=failures.append, limit=3)
    try:
        for n in range(5):
            docs.put_document(f"k{n}", {"n": n})
        assert docs.unsaved == 3
        with pytest.raises(StoreError):
            docs.get_document("k0")  # dropped, and the store is away
        assert docs.get_document("k4") == {"n": 4}
        away = False
        assert docs.write_back()
        assert docs.unsaved == 0
        assert [store.get_document(f"k{n}") for n in range(5)] == [
            None,
            None,
            {"n": 2},
            {"n": 3},
            {"n": 4},
        ]
        assert docs.get_document("k0") is None  # the store answers: there is none
        assert docs.delete_document("k4") is True
        assert store.get_document("k4") is None
        assert not failures
    finally:
        store.close()


def test_a_store_that_fails_a_write_keeps_the_document_for_later(tmp_path: Path) -> None:
    """A write that fails (the store went away between two checks) is not lost."""
    store = SQLiteStore(tmp_path / "caps.sqlite3")
    failures: list[StoreError] = []
    docs = HeldDocuments(store, away=lambda: False, failed=failures.append)
    try:
        store.read_only = True  # SQLite's own switch: every write is a StoreError
        docs.put_document("k", [1])
        assert len(failures) == 1 and docs.unsaved == 1
        assert docs.get_document("k") == [1]
        assert not docs.write_back()
        store.read_only = False
        assert docs.write_back()
        assert store.get_document("k") == [1]
    finally:
        store.close()


def test_a_failure_met_by_a_document_is_retried_until_the_store_takes_it(
    redis_server: RedisServer,
) -> None:
    """Only the document write fails (a damaged key; the watch stays connected): the sync
    thread is set retrying, and the document reaches the store once the key is repaired."""
    import redis

    url = redis_server.new_database()
    prefix = url.rsplit("prefix=", 1)[1]
    registry = Registry.open(url, profiles=False)
    client = redis.Redis.from_url(url.split("?")[0])
    try:
        time.sleep(1.0)  # the watch has subscribed and its first re-read is done
        client.set(f"{prefix}:docs", "not a sorted set")
        docs = registry.documents
        assert docs is not None
        docs.put_document("response:k", [1])  # fails in the store: held here
        assert not registry.available
        assert docs.get_document("response:k") == [1]
        client.delete(f"{prefix}:docs")
        assert eventually(lambda: registry.available, 30)
        assert stored_document(url, "response:k") == [1]
    finally:
        client.close()
        registry.close()
