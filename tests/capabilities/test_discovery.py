"""Discovery against real HTTP servers on 127.0.0.1 that answer like Ollama, LM Studio, llama-server
and OpenRouter."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.capabilities.fake_servers import FakeModel, closed_port_url, fake_server
from toolshim.capabilities.discovery import (
    DiscoveredModel,
    apply_discovery,
    discover,
    list_upstream_models,
    parse_parameter_size,
    refresh,
    server_root,
)
from toolshim.capabilities.facts import Source
from toolshim.capabilities.registry import Registry
from toolshim.errors import UpstreamConnectionError, UpstreamStatusError


def test_the_native_api_lives_at_the_root() -> None:
    assert server_root("http://127.0.0.1:11434/v1") == "http://127.0.0.1:11434"
    assert server_root("127.0.0.1:11434") == "http://127.0.0.1:11434"
    assert server_root("http://host:1234/v1/") == "http://host:1234"


@pytest.mark.parametrize(
    ("text", "count"),
    [
        ("494.03M", 494.03e6),
        ("7.6B", 7.6e9),
        ("1B", 1e9),
        ("270m", 270e6),
        ("big", None),
        ("", None),
    ],
)
def test_ollama_parameter_sizes_are_read(text: str, count: float | None) -> None:
    assert parse_parameter_size(text) == count


async def test_ollama_capabilities_context_and_size_are_discovered() -> None:
    with fake_server(
        "ollama",
        FakeModel("qwen2.5:7b", context_length=32768),
        FakeModel(
            "gemma3:1b",
            capabilities=["completion", "vision"],
            context_length=32768,
            parameter_size="999.89M",
        ),
        FakeModel("old-model", capabilities=None, template="{{ if .Tools }}tools{{ end }}"),
        FakeModel("old-plain", capabilities=None, template="{{ .Prompt }}", context_length=None),
    ) as server:
        listing = await list_upstream_models(server.base_url)
        assert listing.server == "ollama"
        assert listing.models == ["gemma3:1b", "old-model", "old-plain", "qwen2.5:7b"]
        found = await discover(server.base_url)
        shown = server.posted("/api/show")
    by_name = {m.name: m for m in found.models}
    assert found.server == "ollama"
    assert {b["model"] for b in shown} == set(by_name)
    assert by_name["qwen2.5:7b"].facts["native_tools"][0] == "yes"
    assert "capabilities: completion, tools" in by_name["qwen2.5:7b"].facts["native_tools"][1]
    assert by_name["qwen2.5:7b"].facts["context_window"][0] == 32768
    assert "dialect" not in by_name["qwen2.5:7b"].facts
    assert by_name["gemma3:1b"].facts["native_tools"][0] == "no"
    assert by_name["gemma3:1b"].facts["dialect"][0] == "compact"  # 999.89M is under 1B
    assert by_name["old-model"].facts["native_tools"][0] == "yes"
    assert by_name["old-plain"].facts["native_tools"][0] == "no"
    assert "context_window" not in by_name["old-plain"].facts
    assert all(m.facts["tool_choice"][0] == "no" for m in found.models)
    assert found.problems == []


async def test_one_unreadable_model_is_reported_and_the_others_still_read() -> None:
    seen: list[DiscoveredModel] = []
    with fake_server(
        "ollama",
        FakeModel("good:1"),
        FakeModel("broken:1", show="error"),
        FakeModel("stuck:1", show="slow"),
    ) as server:
        found = await discover(server.base_url, request_timeout=0.5, on_model=seen.append)
    by_name = {m.name: m for m in found.models}
    assert by_name["good:1"].error is None and by_name["good:1"].facts
    assert by_name["broken:1"].error and not by_name["broken:1"].facts
    assert by_name["stuck:1"].error is not None and "did not answer" in by_name["stuck:1"].error
    assert sorted(m.name for m in seen) == ["broken:1", "good:1", "stuck:1"]
    assert len(found.problems) == 2


async def test_only_the_requested_models_are_read() -> None:
    with fake_server("ollama", FakeModel("a:1"), FakeModel("b:1")) as server:
        found = await discover(server.base_url, models=["b:1"])
        assert [b["model"] for b in server.posted("/api/show")] == ["b:1"]
    assert [m.name for m in found.models] == ["b:1"]


async def test_an_unreachable_upstream_is_one_clear_error() -> None:
    with pytest.raises(UpstreamConnectionError, match="could not reach"):
        await discover(closed_port_url(), request_timeout=1.0)


async def test_lm_studio_capabilities_are_discovered() -> None:
    with fake_server(
        "lm-studio",
        FakeModel(
            "llama-3.2-3b-instruct",
            listing={"capabilities": ["tool_use"], "max_context_length": 131072},
        ),
        FakeModel("mistralai/mistral-small-3.2", listing={"max_context_length": 131072}),
    ) as server:
        found = await discover(server.base_url)
    by_name = {m.name: m for m in found.models}
    assert found.server == "lm-studio"
    assert by_name["llama-3.2-3b-instruct"].facts["native_tools"][0] == "yes"
    # No tool_use tag: LM Studio still accepts tools with its default format, so nothing is said.
    assert "native_tools" not in by_name["mistralai/mistral-small-3.2"].facts
    assert by_name["mistralai/mistral-small-3.2"].facts["context_window"][0] == 131072


async def test_llama_server_context_comes_from_props() -> None:
    with fake_server("llama-server", FakeModel("Qwen2.5-0.5B-Instruct-Q4_K_M.gguf")) as server:
        found = await discover(server.base_url)
    assert found.server == "llama-server"
    assert found.models[0].facts["context_window"] == (8192, "llama-server /props n_ctx")


async def test_openrouter_style_listings_say_what_each_model_takes() -> None:
    with fake_server(
        "openai",
        FakeModel(
            "openai/gpt-4o",
            listing={
                "context_length": 128000,
                "supported_parameters": ["tools", "tool_choice", "structured_outputs"],
            },
        ),
        FakeModel(
            "deepseek/deepseek-r1:free",
            listing={
                "context_length": 163840,
                "supported_parameters": ["temperature", "reasoning"],
            },
        ),
        FakeModel("vllm-served", listing={"max_model_len": 4096}),
    ) as server:
        found = await discover(server.base_url)
    by_name = {m.name: m for m in found.models}
    assert found.server == "openai-compatible"
    gpt = by_name["openai/gpt-4o"].facts
    assert (gpt["native_tools"][0], gpt["tool_choice"][0], gpt["structured_output"][0]) == (
        "yes",
        "yes",
        "yes",
    )
    assert by_name["deepseek/deepseek-r1:free"].facts["native_tools"][0] == "no"
    assert by_name["vllm-served"].facts == {"context_window": (4096, "/models max_model_len")}


async def test_a_refused_model_list_is_reported_with_its_status() -> None:
    with fake_server("openai", FakeModel("x")) as server:
        server.models_status = 401
        with pytest.raises(UpstreamStatusError, match="HTTP 401: invalid api key"):
            await list_upstream_models(server.base_url)


async def test_a_callers_client_is_used_and_left_open() -> None:
    with fake_server("ollama", FakeModel("a:1")) as server:
        async with httpx.AsyncClient() as client:
            await discover(server.base_url, client=client)
            assert not client.is_closed


async def test_discovered_facts_are_stored_with_source_upstream(tmp_path: Path) -> None:
    registry = Registry.open(tmp_path / "caps.sqlite3")
    with fake_server(
        "ollama",
        FakeModel("gemma3:1b", capabilities=["completion"], parameter_size="999.89M"),
        FakeModel("broken:1", show="error"),
    ) as server:
        found = await discover(server.base_url)
        stored = apply_discovery(registry, server.base_url, found)
        key = server.base_url
    assert stored == 4  # native_tools, context_window, dialect, tool_choice
    fact = registry.fact(key, "gemma3:1b", "native_tools")
    assert fact is not None and (fact.value, fact.source) == ("no", Source.UPSTREAM)
    dialect = registry.fact(key, "gemma3:1b", "dialect")
    assert dialect is not None and dialect.source is Source.UPSTREAM
    assert [m for _, m, _ in registry.seen(key)] == ["gemma3:1b"]
    # A stronger source is not displaced by a later refresh.
    registry.learn(key, "gemma3:1b", "native_tools", "yes", Source.USER)
    apply_discovery(registry, key, found)
    assert registry.native_tools(key, "gemma3:1b").value == "yes"


async def test_the_startup_refresh_stores_facts_and_never_raises(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    registry = Registry.open(tmp_path / "caps.sqlite3")
    with fake_server("ollama", FakeModel("qwen2.5:7b"), FakeModel("broken:1", show="error")) as s:
        found = await refresh(registry, s.base_url)
        key = s.base_url
    assert found is not None and found.server == "ollama"
    fact = registry.fact(key, "qwen2.5:7b", "native_tools")
    assert fact is not None and fact.source is Source.UPSTREAM
    assert any("could not read broken:1" in r.getMessage() for r in caplog.records)
    assert await refresh(registry, closed_port_url(), request_timeout=1.0) is None
    assert any("could not refresh" in r.getMessage() for r in caplog.records)
