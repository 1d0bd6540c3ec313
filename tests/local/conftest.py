"""Fixtures of the local-model tests: a stand-in GGUF file, and the fake llama.cpp behind the launcher."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

TESTS_ROOT = Path(__file__).parents[1]


@pytest.fixture
def gguf(tmp_path: Path) -> Path:
    """A file named like a model (its content is never read by the fakes)."""
    path = tmp_path / "some-model.gguf"
    path.write_bytes(b"GGUF not really")
    return path


@pytest.fixture
def fake_llama(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """The launcher's child can import tests/local/fake_launcher.py; FAKE_LLAMA=ok by default."""
    monkeypatch.setenv("FAKE_LLAMA", "ok")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS_ROOT.parent), *sys.path]))
    return monkeypatch
