"""The SQLite store: layers per source, several processes, migrations, corrupt files."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import shutil
import sqlite3
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from tests.capabilities import workers
from toolshim.capabilities.facts import Fact, Source
from toolshim.capabilities.registry import Registry
from toolshim.capabilities.store import MIGRATIONS, CapabilityStore, default_store_path
from toolshim.errors import StoreError

UP = "http://127.0.0.1:11434/v1"


@pytest.fixture
def store(tmp_path: Path) -> CapabilityStore:
    return CapabilityStore(tmp_path / "caps.sqlite3")


def test_facts_survive_reopening_and_keep_source_time_and_detail(tmp_path: Path) -> None:
    path = tmp_path / "caps.sqlite3"
    first = CapabilityStore(path)
    first.put(UP, "gemma3:1b", Fact("native_tools", "no", Source.RUNTIME_ERROR, 123.5, "ollama"))
    first.close()
    again = CapabilityStore(path)
    fact = again.get(UP, "gemma3:1b")["native_tools"]
    assert (fact.value, fact.source, fact.updated_at, fact.detail) == (
        "no",
        Source.RUNTIME_ERROR,
        123.5,
        "ollama",
    )
    assert again.schema_version == len(MIGRATIONS)
    mode = sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_each_source_keeps_its_layer_and_the_strongest_stands(store: CapabilityStore) -> None:
    standing = store.put(UP, "m", Fact("native_tools", "yes", Source.PROBE, 10.0))
    assert standing.source is Source.PROBE
    standing = store.put(UP, "m", Fact("native_tools", "no", Source.RUNTIME_ERROR, 20.0))
    assert (standing.value, standing.source) == ("yes", Source.PROBE)
    layers = store.layers(UP, "m")["native_tools"]
    assert [(f.source, f.value) for f in layers] == [
        (Source.PROBE, "yes"),
        (Source.RUNTIME_ERROR, "no"),
    ]
    assert store.forget(UP, "m", sources=[Source.PROBE]) == 1
    assert store.get(UP, "m")["native_tools"].value == "no"


def test_an_older_fact_from_the_same_source_does_not_replace_a_newer_one(
    store: CapabilityStore,
) -> None:
    store.put(UP, "m", Fact("dialect", "hermes", Source.UPSTREAM, 50.0))
    assert store.put(UP, "m", Fact("dialect", "json", Source.UPSTREAM, 40.0)).value == "hermes"
    assert (
        store.put(UP, "m", Fact("dialect", "pythonic", Source.UPSTREAM, 60.0)).value == "pythonic"
    )
    assert len(store.layers(UP, "m")["dialect"]) == 1


def test_forget_by_upstream_fact_and_everywhere(store: CapabilityStore) -> None:
    for up in (UP, "http://other/v1"):
        store.put(up, "m", Fact("native_tools", "no", Source.USER))
        store.put(up, "m", Fact("dialect", "json", Source.USER))
    assert store.forget(UP, "m", names=["dialect"]) == 1
    assert set(store.get(UP, "m")) == {"native_tools"}
    assert store.forget(None, "m") == 3
    assert store.entries() == []


def test_entries_and_seen_models(store: CapabilityStore) -> None:
    store.put(UP, "b", Fact("native_tools", "yes", Source.UPSTREAM))
    store.put(UP, "a", Fact("native_tools", "no", Source.PROFILE))
    store.put(UP, "a", Fact("native_tools", "yes", Source.USER))
    entries = store.entries()
    assert [(u, m) for u, m, _ in entries] == [(UP, "a"), (UP, "b")]
    assert entries[0][2]["native_tools"].source is Source.USER
    store.record_seen(UP, ["a", "b"], when=5.0)
    store.record_seen(UP, ["a"], when=9.0)
    assert store.seen(UP) == [(UP, "a", 9.0), (UP, "b", 5.0)]


def test_the_default_location_is_the_env_var_or_the_user_data_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TOOLSHIM_REGISTRY", str(tmp_path / "x.sqlite3"))
    assert default_store_path() == tmp_path / "x.sqlite3"
    monkeypatch.delenv("TOOLSHIM_REGISTRY")
    path = default_store_path()
    assert path.name == "capabilities.sqlite3"
    assert "toolshim" in str(path.parent)


# -- several processes ------------------------------------------------------------------------


def test_several_processes_writing_at_once_lose_no_fact(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.sqlite3")
    processes, count = 4, 40
    start_at = time.time() + 2.0  # let every process start, then all write at once
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(processes, mp_context=context) as pool:
        done = list(
            pool.map(
                workers.write_facts,
                [path] * processes,
                range(processes),
                [count] * processes,
                [start_at] * processes,
            )
        )
    assert done == [count] * processes
    store = CapabilityStore(path)
    for worker in range(processes):
        facts = [store.get(f"http://worker-{worker}/v1", f"model-{i}") for i in range(count)]
        assert all(f["native_tools"].detail == f"w{worker}" for f in facts)
    layers = store.layers("http://shared/v1", "shared-model")["dialect"]
    assert {f.source for f in layers} == {workers.SOURCES[w] for w in range(processes)}
    # Each source's layer ends with that worker's last write; the strongest source stands.
    assert all(f.value.endswith(f"-{count - 1}") for f in layers)
    assert layers[0].source is max(
        (workers.SOURCES[w] for w in range(processes)), key=lambda s: s.rank
    )


# -- schema versions and migrations -----------------------------------------------------------


def test_a_version_1_store_is_upgraded_and_keeps_its_facts(tmp_path: Path) -> None:
    path = tmp_path / "v1.sqlite3"
    conn = sqlite3.connect(path)
    conn.execute(MIGRATIONS[0][0])
    conn.execute("PRAGMA user_version = 1")
    conn.execute(
        "INSERT INTO facts VALUES (?, ?, ?, ?, ?, ?, ?)",
        (UP, "gemma3:1b", "native_tools", json.dumps("no"), "runtime_error", 42.0, "ollama"),
    )
    conn.commit()
    conn.close()
    store = CapabilityStore(path)
    assert store.schema_version == 2
    fact = store.get(UP, "gemma3:1b")["native_tools"]
    assert (fact.value, fact.source, fact.updated_at) == ("no", Source.RUNTIME_ERROR, 42.0)
    # The upgraded schema keeps a layer per source.
    store.put(UP, "gemma3:1b", Fact("native_tools", "yes", Source.PROFILE, 50.0))
    assert len(store.layers(UP, "gemma3:1b")["native_tools"]) == 2
    store.record_seen(UP, ["gemma3:1b"])
    assert store.seen(UP)[0][1] == "gemma3:1b"


def test_a_store_from_a_newer_toolshim_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "future.sqlite3"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE facts (x)")
    conn.execute("PRAGMA user_version = 99")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(StoreError, match="schema version 99, newer"):
        CapabilityStore(path)
    assert path.read_bytes() == before
    registry = Registry.open(path)
    assert registry.store is None
    assert registry.store_problem is not None and "newer" in registry.store_problem
    assert registry.learn(UP, "m", "native_tools", "no", Source.USER).value == "no"
    assert registry.native_tools(UP, "m").value == "no"


def test_another_programs_database_is_not_taken_over(tmp_path: Path) -> None:
    path = tmp_path / "someone-elses.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE users (name TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="not a toolshim capability store"):
        CapabilityStore(path)
    tables = sqlite3.connect(path).execute("SELECT name FROM sqlite_master").fetchall()
    assert tables == [("users",)]


# -- corrupt or unreadable files --------------------------------------------------------------


def _moved(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + ".corrupt-*"))


def _assert_rebuilt(path: Path, caplog: pytest.LogCaptureFixture) -> CapabilityStore:
    store = CapabilityStore(path)
    assert store.moved_aside is not None
    assert _moved(path) and str(_moved(path)[0]) == store.moved_aside
    assert any(
        "moved it to" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING
    )
    store.put(UP, "m", Fact("native_tools", "yes", Source.USER))
    assert store.get(UP, "m")["native_tools"].value == "yes"
    return store


def test_garbage_bytes_are_moved_aside_and_the_store_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "caps.sqlite3"
    path.write_bytes(b"this is not a database, it is a shopping list\n" * 200)
    _assert_rebuilt(path, caplog)
    assert _moved(path)[0].read_bytes().startswith(b"this is not a database")


def test_a_truncated_store_is_moved_aside_and_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "caps.sqlite3"
    store = CapabilityStore(path)
    for i in range(400):
        store.put(UP, f"model-{i:04d}", Fact("dialect", "x" * 200, Source.UPSTREAM))
    store.close()
    size = path.stat().st_size
    with path.open("r+b") as handle:
        handle.truncate(size // 3)
    _assert_rebuilt(path, caplog)


def test_a_directory_in_the_stores_place_is_moved_aside(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "caps.sqlite3"
    path.mkdir()
    (path / "keep.txt").write_text("mine")
    _assert_rebuilt(path, caplog)
    assert (_moved(path)[0] / "keep.txt").read_text() == "mine"


def test_a_second_corruption_in_the_same_second_keeps_both_copies(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "caps.sqlite3"
    for n in range(2):
        path.unlink(missing_ok=True)
        for suffix in ("-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        path.write_bytes(f"garbage {n}".encode() * 100)
        CapabilityStore(path).close()
    assert len(_moved(path)) == 2


NOBODY = 65534


@pytest.mark.skipif(
    not hasattr(os, "fork") or os.geteuid() != 0, reason="needs root to become another user"
)
def test_a_store_without_read_permission_is_moved_aside_and_rebuilt(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A forked child becomes an unprivileged user (root reads any file) and opens a store
    it may not read."""
    workdir = Path(tempfile.mkdtemp(prefix="toolshim-perm-", dir="/tmp"))
    try:
        workdir.chmod(0o777)
        path = workdir / "caps.sqlite3"
        seeded = CapabilityStore(path)
        seeded.put(UP, "m", Fact("native_tools", "no", Source.USER))
        seeded.close()
        path.chmod(0o000)
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns into pytest
            status = 1
            try:
                os.close(read_end)
                os.setgid(NOBODY)
                os.setuid(NOBODY)
                store = CapabilityStore(path)
                report = {"moved": store.moved_aside, "facts": sorted(store.get(UP, "m"))}
                os.write(write_end, json.dumps(report).encode())
                status = 0
            except BaseException as exc:
                os.write(write_end, json.dumps({"error": repr(exc)}).encode())
            finally:
                os._exit(status)
        os.close(write_end)
        with os.fdopen(read_end, "rb") as pipe:
            report = json.loads(pipe.read() or b"{}")
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, report
        assert report["moved"].startswith(str(path) + ".corrupt-")
        assert report["facts"] == []
        assert os.stat(report["moved"]).st_mode & 0o777 == 0  # kept as it was, unreadable
        assert os.stat(path).st_uid == NOBODY  # the rebuilt store belongs to the new user
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def test_a_store_that_cannot_be_created_falls_back_to_memory(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    registry = Registry.open(blocker / "caps.sqlite3")
    assert registry.store is None
    assert registry.store_problem
    registry.learn(UP, "m", "native_tools", "no", Source.RUNTIME_ERROR)
    assert registry.native_tools(UP, "m").value == "no"


def test_opening_waits_for_another_process_that_is_setting_up_the_same_file(
    tmp_path: Path,
) -> None:
    """A second process that opens a new store while the first still holds it (writing the
    schema, switching to WAL) waits instead of failing: SQLite's busy timeout does not cover
    the journal-mode switch."""
    path = tmp_path / "new.sqlite3"
    first = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    first.execute("BEGIN IMMEDIATE")
    release = threading.Timer(0.3, lambda: first.execute("COMMIT"))
    release.start()
    try:
        store = CapabilityStore(path, timeout=5)
    finally:
        release.join()
        first.close()
    assert store.schema_version == len(MIGRATIONS)
