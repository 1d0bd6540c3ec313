"""Shared test set-up: a private capability store per test, and hypothesis tuned for shared CI
machines (no per-example deadline, no "generation is slow" health check: both measure the
machine's load, not the code)."""

from __future__ import annotations

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
