"""``user:pass@`` in an upstream URL (a model server behind basic auth): sent as the request's
only ``Authorization`` whatever the caller forwards (the openai SDK always sends a Bearer key),
by both adapters, against a real server on 127.0.0.1; never in an error or the shown URL."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from toolshim.errors import ConfigError, UpstreamStatusError
from toolshim.testing import FakeUpstream
from toolshim.testing.server import serve_app, serve_fake
from toolshim.upstreams import OpenAIUpstream
from toolshim.upstreams.aiohttp_upstream import AiohttpUpstream

ADAPTERS: dict[str, Any] = {"httpx": OpenAIUpstream, "aiohttp": AiohttpUpstream}
PASSWORD = "pa ss@w0rd"  # percent-encoded in the URL
BASIC = "Basic " + base64.b64encode(f"alice:{PASSWORD}".encode()).decode()
BODY = {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}]}


def with_user(base_url: str) -> str:
    return base_url.replace("http://", "http://alice:pa%20ss%40w0rd@")


@pytest.mark.parametrize("kind", sorted(ADAPTERS))
@pytest.mark.parametrize(
    "caller", [None, {"Authorization": "Bearer sk-caller-key-123"}, {"authorization": "x"}]
)
async def test_the_urls_user_and_password_are_the_only_authorization_sent(
    kind: str, caller: dict[str, str] | None
) -> None:
    fake = FakeUpstream(["hello", "hello again"])
    with serve_fake(fake) as server:
        upstream = ADAPTERS[kind](with_user(server.base_url), retries=0)
        try:
            reply = await upstream.complete_body(BODY, headers=caller)
            chunks = [c async for c in upstream.stream_body(BODY, headers=caller)]
        finally:
            await upstream.aclose()
    assert reply["choices"][0]["message"]["content"] == "hello"
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    sent = [{k.lower(): v for k, v in h.items()} for h in fake.headers]
    assert [h.get("authorization") for h in sent] == [BASIC, BASIC]
    assert upstream.base_url == server.base_url  # no user info in what is shown
    assert "alice" not in repr(upstream)


@pytest.mark.parametrize("kind", sorted(ADAPTERS))
async def test_an_error_echoing_the_password_never_shows_it(kind: str) -> None:
    class Echo(FakeUpstream):
        async def complete_body(self, body: Any, *, headers: Any = None) -> dict[str, Any]:
            raise UpstreamStatusError(f"denied for {dict(headers or {})} {PASSWORD}", status=401)

    with serve_fake(Echo(["x"])) as server:
        upstream = ADAPTERS[kind](with_user(server.base_url), retries=0)
        try:
            with pytest.raises(UpstreamStatusError) as caught:
                await upstream.complete_body(BODY)
        finally:
            await upstream.aclose()
    text = f"{caught.value.message} {caught.value.body}"
    assert caught.value.status == 401
    assert PASSWORD not in text
    assert BASIC.split()[1] not in text


@pytest.mark.parametrize("kind", sorted(ADAPTERS))
def test_a_user_and_password_and_a_key_together_are_refused(kind: str) -> None:
    with pytest.raises(ConfigError, match="only one can be sent") as caught:
        ADAPTERS[kind]("http://alice:secret-pw@127.0.0.1:9/v1", api_key="sk-key-12345678")
    assert "secret-pw" not in caught.value.message


@pytest.mark.parametrize("kind", sorted(ADAPTERS))
@pytest.mark.parametrize("given", ["url", "api_key"])
async def test_token_counting_asks_the_upstream_with_its_credentials(kind: str, given: str) -> None:
    """``/v1/messages/count_tokens`` asks the upstream's ``/tokenize`` with the upstream's
    credentials (it asked with none: a server behind auth always gave the estimate)."""
    from aiohttp import web

    from tests.server.helpers import proxy

    expected = BASIC if given == "url" else "Bearer sk-upstream-key-123"
    seen: list[str | None] = []

    async def tokenize(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization"))
        if request.headers.get("Authorization") != expected:
            return web.json_response({"error": "unauthorized"}, status=401)
        content = (await request.json())["content"]
        return web.json_response({"tokens": list(range(len(content.split())))})

    app = web.Application()
    app.router.add_post("/tokenize", tokenize)
    with serve_app(app) as server:
        base = f"http://127.0.0.1:{server.port}/v1"
        if given == "url":
            upstream = ADAPTERS[kind](with_user(base))
        else:
            upstream = ADAPTERS[kind](base, api_key="sk-upstream-key-123")
        try:
            async with proxy(upstream, mode="off") as p:
                response = await p.client.post(
                    "/v1/messages/count_tokens",
                    json={"model": "m", "messages": [{"role": "user", "content": "one two"}]},
                    headers={"x-api-key": "the-callers-own"},
                )
        finally:
            await upstream.aclose()
    assert response.status_code == 200, response.text
    assert response.json() == {"input_tokens": 2, "toolshim": {"token_count": "upstream"}}
    assert seen == [expected]
