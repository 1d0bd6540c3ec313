"""GET /v1/models, /healthz and /metrics."""

from __future__ import annotations

import socket

from tests.server.helpers import CALL_JSON, FENCED_CALL, chat, metric, proxy
from toolshim.testing import FakeUpstream
from toolshim.testing.server import ScriptedUpstream, serve_fake
from toolshim.upstreams.aiohttp_upstream import AiohttpUpstream


async def test_models_are_the_upstreams_list() -> None:
    upstream = FakeUpstream(models=["llama3.2:1b", "qwen2.5:0.5b"])
    async with proxy(upstream) as p:
        response = await p.client.get("/v1/models")
        short = await p.client.get("/models")
    assert response.status_code == 200
    assert [m["id"] for m in response.json()["data"]] == ["llama3.2:1b", "qwen2.5:0.5b"]
    assert short.json() == response.json()


async def test_models_over_http_pass_through_the_upstream_answer() -> None:
    with serve_fake(ScriptedUpstream({"models": ["a", "b"]})) as server:
        async with proxy(AiohttpUpstream(server.base_url)) as p:
            response = await p.client.get("/v1/models")
            await p.engine.aclose()
    assert [m["id"] for m in response.json()["data"]] == ["a", "b"]


async def test_healthz_reports_a_reachable_upstream() -> None:
    with serve_fake(ScriptedUpstream()) as server:
        async with proxy(AiohttpUpstream(server.base_url)) as p:
            response = await p.client.get("/healthz")
            await p.engine.aclose()
    body = response.json()
    assert response.status_code == 200
    assert body["status"] == "ok"
    assert body["upstream"]["url"] == server.base_url
    assert body["upstream"]["reachable"] is True
    assert body["upstream"]["latency_ms"] >= 0


async def test_healthz_reports_an_unreachable_upstream() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with proxy(AiohttpUpstream(f"http://127.0.0.1:{port}/v1")) as p:
        response = await p.client.get("/healthz")
        await p.engine.aclose()
    upstream = response.json()["upstream"]
    assert response.status_code == 200
    assert upstream["reachable"] is False
    assert "could not reach" in upstream["error"]
    assert "latency_ms" not in upstream


async def test_healthz_does_not_wait_longer_than_its_timeout() -> None:
    class Hangs(FakeUpstream):
        async def list_models(self, *, headers: object = None) -> dict[str, object]:
            import asyncio

            await asyncio.sleep(60)
            return {}

    async with proxy(Hangs(), app_options={"health_timeout": 0.05}) as p:
        response = await p.client.get("/healthz")
    upstream = response.json()["upstream"]
    assert upstream["reachable"] is False
    assert upstream["error"] == "no answer within 0.05s"


async def test_metrics_count_requests_by_mode_and_outcome() -> None:
    upstream = FakeUpstream([CALL_JSON, "plain answer", FENCED_CALL], tools="reject")
    async with proxy(upstream) as p:
        await p.client.post("/v1/chat/completions", json=chat())  # rejected → emulated call
        await p.client.post("/v1/chat/completions", json=chat(tools=False))  # text
        await p.client.post("/v1/chat/completions", content=b"{")  # error
        await p.client.post(
            "/v1/chat/completions", json=chat(stream=True), headers={"x-toolshim-mode": "force"}
        )
        response = await p.client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    assert metric(text, "toolshim_requests_total", mode="auto", outcome="tool_calls") == 1
    assert metric(text, "toolshim_requests_total", mode="auto", outcome="text") == 1
    assert metric(text, "toolshim_requests_total", mode="auto", outcome="error") == 1
    assert metric(text, "toolshim_requests_total", mode="force", outcome="tool_calls") == 1
    assert metric(text, "toolshim_emulated_requests_total") == 2
    assert metric(text, "toolshim_llm_calls_total") == 4
    assert metric(text, "toolshim_upstream_latency_seconds_count", call="complete") == 3
    assert metric(text, "toolshim_upstream_latency_seconds_count", call="stream") == 1
    assert metric(text, "toolshim_request_duration_seconds_count", stream="true") == 1


async def test_metrics_count_reasks_and_rescues() -> None:
    bad = '{"tool_calls": [{"name": "get_wether", "arguments": {"city": "Paris"}}]}'
    upstream = FakeUpstream([bad, CALL_JSON, FENCED_CALL], tools="ignore")
    async with proxy(upstream) as p:
        forced = await p.client.post(
            "/v1/chat/completions", json=chat(), headers={"x-toolshim-mode": "force"}
        )
        await p.client.post("/v1/chat/completions", json=chat())
        text = (await p.client.get("/metrics")).text
    assert forced.json()["toolshim"]["reasks"] == 1
    assert metric(text, "toolshim_reasks_total") == 1
    assert metric(text, "toolshim_rescued_requests_total") == 1


async def test_each_app_has_its_own_metrics() -> None:
    async with proxy(FakeUpstream(["a"])) as first, proxy(FakeUpstream()) as second:
        await first.client.post("/v1/chat/completions", json=chat(tools=False))
        text = (await second.client.get("/metrics")).text
    assert metric(text, "toolshim_requests_total", mode="auto", outcome="text") == 0
