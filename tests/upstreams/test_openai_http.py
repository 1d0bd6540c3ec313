"""The httpx adapter: requests, SSE parsing and error mapping, through httpx.MockTransport."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from toolshim.errors import (
    UpstreamConnectionError,
    UpstreamProtocolError,
    UpstreamStatusError,
    UpstreamTimeoutError,
)
from toolshim.upstreams import OpenAIUpstream, normalize_base_url
from toolshim.wire.openai_chat import error_body

COMPLETION = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
    ],
}


def upstream(handler: Callable[[httpx.Request], httpx.Response], **kwargs: Any) -> OpenAIUpstream:
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return OpenAIUpstream("http://up.test/v1", client=client, **kwargs)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("http://127.0.0.1:11434", "http://127.0.0.1:11434/v1"),
        ("127.0.0.1:8081/", "http://127.0.0.1:8081/v1"),
        ("https://openrouter.ai/api/v1/", "https://openrouter.ai/api/v1"),
        ("http://h:1/v1", "http://h:1/v1"),
        ("HTTP://h:8080/v1/chat/completions", "http://h:8080/v1"),
        ("http://h:8080/v1/models/", "http://h:8080/v1"),
    ],
)
def test_base_url(given: str, expected: str) -> None:
    assert normalize_base_url(given) == expected


@pytest.mark.parametrize(
    ("given", "fragment"),
    [
        ("ftp://h/v1", "not http:// or https://"),
        ("http://", "no valid host and port"),
        ("", "no valid host and port"),
        ("http://h:99999/v1", "no valid host and port"),
        ("http://h:port/v1", "no valid host and port"),
    ],
)
def test_a_url_that_cannot_be_an_api_is_a_config_error(given: str, fragment: str) -> None:
    from toolshim.errors import ConfigError

    with pytest.raises(ConfigError, match=fragment):
        normalize_base_url(given)


async def test_complete_posts_the_body_with_auth() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=COMPLETION)

    up = upstream(handler, api_key="sk-test")
    assert await up.complete_body({"model": "m", "messages": []}) == COMPLETION
    request = seen[0]
    assert str(request.url) == "http://up.test/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert json.loads(request.content) == {"model": "m", "messages": []}
    await up.complete_body({}, headers={"Authorization": "Bearer caller"})
    assert seen[1].headers["authorization"] == "Bearer caller"


@pytest.mark.parametrize(
    ("status", "body", "message"),
    [
        (
            400,
            {"error": {"message": "m does not support tools", "type": "invalid_request_error"}},
            "m does not support tools",
        ),
        (
            400,
            {"error": "registry.ollama.ai/library/gemma3:1b does not support tools"},
            "gemma3:1b does not support tools",
        ),
        (
            500,
            {
                "error": {
                    "code": 500,
                    "message": "tools param requires --jinja flag",
                    "type": "server_error",
                }
            },
            "--jinja",
        ),
        (422, {"detail": [{"msg": "field required"}]}, "field required"),
        (503, "Service Unavailable", "Service Unavailable"),
    ],
)
async def test_status_errors_keep_status_body_and_message(
    status: int, body: Any, message: str
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if isinstance(body, str):
            return httpx.Response(status, text=body)
        return httpx.Response(status, json=body)

    with pytest.raises(UpstreamStatusError) as info:
        await upstream(handler).complete_body({})
    err = info.value
    assert err.status == status
    assert message in err.message
    assert err.body == body
    code, payload = error_body(err)
    assert code == status and message in payload["error"]["message"]


async def test_connection_refused_is_502() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("Connection refused", request=request)

    with pytest.raises(UpstreamConnectionError) as info:
        await upstream(handler).complete_body({})
    assert error_body(info.value)[0] == 502


async def test_timeout_is_504() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    with pytest.raises(UpstreamTimeoutError) as info:
        await upstream(handler).complete_body({})
    assert error_body(info.value)[0] == 504


async def test_not_json_is_a_protocol_error() -> None:
    with pytest.raises(UpstreamProtocolError, match="not JSON"):
        await upstream(lambda r: httpx.Response(200, text="<html>")).complete_body({})


def sse(*events: str) -> httpx.Response:
    body = "".join(f"{e}\n\n" for e in events)
    return httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})


async def test_stream_parses_events_and_stops_at_done() -> None:
    chunk = {"choices": [{"index": 0, "delta": {"content": "a"}, "finish_reason": None}]}
    events = [
        ": keep-alive",
        f"data: {json.dumps(chunk)}",
        "event: x\ndata: " + json.dumps(chunk),
        "data: [DONE]",
        f"data: {json.dumps(chunk)}",
    ]
    sent: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return sse(*events)

    got = [c async for c in upstream(handler).stream_body({"model": "m"})]
    assert got == [chunk, chunk]
    assert sent[0]["stream"] is True


async def test_stream_error_event_raises() -> None:
    events = ['data: {"error": {"message": "model crashed", "code": 500}}']
    with pytest.raises(UpstreamStatusError, match="model crashed"):
        [c async for c in upstream(lambda r: sse(*events)).stream_body({})]


async def test_stream_http_error_before_events() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, json={"error": "m does not support tools"})

    with pytest.raises(UpstreamStatusError) as info:
        [c async for c in upstream(handler).stream_body({})]
    assert info.value.status == 400


async def test_an_upstream_that_ignores_stream_is_turned_into_chunks() -> None:
    got = [
        c async for c in upstream(lambda r: httpx.Response(200, json=COMPLETION)).stream_body({})
    ]
    assert got[0]["choices"][0]["delta"] == {"role": "assistant", "content": "hi"}
    assert got[0]["object"] == "chat.completion.chunk"


async def test_models_passthrough() -> None:
    models = {"object": "list", "data": [{"id": "m", "object": "model"}]}
    up = upstream(lambda r: httpx.Response(200, json=models))
    assert await up.list_models() == models


async def test_retry_after_is_kept() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            429, json={"error": {"message": "slow down"}}, headers={"Retry-After": "7"}
        )

    with pytest.raises(UpstreamStatusError) as info:
        await upstream(handler).complete_body({})
    assert info.value.retry_after == "7"
    assert info.value.status == 429
