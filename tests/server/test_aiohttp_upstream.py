"""The aiohttp upstream adapter against real HTTP servers on 127.0.0.1."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import pytest
from aiohttp import web

from tests.server.helpers import WEATHER, chat
from toolshim.errors import (
    UpstreamConnectionError,
    UpstreamProtocolError,
    UpstreamStatusError,
    UpstreamTimeoutError,
)
from toolshim.testing.server import RunningServer, ScriptedUpstream, serve_app, serve_fake
from toolshim.upstreams.aiohttp_upstream import AiohttpUpstream
from toolshim.upstreams.base import Upstream


@contextmanager
def scripted(**script: Any) -> Iterator[tuple[RunningServer, ScriptedUpstream]]:
    upstream = ScriptedUpstream(script)
    with serve_fake(upstream) as server:
        yield server, upstream


async def collect(chunks: AsyncIterator[dict[str, Any]]) -> list[dict[str, Any]]:
    return [chunk async for chunk in chunks]


@asynccontextmanager
async def opened(url: str, **options: Any) -> AsyncIterator[AiohttpUpstream]:
    client = AiohttpUpstream(url, **options)
    try:
        yield client
    finally:
        await client.aclose()


async def run(client: AiohttpUpstream, call: str) -> Any:
    """One call of the adapter, by name, read to the end."""
    if call == "complete":
        return await client.complete_body(chat())
    if call == "stream":
        return await collect(client.stream_body(chat()))
    return await client.list_models()


def text_of(chunks: list[dict[str, Any]]) -> str:
    return "".join(
        c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices")
    )


async def test_complete_sends_the_body_and_the_key() -> None:
    with scripted(replies=["Hello!"]) as (server, fake):
        client = AiohttpUpstream(server.base_url, api_key="k-123")
        assert isinstance(client, Upstream)
        answer = await client.complete_body(chat(), headers={"X-Extra": "1"})
        await client.aclose()
    assert answer["choices"][0]["message"]["content"] == "Hello!"
    assert fake.history[0]["tools"] == [WEATHER]
    assert fake.headers[0]["Authorization"] == "Bearer k-123"
    assert fake.headers[0]["X-Extra"] == "1"
    assert fake.headers[0]["Content-Type"] == "application/json"


async def test_per_call_headers_win_over_the_configured_key() -> None:
    with scripted(replies=["Hello!"]) as (server, fake):
        client = AiohttpUpstream(server.base_url, api_key="configured")
        await client.complete_body(chat(), headers={"Authorization": "Bearer caller"})
        await client.aclose()
    assert fake.headers[0]["Authorization"] == "Bearer caller"


async def test_stream_yields_the_chunks_and_usage_when_asked() -> None:
    with scripted(replies=["Hello there, friend."] * 2) as (server, _):
        client = AiohttpUpstream(server.base_url)
        plain = await collect(client.stream_body(chat(tools=False)))
        with_usage = await collect(
            client.stream_body(chat(tools=False, stream_options={"include_usage": True}))
        )
        await client.aclose()
    assert text_of(plain) == "Hello there, friend."
    assert len(plain) > 2
    assert not any("usage" in c for c in plain)
    assert with_usage[-1]["choices"] == [] and with_usage[-1]["usage"]["total_tokens"] > 0


@pytest.mark.parametrize("stream", [False, True])
async def test_a_rejection_keeps_the_upstream_status_and_message(stream: bool) -> None:
    with scripted(tools="reject", rejection="llama-server") as (server, _):
        async with opened(server.base_url) as client:
            with pytest.raises(UpstreamStatusError) as caught:
                await run(client, "stream" if stream else "complete")
    assert caught.value.status == 500
    assert caught.value.message == "tools param requires --jinja flag"


async def test_models() -> None:
    with scripted(models=["x", "y"]) as (server, _):
        client = AiohttpUpstream(server.base_url)
        listing = await client.list_models()
        await client.aclose()
    assert [m["id"] for m in listing["data"]] == ["x", "y"]


@pytest.mark.parametrize("call", ["complete", "stream", "list_models"])
async def test_connection_refused(call: str) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with opened(f"127.0.0.1:{port}") as client:
        assert client.key == f"http://127.0.0.1:{port}/v1"
        with pytest.raises(UpstreamConnectionError, match="could not reach"):
            await run(client, call)


@pytest.mark.parametrize("stream", [False, True])
async def test_timeout(stream: bool) -> None:
    with scripted(replies=["late"], delay=3) as (server, _):
        async with opened(server.base_url, timeout=0.1) as client:
            with pytest.raises(UpstreamTimeoutError, match="read timeout"):
                await run(client, "stream" if stream else "complete")


@contextmanager
def raw_server(handler: Any) -> Iterator[str]:
    """A bare aiohttp app with one chat route: for answers no real fake would give."""
    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    with serve_app(app) as server:
        yield server.base_url


async def test_an_upstream_that_ignores_stream_is_turned_into_chunks() -> None:
    async def whole(request: web.Request) -> web.Response:
        completion = {
            "id": "c1",
            "object": "chat.completion",
            "created": 1,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "hi"},
                    "finish_reason": "stop",
                }
            ],
        }
        return web.json_response(completion)

    with raw_server(whole) as url:
        client = AiohttpUpstream(url)
        chunks = await collect(client.stream_body(chat()))
        await client.aclose()
    assert text_of(chunks) == "hi"
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


async def test_an_error_event_mid_stream_raises() -> None:
    async def breaks(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        chunk = '{"choices": [{"index": 0, "delta": {"content": "par"}}]}'
        await response.write(f"data: {chunk}\n\n".encode())
        await response.write(b'data: {"error": {"message": "out of memory", "code": 503}}\n\n')
        return response

    with raw_server(breaks) as url:
        received: list[dict[str, Any]] = []

        async def read_all(client: AiohttpUpstream) -> None:
            async for chunk in client.stream_body(chat()):
                received.append(chunk)

        async with opened(url) as client:
            with pytest.raises(UpstreamStatusError, match="out of memory") as caught:
                await read_all(client)
    assert text_of(received) == "par"
    assert caught.value.status == 503


async def test_an_answer_that_is_not_json() -> None:
    async def html(request: web.Request) -> web.Response:
        return web.Response(text="<html>proxy login</html>", content_type="text/html")

    with raw_server(html) as url:
        async with opened(url) as client:
            with pytest.raises(UpstreamProtocolError, match="not JSON"):
                await client.complete_body(chat())
