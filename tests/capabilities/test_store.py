"""The SQLite store: layers per source, several processes, migrations, corrupt files."""

from __future__ import annotations

import importlib
import json
import logging
import multiprocessing
import os
import shutil
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.capabilities import workers
from toolshim.capabilities.facts import Fact, Source
from toolshim.capabilities.registry import Registry
from toolshim.capabilities.store import default_store_path
from toolshim.capabilities.stores.sqlite import MIGRATIONS, CapabilityStore
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
    assert again.schema_version() == len(MIGRATIONS)
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
    assert store.schema_version() == len(MIGRATIONS)
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
    assert registry.location == "memory (not saved)"
    assert registry.problem is not None and "newer" in registry.problem
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


def _as_nobody(run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``run()`` in a forked child that became an unprivileged user (root may write any
    file, so permissions only bite another user); its JSON-able result, or the error."""
    # The child cannot import from root's Python install: import what it needs here.
    importlib.import_module("_strptime")
    Registry.open(":memory:").known()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        status = 1
        try:
            os.close(read_end)
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            os.write(write_end, json.dumps(run()).encode())
            status = 0
        except BaseException as exc:
            os.write(write_end, json.dumps({"error": repr(exc)}).encode())
        finally:
            os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        report: dict[str, Any] = json.loads(pipe.read() or b"{}")
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, report
    return report


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory under /tmp that another user may enter (pytest's tmp_path is private)."""
    workdir = Path(tempfile.mkdtemp(prefix="toolshim-perm-", dir="/tmp"))
    workdir.chmod(0o777)
    try:
        yield workdir
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


needs_root = pytest.mark.skipif(
    not hasattr(os, "fork") or os.geteuid() != 0, reason="needs root to become another user"
)


def _seed_user_facts(path: Path, count: int) -> None:
    seeded = CapabilityStore(path)
    for i in range(count):
        seeded.put(UP, f"model-{i:03d}", Fact("native_tools", "no", Source.USER, detail="mine"))
    seeded.close()


@needs_root
@pytest.mark.parametrize("locked", ["file", "file-not-yet-wal", "directory"])
def test_a_read_only_store_is_used_read_only_and_never_moved_aside(
    shared_dir: Path, locked: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A valid store another user may read but not write (the file, or the directory that
    would hold its journal) keeps its 160 user facts: read with a warning, never renamed to
    ``.corrupt-…`` and replaced by an empty store (what toolshim did to a store that was not
    yet in WAL mode); what is learned is kept in memory and acted on."""
    path = shared_dir / "caps.sqlite3"
    _seed_user_facts(path, 160)
    if locked == "file-not-yet-wal":  # a store last written with a rollback journal
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA journal_mode = DELETE")
        conn.close()
    before = path.read_bytes()
    path.chmod(0o444)
    if locked == "directory":
        path.chmod(0o644)
        shared_dir.chmod(0o555)

    def child() -> dict[str, Any]:
        registry = Registry.open(path)
        learned = registry.learn(UP, "new-model", "native_tools", "yes", Source.RUNTIME_ERROR)
        try:
            registry.flush()
            flushed = "yes"
        except StoreError as exc:
            flushed = exc.message
        return {
            "known": len(registry.known(UP)),
            "value": registry.native_tools(UP, "model-159").value,
            "learned": learned.value,
            "acted_on": registry.native_tools(UP, "new-model").value,
            "flushed": flushed,
            "notices": list(registry.notices),
            "location": registry.location,
        }

    try:
        report = _as_nobody(child)
    finally:
        shared_dir.chmod(0o777)
    assert report["known"] == 161  # the 160 stored, and the one learned (in memory)
    assert report["value"] == "no"
    assert (report["learned"], report["acted_on"]) == ("yes", "yes")
    assert "could not be written" in report["flushed"]
    assert any("read-only" in n for n in report["notices"]), report["notices"]
    assert report["location"] == str(path)
    assert not list(shared_dir.glob("*.corrupt-*"))
    assert path.read_bytes() == before
    assert len(CapabilityStore(path).snapshot()) == 160


@needs_root
def test_a_store_without_read_permission_is_left_alone(shared_dir: Path) -> None:
    """A store another user may not even read is not corrupt: it is left as it is and facts
    are kept in memory, with the reason."""
    path = shared_dir / "caps.sqlite3"
    _seed_user_facts(path, 3)
    path.chmod(0o000)

    def child() -> dict[str, Any]:
        registry = Registry.open(path)
        return {"location": registry.location, "notices": list(registry.notices)}

    report = _as_nobody(child)
    assert report["location"] == "memory (not saved)"
    assert any("left as it is" in n for n in report["notices"]), report["notices"]
    assert not list(shared_dir.glob("*.corrupt-*"))
    assert os.stat(path).st_mode & 0o777 == 0
    path.chmod(0o644)
    assert len(CapabilityStore(path).snapshot()) == 3


def test_a_store_that_cannot_be_created_falls_back_to_memory(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    registry = Registry.open(blocker / "caps.sqlite3")
    assert registry.location == "memory (not saved)"
    assert registry.problem
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
    assert store.schema_version() == len(MIGRATIONS)
