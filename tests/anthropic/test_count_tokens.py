"""``POST /v1/messages/count_tokens``: the upstream's /tokenize where it has one, else the
documented estimate (one token per four characters)."""

from __future__ import annotations

from aiohttp import web

from tests.anthropic.conftest import ASK, live
from toolshim.server.tokens import estimate_tokens
from toolshim.testing import WEATHER_ANTHROPIC as WEATHER
from toolshim.testing import FakeUpstream
from toolshim.testing.server import serve_app
from toolshim.upstreams import OpenAIUpstream


async def test_estimate_without_a_tokenizer() -> None:
    async with live(FakeUpstream(), mode="off") as proxy:
        counted = await proxy.client.messages.count_tokens(
            model="fake-model", messages=ASK, system="Be brief.", tools=[WEATHER]
        )
    assert counted.input_tokens > estimate_tokens("What is the weather in Paris?Be brief.")
    assert counted.model_extra["toolshim"] == {"token_count": "estimate"}


async def test_the_upstream_tokenizer_counts_where_there_is_one() -> None:
    seen: list[str] = []

    async def tokenize(request: web.Request) -> web.Response:
        content = (await request.json())["content"]
        seen.append(content)
        return web.json_response({"tokens": list(range(len(content.split())))})

    app = web.Application()
    app.router.add_post("/tokenize", tokenize)
    with serve_app(app) as server:
        upstream = OpenAIUpstream(f"http://127.0.0.1:{server.port}/v1")
        async with live(upstream, mode="off") as proxy:
            counted = await proxy.client.messages.count_tokens(model="m", messages=ASK)
    assert seen == ["What is the weather in Paris?"]
    assert counted.input_tokens == 6
    assert counted.model_extra["toolshim"] == {"token_count": "upstream"}


async def test_a_bad_request_is_an_anthropic_error() -> None:
    import pytest

    import anthropic

    async with live(FakeUpstream(), mode="off") as proxy:
        with pytest.raises(anthropic.BadRequestError) as caught:
            await proxy.client.messages.count_tokens(model="m", messages=[])
    assert caught.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
