"""The probe: one request with a dummy tool, classified supported / unsupported / inconclusive."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.capabilities.fake_servers import FakeModel, closed_port_url, fake_server
from toolshim.capabilities.facts import Source
from toolshim.capabilities.probe import (
    PROBE_TOOL,
    ProbeOutcome,
    probe_body,
    probe_tools,
    record_probe,
)
from toolshim.capabilities.registry import Registry
from toolshim.errors import UpstreamStatusError
from toolshim.testing import REJECTION_MESSAGES, FakeUpstream, FunctionUpstream, Reply, call
from toolshim.upstreams.openai_http import OpenAIUpstream


def test_the_probe_request_carries_one_dummy_tool() -> None:
    body = probe_body("m")
    assert body["model"] == "m"
    assert [t["function"]["name"] for t in body["tools"]] == [PROBE_TOOL.name]
    assert body["stream"] is False


async def test_native_tool_calls_mean_supported() -> None:
    upstream = FakeUpstream([Reply(None, [call("get_current_time", {"timezone": "Europe/Paris"})])])
    result = await probe_tools(upstream, "qwen2.5:7b")
    assert result.outcome is ProbeOutcome.SUPPORTED
    assert "get_current_time" in result.detail
    assert upstream.history[0]["tools"][0]["function"]["name"] == "get_current_time"


@pytest.mark.parametrize("kind", sorted(REJECTION_MESSAGES))
async def test_a_rejection_means_unsupported(kind: str) -> None:
    result = await probe_tools(FakeUpstream(tools="reject", rejection=kind), "gemma3:1b")
    assert result.outcome is ProbeOutcome.UNSUPPORTED
    assert "rejected tools" in result.detail


async def test_a_call_written_as_text_means_unsupported() -> None:
    text = '```json\n{"name": "get_current_time", "arguments": {"timezone": "Europe/Paris"}}\n```'
    result = await probe_tools(FakeUpstream([text], tools="ignore"), "qwen2.5-coder:0.5b")
    assert result.outcome is ProbeOutcome.UNSUPPORTED
    assert "wrote the call as text" in result.detail


async def test_a_plain_answer_is_inconclusive() -> None:
    result = await probe_tools(FakeUpstream(["It is noon."], tools="ignore"), "m")
    assert result.outcome is ProbeOutcome.INCONCLUSIVE
    assert "accepted tools" in result.detail
    assert result.support is None


async def test_no_answer_in_time_is_inconclusive_never_no() -> None:
    async def slow(body: dict[str, Any]) -> str:
        await asyncio.sleep(30)
        return "late"

    result = await probe_tools(FunctionUpstream(slow), "m", time_limit=0.2)
    assert result.outcome is ProbeOutcome.INCONCLUSIVE
    assert "no answer within 0.2 s" in result.detail


async def test_a_network_error_is_inconclusive() -> None:
    upstream = OpenAIUpstream(closed_port_url())
    try:
        result = await probe_tools(upstream, "m", time_limit=2)
    finally:
        await upstream.aclose()
    assert result.outcome is ProbeOutcome.INCONCLUSIVE
    assert "could not reach" in result.detail


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (404, "model 'nope' not found, try pulling it first"),
        (429, "Rate limit reached for requests"),
        (500, "Internal server error"),
    ],
)
async def test_other_errors_are_inconclusive(status: int, message: str) -> None:
    upstream = FakeUpstream([UpstreamStatusError(message, status=status)])
    result = await probe_tools(upstream, "nope")
    assert result.outcome is ProbeOutcome.INCONCLUSIVE
    assert f"HTTP {status}" in result.detail


async def test_an_unreadable_answer_is_inconclusive() -> None:
    result = await probe_tools(FakeUpstream([{"not": "a completion"}]), "m")
    assert result.outcome is ProbeOutcome.INCONCLUSIVE


async def test_over_real_http_each_kind_of_model_is_classified() -> None:
    with fake_server(
        "ollama",
        FakeModel("qwen2.5:7b", chat="tools"),
        FakeModel("gemma3:1b", chat="reject"),
        FakeModel("coder:0.5b", chat="text-call"),
        FakeModel("chatty:1b", chat="text"),
        FakeModel("stuck:1b", chat="slow"),
    ) as server:
        upstream = OpenAIUpstream(server.base_url)
        try:
            outcomes = {
                name: (await probe_tools(upstream, name, time_limit=0.5)).outcome
                for name in ("qwen2.5:7b", "gemma3:1b", "coder:0.5b", "chatty:1b", "stuck:1b")
            }
        finally:
            await upstream.aclose()
    assert outcomes == {
        "qwen2.5:7b": ProbeOutcome.SUPPORTED,
        "gemma3:1b": ProbeOutcome.UNSUPPORTED,
        "coder:0.5b": ProbeOutcome.UNSUPPORTED,
        "chatty:1b": ProbeOutcome.INCONCLUSIVE,
        "stuck:1b": ProbeOutcome.INCONCLUSIVE,
    }


async def test_conclusive_results_are_stored_as_probe_inconclusive_ones_not(tmp_path: Path) -> None:
    registry = Registry.open(tmp_path / "caps.sqlite3")
    up = "http://127.0.0.1:11434/v1"
    rejected = await probe_tools(FakeUpstream(tools="reject"), "custom:1")
    fact = record_probe(registry, up, rejected)
    assert fact is not None and (fact.value, fact.source) == ("no", Source.PROBE)
    assert "rejected tools" in fact.detail
    silent = await probe_tools(FakeUpstream(["hi"], tools="ignore"), "other:1")
    assert record_probe(registry, up, silent) is None
    assert registry.fact(up, "other:1", "native_tools") is None
    # A probe outranks a runtime error but not a person.
    registry.learn(up, "custom:1", "native_tools", "yes", Source.USER)
    assert record_probe(registry, up, rejected).source is Source.USER  # type: ignore[union-attr]
