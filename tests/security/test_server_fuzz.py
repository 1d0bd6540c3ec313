"""Fuzzing the proxy's request decoding and validation in-process: whatever JSON (or bytes) a
client sends, the answer is never a 5xx and every error is an OpenAI error body."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from hypothesis import HealthCheck, example, given, settings

from tests.security.fuzz_bodies import bodies, chat_like, raw_bodies
from toolshim.capabilities.registry import Registry
from toolshim.engine import Engine
from toolshim.server import create_app
from toolshim.testing import FunctionUpstream

APP = create_app(Engine(FunctionUpstream(lambda body: "ok"), registry=Registry()))
FUZZ = settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])


def check(response: httpx.Response, sent: Any) -> None:
    """The contract: no 5xx; an error is ``{"error": {message, type, param, code}}``."""
    assert response.status_code < 500, (response.status_code, response.text, sent)
    if response.status_code >= 400:
        error = response.json()["error"]
        assert set(error) >= {"message", "type", "param", "code"}, error
        assert isinstance(error["message"], str) and error["message"]
        assert "Traceback" not in error["message"]
        return
    if response.headers["content-type"].startswith("text/event-stream"):
        events = [b for b in response.text.split("\n\n") if b.strip()]
        assert events[-1] == "data: [DONE]", response.text
        for block in events[:-1]:
            data = json.loads(block.removeprefix("data: "))
            assert "choices" in data or "error" in data
    else:
        assert response.json()["choices"], response.text


def post(content: bytes) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=APP)
        async with httpx.AsyncClient(transport=transport, base_url="http://proxy") as client:
            return await client.post(
                "/v1/chat/completions",
                content=content,
                headers={"content-type": "application/json"},
            )

    return asyncio.run(go())


@FUZZ
@given(chat_like)
# Found by this fuzzing: a legacy role=function history with a malformed call was a 500.
@example({"messages": [{"role": "function", "tool_calls": [{"id": "", "function": {"name": []}}]}]})
@example({"messages": [{"role": "function", "content": "x", "tool_calls": 1.5}]})
def test_chat_like_bodies_never_get_a_5xx(body: dict[str, Any]) -> None:
    check(post(json.dumps(body).encode()), body)


@FUZZ
@given(bodies)
def test_arbitrary_json_never_gets_a_5xx(body: Any) -> None:
    check(post(json.dumps(body).encode()), body)


@FUZZ
@given(raw_bodies)
def test_arbitrary_bytes_never_get_a_5xx(body: bytes) -> None:
    check(post(body), body)
