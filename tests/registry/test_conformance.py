"""One conformance suite, every store backend: SQLite, PostgreSQL and Redis (real servers)."""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor

import pytest

from tests.registry import workers
from toolshim.capabilities.facts import Fact, Source
from toolshim.capabilities.store import (
    MAX_DOCUMENT_BYTES,
    FactStore,
    layers_by_name,
    standing_entries,
)
from toolshim.capabilities.stores import open_store
from toolshim.errors import StoreError

UP = "http://127.0.0.1:11434/v1"
OTHER = "http://10.0.0.2:8000/v1"


@pytest.fixture
def store(backend_url: str) -> Iterator[FactStore]:
    opened = open_store(backend_url)
    try:
        yield opened
    finally:
        opened.close()


def standing(store: FactStore, upstream: str, model: str) -> dict[str, Fact]:
    found = layers_by_name(f for _, f in store.rows(model, [upstream]))
    return {name: facts[0] for name, facts in found.items()}


def test_a_fact_keeps_value_source_time_and_detail_across_reopening(backend_url: str) -> None:
    first = open_store(backend_url)
    first.put(UP, "gemma3:1b", Fact("native_tools", "no", Source.RUNTIME_ERROR, 123.5, "ollama"))
    first.put(UP, "gemma3:1b", Fact("context_window", 8192, Source.UPSTREAM, 99.0))
    first.close()
    again = open_store(backend_url)
    try:
        facts = standing(again, UP, "gemma3:1b")
        assert facts["native_tools"] == Fact(
            "native_tools", "no", Source.RUNTIME_ERROR, 123.5, "ollama"
        )
        assert facts["context_window"].value == 8192
        assert again.schema_version() >= 1
        assert not again.notices
    finally:
        again.close()


def test_each_source_keeps_its_layer_and_the_strongest_stands(store: FactStore) -> None:
    standing_fact = store.put(UP, "m", Fact("native_tools", "yes", Source.PROBE, 10.0))
    assert standing_fact.source is Source.PROBE
    standing_fact = store.put(UP, "m", Fact("native_tools", "no", Source.RUNTIME_ERROR, 20.0))
    assert (standing_fact.value, standing_fact.source) == ("yes", Source.PROBE)
    standing_fact = store.put(UP, "m", Fact("native_tools", "no", Source.USER, 5.0))
    assert (standing_fact.value, standing_fact.source) == ("no", Source.USER)
    layers = layers_by_name(f for _, f in store.rows("m", [UP]))["native_tools"]
    assert [f.source for f in layers] == [Source.USER, Source.PROBE, Source.RUNTIME_ERROR]


def test_an_older_fact_from_the_same_source_never_replaces_a_newer_one(store: FactStore) -> None:
    store.put(UP, "m", Fact("dialect", "hermes", Source.UPSTREAM, 50.0))
    standing_fact = store.put(UP, "m", Fact("dialect", "json", Source.UPSTREAM, 40.0))
    assert (standing_fact.value, standing_fact.updated_at) == ("hermes", 50.0)
    standing_fact = store.put(UP, "m", Fact("dialect", "pythonic", Source.UPSTREAM, 60.0))
    assert standing_fact.value == "pythonic"
    assert len(store.rows("m", [UP])) == 1


def test_rows_select_by_model_and_upstream_and_snapshot_holds_everything(store: FactStore) -> None:
    store.put(UP, "a", Fact("native_tools", "no", Source.PROBE, 1.0))
    store.put(OTHER, "a", Fact("native_tools", "yes", Source.PROBE, 2.0))
    store.put("*", "a", Fact("dialect", "hermes", Source.USER, 3.0))
    store.put(UP, "b", Fact("native_tools", "yes", Source.UPSTREAM, 4.0))
    assert sorted(u for u, _ in store.rows("a", [UP, "*"])) == ["*", UP]
    assert store.rows("a", []) == []
    assert store.rows("nobody", [UP]) == []
    snapshot = store.snapshot()
    assert len(snapshot) == 4
    entries = standing_entries(snapshot)
    assert [(u, m) for u, m, _ in entries] == [("*", "a"), (OTHER, "a"), (UP, "a"), (UP, "b")]


def test_forget_by_upstream_name_source_and_everywhere(store: FactStore) -> None:
    for where in (UP, OTHER):
        store.put(where, "m", Fact("native_tools", "no", Source.RUNTIME_ERROR, 1.0))
        store.put(where, "m", Fact("native_tools", "yes", Source.USER, 1.0))
        store.put(where, "m", Fact("dialect", "hermes", Source.PROFILE, 1.0))
    store.put(UP, "keep", Fact("dialect", "json", Source.USER, 1.0))
    assert store.forget(UP, "m", sources=[Source.RUNTIME_ERROR]) == 1
    assert store.forget(UP, "m", names=["dialect"]) == 1
    assert [f.source for _, f in store.rows("m", [UP])] == [Source.USER]
    assert store.forget(None, "m") == 4
    assert store.rows("m", [UP, OTHER]) == []
    assert store.forget(None, "m") == 0
    assert len(store.rows("keep", [UP])) == 1


def test_models_seen_at_each_upstream(store: FactStore) -> None:
    store.record_seen(UP, ["a", "b"], when=10.0)
    store.record_seen(OTHER, ["a"], when=11.0)
    store.record_seen(UP, ["a"], when=12.0)
    store.record_seen(UP, [])
    assert store.seen(UP) == [(UP, "a", 12.0), (UP, "b", 10.0)]
    assert len(store.seen()) == 3


def test_opening_again_migrates_nothing_and_keeps_facts(backend_url: str) -> None:
    first = open_store(backend_url)
    version = first.schema_version()
    first.put(UP, "m", Fact("native_tools", "no", Source.USER, 1.0))
    first.close()
    for _ in range(2):
        again = open_store(backend_url)
        assert again.schema_version() == version
        assert len(again.rows("m", [UP])) == 1
        again.close()


def test_eight_processes_opening_a_new_store_at_once_and_writing_500_facts_each_lose_none(
    backend_url: str,
) -> None:
    """Eight replicas start at once on a new store (they race to migrate it), then write."""
    processes, count = 8, 500
    context = multiprocessing.get_context("spawn")
    start_at = time.time() + 3.0  # every process started and connected, then all write
    with ProcessPoolExecutor(processes, mp_context=context) as pool:
        done = list(
            pool.map(
                workers.write_facts,
                [backend_url] * processes,
                range(processes),
                [count] * processes,
                [start_at] * processes,
            )
        )
    assert done == [count] * processes
    store = open_store(backend_url)
    try:
        assert store.schema_version() >= 1
        snapshot = store.snapshot()
        for worker in range(processes):
            mine = [f for u, _, f in snapshot if u == f"http://worker-{worker}/v1"]
            assert len(mine) == count
            assert all(f.detail == f"w{worker}" for f in mine)
        shared = layers_by_name(f for _, f in store.rows("shared-model", ["http://shared/v1"]))
        assert {f.source for f in shared["dialect"]} == set(Source)
        assert shared["dialect"][0].source is Source.USER
    finally:
        store.close()


def test_documents_are_kept_replaced_expired_and_bounded(backend_url: str) -> None:
    store = open_store(backend_url)
    try:
        docs = store  # every backend is also a DocumentStore
        assert hasattr(docs, "put_document")
        docs.document_limit = 3
        docs.put_document("response:1", {"output": [{"type": "message", "text": "hé"}]})
        assert docs.get_document("response:1") == {"output": [{"type": "message", "text": "hé"}]}
        docs.put_document("response:1", [1, 2])
        assert docs.get_document("response:1") == [1, 2]
        assert docs.get_document("response:none") is None
        docs.put_document("short", "gone soon", ttl=0.05)
        time.sleep(0.2)
        assert docs.get_document("short") is None
        for n in range(2, 7):
            docs.put_document(f"response:{n}", n)
            time.sleep(0.002)
        kept = [n for n in range(1, 7) if docs.get_document(f"response:{n}") is not None]
        assert kept == [4, 5, 6]
        assert docs.delete_document("response:6") is True
        assert docs.delete_document("response:6") is False
        with pytest.raises(StoreError, match="limit"):
            docs.put_document("big", "x" * (MAX_DOCUMENT_BYTES + 1))
    finally:
        store.close()


def test_documents_written_together_are_all_made_and_read_back_by_anyone(
    backend_url: str,
) -> None:
    """write_documents makes puts and deletions in order, at once; a store that serves the
    documents it wrote without reading them sees another connection's writes all the same."""
    from toolshim.capabilities.store import DocumentWrite, document_json

    first, second = open_store(backend_url), open_store(backend_url)
    try:
        for docs in (first, second):
            docs.document_limit = 100  # type: ignore[attr-defined]
        first.write_documents(  # type: ignore[attr-defined]
            [
                DocumentWrite("a", document_json("a", {"n": 1})),
                DocumentWrite("b", document_json("b", [1, "é"]), ttl=60.0),
                DocumentWrite("c", document_json("c", "gone")),
                DocumentWrite("c", None),
            ]
        )
        assert first.get_document("a") == {"n": 1}  # type: ignore[attr-defined]
        assert second.get_document("b") == [1, "é"]  # type: ignore[attr-defined]
        assert first.get_document("c") is None  # type: ignore[attr-defined]
        second.write_documents([DocumentWrite("a", document_json("a", {"n": 2}))])  # type: ignore[attr-defined]
        assert first.get_document("a") == {"n": 2}  # type: ignore[attr-defined]
        assert second.delete_document("b") is True  # type: ignore[attr-defined]
        assert first.get_document("b") is None  # type: ignore[attr-defined]
    finally:
        first.close()
        second.close()


def test_a_shared_store_announces_every_change(backend_url: str) -> None:
    writer, reader = open_store(backend_url), open_store(backend_url)
    heard: list[tuple[str | None, str | None]] = []
    arrived = threading.Event()

    def changed(upstream: str | None, model: str | None) -> None:
        heard.append((upstream, model))
        if model is not None:
            arrived.set()

    watch = reader.watch(changed)
    try:
        if not reader.shared:
            assert watch is None
            return
        assert watch is not None
        deadline = time.monotonic() + 10
        while not heard and time.monotonic() < deadline:  # subscribed: it says (None, None)
            time.sleep(0.01)
        assert heard[:1] == [(None, None)]
        writer.put(UP, "m", Fact("native_tools", "no", Source.RUNTIME_ERROR))
        assert arrived.wait(10)
        assert (UP, "m") in heard
        arrived.clear()
        writer.forget(None, "m")
        assert arrived.wait(10)
        assert heard[-1] == (None, "m")
    finally:
        if watch is not None:
            watch.close()
        writer.close()
        reader.close()


def test_the_location_never_shows_a_password(backend_url: str) -> None:
    store = open_store(backend_url)
    try:
        assert "s3cret" not in store.location
        if "://" in backend_url and "@" in backend_url:
            assert ":***@" in store.location
    finally:
        store.close()


def test_a_store_of_a_newer_schema_is_left_alone(backend_url: str) -> None:
    """A store a newer toolshim migrated further is refused (StoreError), never downgraded;
    the registry keeps its facts in memory meanwhile."""
    first = open_store(backend_url)
    first.put(UP, "m", Fact("native_tools", "no", Source.USER, 1.0))
    first.close()
    if backend_url.startswith("sqlite:"):
        import sqlite3

        conn = sqlite3.connect(backend_url.removeprefix("sqlite://"))
        conn.execute("PRAGMA user_version = 99")
        conn.commit()
        conn.close()
    elif backend_url.startswith("postgresql:"):
        import psycopg

        with psycopg.connect(backend_url, autocommit=True) as conn:
            conn.execute("UPDATE toolshim_schema SET version = 99")
    else:
        import redis

        prefix = backend_url.rsplit("prefix=", 1)[1]
        with redis.Redis.from_url(backend_url.split("?")[0]) as client:
            client.set(f"{prefix}:schema", 99)

    def read() -> None:
        store = open_store(backend_url)  # SQLite refuses here; a server store on first use
        try:
            store.rows("m", [UP])
        finally:
            store.close()

    with pytest.raises(StoreError, match="schema version 99, newer"):
        read()
