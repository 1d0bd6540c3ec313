"""The embedded model's registry key: stable per model file, so what one run learns holds in the next."""

from __future__ import annotations

import functools
import io
from pathlib import Path

import pytest
from rich.console import Console

import toolshim.local
from toolshim.capabilities.facts import Source, Support
from toolshim.capabilities.registry import Registry
from toolshim.cli._common import UpstreamTarget, registry_key, upstream_target
from toolshim.dialects import available_dialects
from toolshim.engine.engine import Engine
from toolshim.errors import LocalModelError
from toolshim.local import KNOWN_MODELS, EmbeddedServer
from toolshim.upstreams.aiohttp_upstream import AiohttpUpstream
from toolshim.upstreams.openai_http import OpenAIUpstream

from .helpers import FAKE_LAUNCHER


def test_the_key_names_the_model_file_and_is_known_before_start(gguf: Path) -> None:
    server = EmbeddedServer(gguf, port=43210)
    assert server.key == "embedded://some-model.gguf"
    assert EmbeddedServer(gguf, alias="other", ctx_size=2048).key == server.key
    assert EmbeddedServer(gguf.with_name("other.gguf")).key == "embedded://other.gguf"


@pytest.mark.parametrize("adapter", [OpenAIUpstream, AiohttpUpstream])
def test_adapters_key_by_url_unless_told_otherwise(
    adapter: type[OpenAIUpstream] | type[AiohttpUpstream],
) -> None:
    by_url = adapter("127.0.0.1:8080/")
    assert by_url.key == by_url.base_url == "http://127.0.0.1:8080/v1"
    assert "key=" not in repr(by_url)
    keyed = adapter("http://127.0.0.1:8080/v1", key="embedded://m.gguf")
    assert keyed.key == "embedded://m.gguf"
    assert keyed.base_url == "http://127.0.0.1:8080/v1"  # requests still go to the URL
    assert "key='embedded://m.gguf'" in repr(keyed)


def test_registry_key_keeps_embedded_keys_and_normalises_urls() -> None:
    assert registry_key(" embedded://m.gguf ") == "embedded://m.gguf"
    assert registry_key("http://127.0.0.1:11434") == "http://127.0.0.1:11434/v1"


def test_every_known_model_prefers_a_dialect_this_toolshim_has() -> None:
    """Otherwise record_capabilities would drop it (with a warning) on every start."""
    for model in KNOWN_MODELS.values():
        assert model.dialect is None or model.dialect in available_dialects(), model.name


def test_a_server_given_by_url_is_keyed_by_its_url(tmp_path: Path) -> None:
    registry = Registry.open(tmp_path / "reg.sqlite3")
    with upstream_target("127.0.0.1:9", None, registry, Console()) as target:
        assert target == UpstreamTarget("http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1")
        assert not target.embedded
    assert registry.known() == []


@pytest.mark.e2e
def test_successive_embedded_sessions_share_what_they_learned(
    gguf: Path, tmp_path: Path, fake_llama: pytest.MonkeyPatch
) -> None:
    """Two sessions of the shared CLI piece, each a real EmbeddedServer (the real launcher over
    a fake llama.cpp) on its own random port, over one SQLite store."""
    fake_llama.setattr(
        toolshim.local, "EmbeddedServer", functools.partial(EmbeddedServer, launcher=FAKE_LAUNCHER)
    )
    store = tmp_path / "capabilities.sqlite3"
    shown = io.StringIO()
    console = Console(file=shown, width=200)

    with upstream_target(None, gguf, Registry.open(store), console) as first:
        assert first.embedded and first.model == "some-model.gguf"
        assert first.key == "embedded://some-model.gguf"
        assert first.base_url.startswith("http://127.0.0.1:")
        # What the server reports was recorded under the key ...
        session = Registry.open(store)
        reported = session.fact(first.key, first.model, "native_tools")
        assert reported is not None and (reported.value, reported.source) == (
            "yes",
            Source.UPSTREAM,
        )
        # ... and something learned while it ran (as the engine records a rejection).
        session.learn(first.key, first.model, "native_tools", "no", Source.RUNTIME_ERROR, "500")

    with upstream_target(None, gguf, Registry.open(store), console) as second:
        assert second.key == first.key
        registry = Registry.open(store)
        engine = Engine(OpenAIUpstream(second.base_url, key=second.key), registry=registry)
        try:
            # The server reports "yes" again; the stronger fact from the first session stands.
            assert engine.support(second.model) is Support.NO
        finally:
            engine.close()
    assert "(its facts are kept as embedded://some-model.gguf)" in shown.getvalue()

    stored = Registry.open(store).known()
    assert [(key, model) for key, model, _ in stored] == [
        ("embedded://some-model.gguf", "some-model.gguf")
    ]
    assert set(stored[0][2]) >= {"native_tools", "structured_output", "context_window"}


def test_a_known_model_is_chosen_by_name(tmp_path: Path) -> None:
    """``local_model`` goes through the known models (``toolshim eval --local-model``)."""
    registry = Registry.open(tmp_path / "reg.sqlite3")
    with (
        pytest.raises(LocalModelError, match="unknown local model 'nope'; known models: "),
        upstream_target(None, None, registry, Console(quiet=True), local_model="nope"),
    ):
        pass
    assert registry.known() == []
