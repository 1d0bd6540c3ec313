"""Every failure answers with the OpenAI error body and the right status; none leaks or lingers."""

from __future__ import annotations

from typing import Any

import pytest

from tests.server.helpers import assemble, chat, proxy, sse_events
from toolshim.errors import UpstreamStatusError
from toolshim.testing import FakeUpstream, FunctionUpstream
from toolshim.testing.server import ScriptedUpstream, serve_fake
from toolshim.upstreams.aiohttp_upstream import AiohttpUpstream

ERROR_KEYS = {"message", "type", "param", "code"}


def openai_error(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    # "toolshim" (the turn's metadata) rides beside "error" once the engine started the turn.
    assert set(body) <= {"error", "toolshim"} and set(body["error"]) == ERROR_KEYS
    if "toolshim" in body:
        emulated = str(body["toolshim"]["emulated"]).lower()
        assert response.headers["x-toolshim-emulated"] == emulated
    assert "Traceback" not in response.text
    assert response.headers["x-request-id"].startswith("req_")
    return dict(body["error"])


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b'{"model": "m", "messages": [', "not valid JSON"),
        (b"", "empty"),
        (b"[1, 2]", "must be a JSON object"),
    ],
)
async def test_malformed_json_is_a_400(content: bytes, fragment: str) -> None:
    async with proxy(FakeUpstream()) as p:
        response = await p.client.post(
            "/v1/chat/completions", content=content, headers={"content-type": "application/json"}
        )
    error = openai_error(response, 400)
    assert fragment in error["message"]
    assert error["type"] == "invalid_request_error"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "m", "messages": "hello"}, "messages"),
        ({"model": "m"}, "messages"),
        (
            {
                "model": "m",
                "messages": [{"role": "user", "content": "hi"}],
                "tools": [{"type": "function", "function": {"description": "no name"}}],
            },
            "tools.0.function.name",
        ),
        (
            {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tool_choice": "x"},
            "tool_choice",
        ),
    ],
)
async def test_invalid_requests_name_the_field(body: dict[str, Any], param: str) -> None:
    upstream = FakeUpstream(["never sent"])
    async with proxy(upstream) as p:
        response = await p.client.post("/v1/chat/completions", json=body)
        stream_response = await p.client.post("/v1/chat/completions", json={**body, "stream": True})
    for r in (response, stream_response):
        error = openai_error(r, 400)
        assert error["param"] == param
    assert upstream.calls == 0


async def test_upstream_error_keeps_its_status_and_message() -> None:
    failure = UpstreamStatusError(
        "model 'nope' not found", status=404, body={"error": {"message": "model 'nope' not found"}}
    )
    async with proxy(FakeUpstream([failure])) as p:
        response = await p.client.post("/v1/chat/completions", json=chat(tools=False))
    error = openai_error(response, 404)
    assert error["message"] == "model 'nope' not found"


async def test_a_bad_request_does_not_affect_the_next() -> None:
    upstream = FakeUpstream(["fine"])
    async with proxy(upstream) as p:
        bad = await p.client.post("/v1/chat/completions", content=b"{nope")
        good = await p.client.post("/v1/chat/completions", json=chat(tools=False))
    openai_error(bad, 400)
    assert good.status_code == 200
    assert good.json()["choices"][0]["message"]["content"] == "fine"


async def test_an_internal_bug_is_a_500_without_traceback() -> None:
    def explode(body: dict[str, Any]) -> str:
        raise ZeroDivisionError("secret internals")

    async with proxy(FunctionUpstream(explode)) as p:
        response = await p.client.post("/v1/chat/completions", json=chat(tools=False))
        stream = await p.client.post("/v1/chat/completions", json=chat(tools=False, stream=True))
    for r in (response, stream):
        error = openai_error(r, 500)
        assert "ZeroDivisionError" in error["message"]
        assert "secret internals" not in error["message"]


async def test_retries_exhausted_is_a_502() -> None:
    upstream = FakeUpstream(['{"tool_calls": [{"name": "nope", "arguments": {}}]}'] * 3)
    async with proxy(upstream, mode="force", max_reasks=2) as p:
        response = await p.client.post("/v1/chat/completions", json=chat(tool_choice="required"))
    error = openai_error(response, 502)
    assert error["code"] == "tool_call_retries_exhausted"
    assert "'nope'" in error["message"]


async def test_unknown_route_and_method_use_the_openai_error_shape() -> None:
    async with proxy(FakeUpstream()) as p:
        missing = await p.client.get("/v1/embeddings")
        wrong = await p.client.get("/v1/chat/completions")
    assert "/v1/chat/completions" in openai_error(missing, 404)["message"]
    assert "POST" in openai_error(wrong, 405)["message"]


# -- a real upstream over HTTP: unreachable, slow, failing mid-stream ------------------------------


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("stream", [False, True])
async def test_unreachable_upstream_is_a_502(stream: bool) -> None:
    upstream = AiohttpUpstream(f"http://127.0.0.1:{_closed_port()}/v1")
    async with proxy(upstream) as p:
        response = await p.client.post("/v1/chat/completions", json=chat(stream=stream))
        await p.engine.aclose()
    error = openai_error(response, 502)
    assert error["code"] == "upstream_unreachable"
    assert "could not reach" in error["message"]


@pytest.mark.parametrize("stream", [False, True])
async def test_upstream_timeout_is_a_504(stream: bool) -> None:
    slow = ScriptedUpstream({"replies": ["late"], "delay": 5})
    with serve_fake(slow) as server:
        upstream = AiohttpUpstream(server.base_url, timeout=0.2)
        async with proxy(upstream) as p:
            response = await p.client.post("/v1/chat/completions", json=chat(stream=stream))
            await p.engine.aclose()
    error = openai_error(response, 504)
    assert error["code"] == "upstream_timeout"


async def test_error_after_the_stream_started_is_an_event_then_done() -> None:
    sent_text: list[str] = []

    class BreaksMidStream(FakeUpstream):
        async def stream_body(self, body: Any, *, headers: Any = None) -> Any:
            sent = 0
            async for chunk in super().stream_body(body, headers=headers):
                yield chunk
                sent_text.append(chunk["choices"][0]["delta"].get("content") or "")
                sent += 1
                if sent == 3:
                    raise UpstreamStatusError("the model crashed", status=500)

    upstream = BreaksMidStream(["A long answer that will not finish."])
    async with proxy(upstream) as p:
        response = await p.client.post("/v1/chat/completions", json=chat(tools=False, stream=True))
    assert response.status_code == 200
    events = sse_events(response.text)
    assert events[-1] == "[DONE]"
    assert events[-2]["error"] == {
        "message": "the model crashed",
        "type": "upstream_error",
        "param": None,
        "code": None,
    }
    assert set(events[-2]) == {"error", "toolshim"}  # the turn's metadata beside the error
    # every piece sent before the crash reaches the caller (the last one too)
    assert assemble(events[:-2])["content"] == "".join(sent_text)
    assert "".join(sent_text).startswith("A long answer ") and len(sent_text) == 3


async def test_streamed_rejection_before_any_chunk_gets_a_real_status() -> None:
    upstream = FakeUpstream([], tools="reject")
    async with proxy(upstream, mode="off") as p:
        response = await p.client.post("/v1/chat/completions", json=chat(stream=True))
    assert "does not support tools" in openai_error(response, 400)["message"]
