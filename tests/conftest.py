"""Shared test set-up: a private capability store per test, and hypothesis tuned for shared CI
machines (no per-example deadline, no "generation is slow" health check: both measure the
machine's load, not the code), and a garbage collection after each test module."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("toolshim", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("toolshim")


@pytest.fixture(autouse=True)
def _private_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "capabilities.sqlite3"
    monkeypatch.setenv("TOOLSHIM_REGISTRY", str(path))
    return path


@pytest.fixture(autouse=True, scope="module")
def _collect_garbage_per_module() -> Iterator[None]:
    """Collect garbage as each module ends: an unclosed socket or file a module's tests leave
    behind then fails that module's last test (``filterwarnings = error``), not whichever test
    of another module happens to trigger the collection."""
    yield
    gc.collect()


@pytest.fixture(autouse=True)
def _no_listening_thread_left() -> Iterator[None]:
    """A test that opens a shared capability store closes it: a listening thread left behind
    keeps reconnecting and logs into the tests after it."""
    before = {t.ident for t in threading.enumerate()}
    yield
    left = [
        t.name
        for t in threading.enumerate()
        if t.ident not in before and t.name.startswith("toolshim-listen") and t.is_alive()
    ]
    assert not left, f"listening threads left running: {left}"
