"""Fuzzing the proxy's request decoding and validation in-process: whatever JSON (or bytes) a
client sends to any of its protocol routes, the answer is never a 5xx and every error is an
error body in that protocol's shape (OpenAI's; Anthropic's on ``/v1/messages``)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.security.fuzz_bodies import (
    bodies,
    chat_like,
    messages_like,
    raw_bodies,
    responses_like,
)
from toolshim.capabilities.registry import Registry
from toolshim.engine import Engine
from toolshim.server import create_app
from toolshim.testing import FunctionUpstream, SSEEvent, read_sse

APP = create_app(Engine(FunctionUpstream(lambda body: "ok"), registry=Registry()))
FUZZ = settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])


GAVE_UP = "the model did not make a valid tool call"
"""The one 5xx a valid request may get here: the function upstream never calls a tool, so a
forced ``tool_choice`` ends in the re-ask budget's 502 (the model's failing, not the input's)."""


def below_500(response: httpx.Response, sent: Any) -> None:
    gave_up = response.status_code == 502 and GAVE_UP in response.text
    assert response.status_code < 500 or gave_up, (response.status_code, response.text, sent)


def check(response: httpx.Response, sent: Any) -> None:
    """The contract: no 5xx; an error is ``{"error": {message, type, param, code}}``."""
    below_500(response, sent)
    if response.status_code >= 400:
        error = response.json()["error"]
        assert set(error) >= {"message", "type", "param", "code"}, error
        assert isinstance(error["message"], str) and error["message"]
        assert "Traceback" not in error["message"]
        return
    if response.headers["content-type"].startswith("text/event-stream"):
        events = read_sse(response.text)
        assert events[-1] == SSEEvent("[DONE]"), response.text
        for event in events[:-1]:
            data = event.json()
            assert "choices" in data or "error" in data
    else:
        assert response.json()["choices"], response.text


def check_protocol(response: httpx.Response, sent: Any, path: str) -> None:
    """:func:`check` for any protocol route: no 5xx, errors in the route's shape, a stream
    that ends with its protocol's last event (or an error event)."""
    if path == "/v1/chat/completions":
        check(response, sent)
        return
    anthropic = path.startswith("/v1/messages")
    below_500(response, sent)
    if response.status_code >= 400:
        body = response.json()
        if anthropic:
            assert body["type"] == "error", body
        error = body["error"]
        assert isinstance(error["message"], str) and error["message"], body
        assert "Traceback" not in error["message"]
        return
    if response.headers["content-type"].startswith("text/event-stream"):
        events = [event.json() for event in read_sse(response.text) if event.data != "[DONE]"]
        last = events[-1]["type"]
        ends = (
            ("message_stop", "error")
            if anthropic
            else (
                "response.completed",
                "response.incomplete",
                "response.failed",
                "error",
            )
        )
        assert last in ends, response.text
    else:
        assert response.json(), response.text


def post(content: bytes, path: str = "/v1/chat/completions") -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=APP)
        async with httpx.AsyncClient(transport=transport, base_url="http://proxy") as client:
            return await client.post(
                path, content=content, headers={"content-type": "application/json"}
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


PROTOCOL_BODIES = {
    "/v1/messages": messages_like,
    "/v1/messages/count_tokens": messages_like,
    "/v1/responses": responses_like,
}


@pytest.mark.parametrize("path", sorted(PROTOCOL_BODIES))
def test_every_protocol_route_answers_bad_input_in_its_own_shape(path: str) -> None:
    @settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
    @given(st.one_of(PROTOCOL_BODIES[path], bodies))
    def one(body: Any) -> None:
        check_protocol(post(json.dumps(body).encode(), path), body, path)

    one()


@pytest.mark.parametrize(
    "item",
    [
        {"type": [None]},
        {"type": "message", "role": ["user"], "content": "hi"},
        {"role": {"a": 1}, "content": "hi"},
        {"type": "message", "role": "user", "content": [{"type": ["input_text"], "text": "x"}]},
    ],
)
def test_a_responses_item_field_of_the_wrong_json_type_is_a_400(item: dict[str, Any]) -> None:
    """Found by this fuzzing: a list or object as an input item's type, role or part type was
    a TypeError (unhashable) and a 500."""
    body = {"model": "m", "input": [item]}
    response = post(json.dumps(body).encode(), "/v1/responses")
    assert response.status_code == 400, response.text
    check_protocol(response, body, "/v1/responses")
