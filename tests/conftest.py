"""Shared fixtures: every test gets a private capability store, never the user's."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _private_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "capabilities.sqlite3"
    monkeypatch.setenv("TOOLSHIM_REGISTRY", str(path))
    return path
