"""What coding agents need from the proxy in front of a local model: their default model names
served through aliases, and a request over the model's context refused at once, in the
client's own protocol, saying which flag makes room. Over real HTTP: the proxy's upstream
adapter reads a llama-server error body from a fake server on 127.0.0.1."""

from __future__ import annotations

from typing import Any

import pytest

from tests.server.helpers import chat, proxy
from toolshim.errors import ConfigError, UpstreamStatusError
from toolshim.server.model_aliases import ModelAlias, parse_model_aliases, resolve_model
from toolshim.testing import FunctionUpstream
from toolshim.testing.server import serve_fake
from toolshim.upstreams.aiohttp_upstream import AiohttpUpstream

LLAMA_OVERFLOW = {
    "error": {
        "code": 400,
        "message": "request (11782 tokens) exceeds the available context size (8192 tokens), "
        "try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 11782,
        "n_ctx": 8192,
    }
}
HINT = "restart toolshim with a larger --ctx-size"


def overflowing(body: dict[str, Any]) -> Any:
    message = LLAMA_OVERFLOW["error"]["message"]
    raise UpstreamStatusError(message, status=400, body=LLAMA_OVERFLOW)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_request_over_the_context_is_a_400_naming_the_flag_in_anthropic_shape(
    stream: bool,
) -> None:
    upstream = FunctionUpstream(overflowing)
    with serve_fake(upstream) as fake:
        http = AiohttpUpstream(fake.base_url, retries=0)
        options = {"context_hint": f"The embedded model ...: {HINT} (or TOOLSHIM_CTX_SIZE)."}
        async with proxy(http, app_options=options, mode="force") as p:
            response = await p.client.post(
                "/v1/messages",
                json={
                    "model": "claude-sonnet-4-5",
                    "max_tokens": 100,
                    "stream": stream,
                    "messages": [{"role": "user", "content": "hello"}],
                },
            )
            await p.engine.aclose()
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    assert "exceeds the available context size (8192 tokens)" in body["error"]["message"]
    assert HINT in body["error"]["message"]
    assert len(upstream.history) == 1  # refused once: no re-ask, no retry


async def test_a_context_overflow_keeps_openai_code_and_the_hint_only_once() -> None:
    upstream = FunctionUpstream(overflowing)
    with serve_fake(upstream) as fake:
        http = AiohttpUpstream(fake.base_url, retries=0)
        async with proxy(http, app_options={"context_hint": HINT}) as p:
            response = await p.client.post("/v1/chat/completions", json=chat(tools=False))
            await p.engine.aclose()
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "context_length_exceeded"
    assert error["message"].count(HINT) == 1


async def test_other_upstream_errors_get_no_context_hint() -> None:
    def refuses(body: dict[str, Any]) -> Any:
        raise UpstreamStatusError("model 'x' not found", status=404, body={"error": "not found"})

    with serve_fake(FunctionUpstream(refuses)) as fake:
        http = AiohttpUpstream(fake.base_url, retries=0)
        async with proxy(http, app_options={"context_hint": HINT}) as p:
            response = await p.client.post("/v1/chat/completions", json=chat(tools=False))
            await p.engine.aclose()
    assert response.status_code == 404
    assert HINT not in response.text


@pytest.mark.parametrize(
    "message",
    [
        "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens",
        "the input length exceeds the context length",
    ],
)
def test_context_overflow_is_read_from_the_wording_of_other_servers(message: str) -> None:
    assert UpstreamStatusError(message, status=400).context_overflow
    assert not UpstreamStatusError(message, status=429).context_overflow
    assert not UpstreamStatusError("invalid tool schema", status=400).context_overflow


async def test_claude_model_names_reach_the_aliased_model() -> None:
    upstream = FunctionUpstream(lambda body: f"served by {body['model']}")
    aliases = parse_model_aliases(["claude-*=qwen2.5-coder:7b", "gpt-5*=qwen2.5-coder:1.5b"])
    async with proxy(upstream, app_options={"model_aliases": aliases}) as p:
        for asked, served in [
            ("claude-sonnet-4-5-20250929", "qwen2.5-coder:7b"),
            ("CLAUDE-haiku-4-5", "qwen2.5-coder:7b"),
            ("gpt-5-codex", "qwen2.5-coder:1.5b"),
            ("llama3", "llama3"),
        ]:
            response = await p.client.post(
                "/v1/messages",
                json={
                    "model": asked,
                    "max_tokens": 50,
                    "messages": [{"role": "user", "content": "hi"}],
                },
            )
            assert response.status_code == 200, response.text
            assert response.json()["content"][0]["text"] == f"served by {served}"


def test_aliases_parse_in_order_and_refuse_malformed_ones() -> None:
    aliases = parse_model_aliases(["a*=one, b=two", ""])
    assert aliases == (ModelAlias("a*", "one"), ModelAlias("b", "two"))
    assert resolve_model("abc", aliases, None, False) == "one"
    assert resolve_model("zzz", aliases, "default", False) is None  # left as asked
    assert resolve_model(None, aliases, "default", False) == "default"
    assert resolve_model("abc", aliases, "pinned", True) == "pinned"
    for bad in ["claude-*", "=x", "claude-*="]:
        with pytest.raises(ConfigError, match="PATTERN=MODEL"):
            parse_model_aliases([bad])
