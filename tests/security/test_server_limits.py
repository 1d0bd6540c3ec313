"""The proxy's request limits, in-process: body size (checked while reading), tool and message
counts, concurrent requests, and malformed messages at debug level."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from tests.server.helpers import chat, proxy
from toolshim.capabilities.registry import Registry
from toolshim.engine import Engine
from toolshim.server import create_app
from toolshim.server.limits import LimitLog, Limits
from toolshim.testing import FakeUpstream, FunctionUpstream


def assert_openai_error(response: Any, status: int, code: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) >= {"message", "type", "param", "code"}
    if code is not None:
        assert error["code"] == code
    return dict(error)


async def test_a_body_over_the_limit_is_a_413_before_it_is_read() -> None:
    limits = Limits(max_body_bytes=1024)
    async with proxy(FakeUpstream(["hi"]), app_options={"limits": limits}) as p:
        body = chat(tools=False, padding="x" * 2000)
        response = await p.client.post("/v1/chat/completions", json=body)
    error = assert_openai_error(response, 413, "body_size")
    assert "1024 bytes" in error["message"] and "--max-body-size" in error["message"]
    assert response.headers["connection"] == "close"


async def test_a_chunked_body_stops_being_read_once_over_the_limit() -> None:
    """No Content-Length: the proxy reads chunk by chunk and stops at the first one past the
    limit, so a 100 MiB body costs at most the limit in memory, not five times the body."""
    app = create_app(
        Engine(FakeUpstream(["hi"]), registry=Registry()), limits=Limits(max_body_bytes=4 << 20)
    )
    chunk = b"x" * (1 << 20)
    read = 0
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal read
        read += 1
        return {"type": "http.request", "body": chunk, "more_body": read < 100}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/chat/completions",
        "headers": [(b"transfer-encoding", b"chunked"), (b"content-type", b"application/json")],
        "query_string": b"",
    }
    await app(scope, receive, send)
    assert sent[0]["status"] == 413
    assert read == 5  # four chunks fit, the fifth passes the limit: nothing more is read


async def test_more_tools_than_allowed_is_a_400() -> None:
    limits = Limits(max_tools=3)
    tool = chat()["tools"][0]
    async with proxy(FakeUpstream(["hi"]), app_options={"limits": limits}) as p:
        response = await p.client.post("/v1/chat/completions", json={**chat(), "tools": [tool] * 4})
    error = assert_openai_error(response, 400, "too_many_tools")
    assert error["param"] == "tools" and "--max-tools" in error["message"]


async def test_more_messages_than_allowed_is_a_400() -> None:
    limits = Limits(max_messages=2)
    message = {"role": "user", "content": "hi"}
    async with proxy(FakeUpstream(["hi"]), app_options={"limits": limits}) as p:
        response = await p.client.post(
            "/v1/chat/completions", json=chat(tools=False, messages=[message] * 3)
        )
    assert_openai_error(response, 400, "too_many_messages")


@pytest.mark.parametrize(
    ("path", "body", "code"),
    [
        (
            "/v1/messages",
            {"max_tokens": 5, "messages": [{"role": "user", "content": "hi"}] * 3},
            "3 messages",
        ),
        (
            "/v1/messages/count_tokens",
            {"messages": [{"role": "user", "content": "hi"}] * 3},
            "3 messages",
        ),
        (
            "/v1/messages/count_tokens",
            {
                "messages": [{"role": "user", "content": "hi"}],
                "tools": [{"name": f"t{i}", "input_schema": {"type": "object"}} for i in range(4)],
            },
            "4 tools",
        ),
        ("/v1/responses", {"input": [{"role": "user", "content": "hi"}] * 3}, "3 input"),
    ],
)
async def test_every_protocol_route_holds_the_count_limits(
    path: str, body: dict[str, Any], code: str
) -> None:
    """Token counting included (it read any number of messages and tools)."""
    limits = Limits(max_messages=2, max_tools=3)
    async with proxy(FakeUpstream(["hi"]), app_options={"limits": limits}) as p:
        response = await p.client.post(path, json={"model": "fake-model", **body})
    assert response.status_code == 400, response.text
    message = response.json()["error"]["message"]
    assert "this proxy accepts at most" in message, message
    assert code in message


async def test_requests_beyond_the_concurrency_limit_get_a_429_with_retry_after() -> None:
    release = asyncio.Event()
    both_started = asyncio.Event()
    started = 0

    async def slow(body: dict[str, Any]) -> str:
        nonlocal started
        started += 1
        if started == 2:
            both_started.set()
        await release.wait()
        return "done"

    limits = Limits(max_concurrent_requests=2)
    async with proxy(FunctionUpstream(slow), app_options={"limits": limits}) as p:
        first = [
            asyncio.create_task(p.client.post("/v1/chat/completions", json=chat(tools=False)))
            for _ in range(2)
        ]
        await both_started.wait()
        refused = await p.client.post("/v1/chat/completions", json=chat(tools=False))
        health = await p.client.get("/healthz")  # probes are not counted
        release.set()
        answered = await asyncio.gather(*first)
        after = await p.client.post("/v1/chat/completions", json=chat(tools=False))
        metrics = (await p.client.get("/metrics")).text
    error = assert_openai_error(refused, 429)
    assert refused.headers["retry-after"] == "1"
    assert "--max-concurrent-requests" in error["message"]
    assert health.status_code == 200
    assert [r.status_code for r in answered] == [200, 200]
    assert after.status_code == 200
    assert 'toolshim_limit_hits_total{limit="concurrent_requests"} 1.0' in metrics


@pytest.mark.parametrize("messages", ["hi", [1], [None], {"role": "user"}, [["user", "hi"]]])
async def test_malformed_messages_are_a_400_at_debug_level_too(
    messages: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="toolshim")
    for stream in (False, True):
        async with proxy(FakeUpstream(["hi"])) as p:
            response = await p.client.post(
                "/v1/chat/completions", json=chat(messages=messages, stream=stream)
            )
        assert_openai_error(response, 400)


def test_limit_hits_are_logged_once_per_burst(caplog: pytest.LogCaptureFixture) -> None:
    hits: list[str] = []
    limit_log = LimitLog(window=3600, on_hit=hits.append)
    with caplog.at_level(logging.WARNING, logger="toolshim.server"):
        for _ in range(500):
            limit_log.hit("header_timeout", "a slow client")
        limit_log.hit("body_size", "a big body")
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "limit header_timeout hit: a slow client",
        "limit body_size hit: a big body",
    ]
    assert len(hits) == 501  # every hit is counted (the metrics see them all)


async def test_concurrent_health_probes_ask_the_upstream_once() -> None:
    """/healthz needs no key: a flood of probes shares one upstream check at a time instead of
    each asking the upstream's /models (it asked once per probe)."""
    release = asyncio.Event()
    asked = asyncio.Event()

    class SlowModels(FakeUpstream):
        calls = 0

        async def list_models(self, *, headers: Any = None) -> dict[str, Any]:
            SlowModels.calls += 1
            asked.set()
            await release.wait()
            return await super().list_models(headers=headers)

    async with proxy(SlowModels(["hi"])) as p:
        probes = [asyncio.create_task(p.client.get("/healthz")) for _ in range(20)]
        await asked.wait()
        await asyncio.sleep(0.1)  # every probe has arrived and waits
        release.set()
        answers = await asyncio.gather(*probes)
        again = await p.client.get("/healthz")  # a later probe asks afresh
    assert [a.json()["upstream"]["reachable"] for a in answers] == [True] * 20
    assert again.json()["upstream"]["reachable"] is True
    assert SlowModels.calls == 2
