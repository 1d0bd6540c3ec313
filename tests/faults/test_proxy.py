"""Faults through the real proxy app (the aiohttp adapter it serves with) at a bad server.

Regressions of issue 14: a cut stream or an HTML page is an error, not a successful answer;
a key the upstream echoes never reaches the caller or the log; a 5 MB event passes; a
dripping upstream ends at the total deadline; 502/503 are retried before the first byte.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from tests.faults.badserver import (
    Request,
    bad_server,
    closed_port,
    completion,
    head,
    unanswered_port,
)
from tests.faults.faults import FAULTS, huge_arguments
from tests.server.helpers import Proxy, assemble, chat, proxy, sse_events
from toolshim.upstreams.aiohttp_upstream import AiohttpUpstream

KEY = "TopSecretUpstreamKey99"


@asynccontextmanager
async def served(upstream: AiohttpUpstream, **options: Any) -> AsyncIterator[Proxy]:
    """The proxy app in front of ``upstream``; its upstream session is closed at the end."""
    async with proxy(upstream, **options) as p:
        try:
            yield p
        finally:
            await p.engine.aclose()


def answering(status: int, body: Any, headers: dict[str, str] | None = None) -> Any:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()

    async def answer(reader: Any, writer: asyncio.StreamWriter, request: Request) -> None:
        extra = {"Content-Type": "application/json", "Content-Length": str(len(data))}
        writer.write(head(status, {**extra, **(headers or {})}) + data)
        await writer.drain()

    return answer


def echoing_the_key(reader: Any, writer: asyncio.StreamWriter, request: Request) -> Any:
    """A 401 whose message quotes the Authorization header it got, as some gateways do."""
    got = request.headers.get("authorization", "")
    body = {"error": {"message": f"invalid credentials: {got!r}", "type": "auth", "got": got}}
    return answering(401, body)(reader, writer, request)


@pytest.mark.parametrize("stream", [False, True])
async def test_a_key_the_upstream_echoes_never_reaches_the_caller_or_the_log(
    stream: bool, caplog: pytest.LogCaptureFixture
) -> None:
    async with bad_server(echoing_the_key) as server:
        upstream = AiohttpUpstream(server.base_url, api_key=KEY)
        async with served(upstream, app_options={"upstream_api_key": KEY}) as p:
            with caplog.at_level(logging.INFO):
                answer = await p.client.post("/v1/chat/completions", json=chat(stream=stream))
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"  # it was sent
    assert answer.status_code == 401
    assert "invalid credentials" in answer.text
    assert KEY not in answer.text
    assert KEY not in caplog.text


async def test_a_callers_own_token_echoed_back_is_masked_too() -> None:
    async with bad_server(echoing_the_key) as server, served(AiohttpUpstream(server.base_url)) as p:
        answer = await p.client.post(
            "/v1/chat/completions",
            json=chat(),
            headers={"Authorization": "Token raw-caller-token-123"},
        )
    assert answer.status_code == 401
    assert "raw-caller-token-123" not in answer.text


async def test_user_and_password_in_the_upstream_url_show_nowhere() -> None:
    url = f"http://alice:s3cr3t-pw@127.0.0.1:{closed_port()}/v1"
    async with served(AiohttpUpstream(url)) as p:
        answer = await p.client.post("/v1/chat/completions", json=chat())
        health = await p.client.get("/healthz")
    assert answer.status_code == 502
    for text in (answer.text, health.text, repr(p.engine.upstream)):
        assert "s3cr3t-pw" not in text
        assert "alice" not in text
    assert "127.0.0.1" in answer.text


@pytest.mark.parametrize("tools", [True, False], ids=["tools", "no-tools"])
async def test_a_stream_cut_midway_ends_with_an_error_not_a_stop(tools: bool) -> None:
    async with (
        bad_server(FAULTS["cut, close-delimited"].behaviour(True)) as server,
        served(AiohttpUpstream(server.base_url)) as p,
    ):
        answer = await p.client.post("/v1/chat/completions", json=chat(stream=True, tools=tools))
    if answer.status_code == 200:  # the error came after the first byte: an error event
        events = sse_events(answer.text)
        assert assemble(events)["finish_reason"] is None
        assert any(isinstance(e, dict) and "error" in e for e in events)
        error = next(e["error"] for e in events if isinstance(e, dict) and "error" in e)
    else:
        assert answer.status_code == 502
        error = answer.json()["error"]
    assert error["code"] == "upstream_incomplete"


async def test_an_html_page_with_200_to_a_stream_is_a_502() -> None:
    async with (
        bad_server(FAULTS["HTML with 200"].behaviour(True)) as server,
        served(AiohttpUpstream(server.base_url)) as p,
    ):
        answer = await p.client.post("/v1/chat/completions", json=chat(stream=True))
    assert answer.status_code == 502
    assert answer.json()["error"]["code"] == "upstream_bad_response"
    assert "text/html" in answer.json()["error"]["message"]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_5_mb_tool_call_passes_the_proxy(stream: bool) -> None:
    fault = FAULTS["huge event"]
    async with (
        bad_server(fault.behaviour(stream)) as server,
        served(AiohttpUpstream(server.base_url), mode="off") as p,
    ):
        answer = await p.client.post("/v1/chat/completions", json=chat(stream=stream))
    assert answer.status_code == 200, answer.text[:300]
    if stream:
        arguments = assemble(sse_events(answer.text))["tool_calls"][0]["arguments"]
    else:
        call = answer.json()["choices"][0]["message"]["tool_calls"][0]
        arguments = call["function"]["arguments"]
    assert json.loads(arguments) == json.loads(huge_arguments())


@pytest.mark.parametrize("stream", [False, True])
async def test_a_dripping_upstream_ends_at_the_total_deadline(stream: bool) -> None:
    fault = FAULTS["drip"]
    async with bad_server(fault.behaviour(stream)) as server:
        upstream = AiohttpUpstream(server.base_url, timeout=5, total_timeout=1.0)
        async with served(upstream) as p:
            answer = await p.client.post("/v1/chat/completions", json=chat(stream=stream))
    if answer.status_code == 200:
        events = sse_events(answer.text)
        error = next(e["error"] for e in events if isinstance(e, dict) and "error" in e)
        assert assemble(events)["finish_reason"] is None
    else:
        assert answer.status_code == 504
        error = answer.json()["error"]
    assert error["code"] == "upstream_timeout"
    assert "total timeout of 1s" in error["message"]


async def test_a_connect_timeout_is_named_as_such() -> None:
    with unanswered_port() as port:
        upstream = AiohttpUpstream(f"http://127.0.0.1:{port}/v1", connect_timeout=0.3)
        async with served(upstream) as p:
            answer = await p.client.post("/v1/chat/completions", json=chat())
    assert answer.status_code == 504
    assert "within the connect timeout of 0.3s" in answer.json()["error"]["message"]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_503_is_retried_before_the_first_byte(stream: bool) -> None:
    overloaded = answering(503, {"error": {"message": "busy"}}, {"Retry-After": "0"})
    async with (
        bad_server(overloaded, answering(200, completion("Sunny."))) as server,
        served(AiohttpUpstream(server.base_url), mode="off") as p,
    ):
        answer = await p.client.post("/v1/chat/completions", json=chat(stream=stream))
    assert answer.status_code == 200
    assert "Sunny." in answer.text
    assert len(server.requests) == 2


async def test_a_429_is_passed_on_with_its_retry_after_and_not_retried() -> None:
    async with (
        bad_server(FAULTS["429 with Retry-After"].behaviour(False)) as server,
        served(AiohttpUpstream(server.base_url)) as p,
    ):
        answer = await p.client.post("/v1/chat/completions", json=chat())
    assert answer.status_code == 429
    assert answer.headers.get("retry-after") == "7"
    assert len(server.requests) == 1
