"""Error responses carry the turn's ``toolshim`` metadata and the ``x-toolshim-emulated`` header
once the engine had started serving the turn, and the openai SDK still reads them as errors."""

from __future__ import annotations

from typing import Any, cast

import httpx
import openai
import pytest

from tests.server.helpers import CALL_JSON, WEATHER, chat, proxy, sdk, sse_events
from toolshim.errors import UpstreamStatusError
from toolshim.testing import FakeUpstream

UNKNOWN = '{"tool_calls": [{"name": "zz", "arguments": {}}]}'
ERROR_KEYS = {"message", "type", "param", "code"}
META_KEYS = {"mode", "emulated", "dialect", "strategy", "llm_calls", "reasks", "warnings"}


def error_and_meta(response: httpx.Response, status: int) -> tuple[dict[str, Any], dict[str, Any]]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error", "toolshim"}
    assert set(body["error"]) == ERROR_KEYS
    assert set(body["toolshim"]) == META_KEYS
    return body["error"], body["toolshim"]


@pytest.mark.parametrize("stream", [False, True])
async def test_retries_exhausted_carries_the_metadata_and_the_header(stream: bool) -> None:
    upstream = FakeUpstream([UNKNOWN] * 3)
    async with proxy(upstream, mode="force") as p:
        response = await p.client.post(
            "/v1/chat/completions", json=chat(stream=stream, tool_choice="required")
        )
    error, meta = error_and_meta(response, 502)
    assert error["code"] == "tool_call_retries_exhausted"
    assert response.headers["x-toolshim-emulated"] == "true"
    assert meta["emulated"] is True and meta["mode"] == "force"
    assert (meta["llm_calls"], meta["reasks"]) == (3, 2)
    assert "tool calls emulated" not in meta["warnings"]  # no emulated call came back


@pytest.mark.parametrize("stream", [False, True])
async def test_an_upstream_error_carries_the_metadata(stream: bool) -> None:
    upstream = FakeUpstream([UpstreamStatusError("overloaded", status=503)])
    async with proxy(upstream, mode="off") as p:
        response = await p.client.post("/v1/chat/completions", json=chat(stream=stream))
    error, meta = error_and_meta(response, 503)
    assert error["message"] == "overloaded"
    assert response.headers["x-toolshim-emulated"] == "false"
    assert (meta["mode"], meta["emulated"], meta["llm_calls"]) == ("off", False, 1)


async def test_a_bad_request_has_no_metadata() -> None:
    async with proxy(FakeUpstream([])) as p:
        response = await p.client.post(
            "/v1/chat/completions", json=chat(), headers={"x-toolshim-mode": "nope"}
        )
    assert response.status_code == 400
    assert set(response.json()) == {"error"}
    assert "x-toolshim-emulated" not in response.headers


async def test_an_error_mid_stream_is_an_event_with_the_metadata() -> None:
    class BreaksAfterTheCall(FakeUpstream):
        """Emulated: the first reply is prose then nonsense; the re-ask's stream breaks."""

        async def stream_body(self, body: Any, *, headers: Any = None) -> Any:
            sent = 0
            async for chunk in super().stream_body(body, headers=headers):
                yield chunk
                sent += 1
                if self.calls == 2 and sent == 2:
                    raise UpstreamStatusError("the model crashed", status=500)

    upstream = BreaksAfterTheCall([f"Checking now. {UNKNOWN}", "A long answer, never finished."])
    async with proxy(upstream, mode="force") as p:
        response = await p.client.post("/v1/chat/completions", json=chat(stream=True))
    assert response.status_code == 200
    assert response.headers["x-toolshim-emulated"] == "true"
    events = sse_events(response.text)
    assert events[-1] == "[DONE]"
    failure = events[-2]
    assert set(failure) == {"error", "toolshim"}
    assert failure["error"]["message"] == "the model crashed"
    assert set(failure["error"]) == ERROR_KEYS
    meta = failure["toolshim"]
    assert meta["emulated"] is True and (meta["llm_calls"], meta["reasks"]) == (2, 1)


# -- the openai SDK reads these errors as before ----------------------------------------------


async def test_the_sdk_raises_on_an_error_with_metadata() -> None:
    upstream = FakeUpstream([UNKNOWN] * 3)
    async with sdk(upstream, mode="force") as client:
        with pytest.raises(openai.APIStatusError) as info:
            await client.chat.completions.create(
                model="fake-model",
                messages=[{"role": "user", "content": "Weather in Paris?"}],
                tools=[cast(Any, WEATHER)],
                tool_choice="required",
            )
    error = info.value
    assert error.status_code == 502
    assert error.code == "tool_call_retries_exhausted"
    assert "valid tool call" in error.message
    assert error.response.headers["x-toolshim-emulated"] == "true"
    assert error.response.json()["toolshim"]["llm_calls"] == 3


async def test_the_sdk_raises_on_a_stream_that_fails_before_its_first_chunk() -> None:
    upstream = FakeUpstream([UNKNOWN] * 3)
    async with sdk(upstream, mode="force") as client:
        with pytest.raises(openai.APIStatusError) as info:  # a real status, not an event
            await client.chat.completions.create(
                model="fake-model",
                messages=[{"role": "user", "content": "Weather in Paris?"}],
                tools=[cast(Any, WEATHER)],
                tool_choice="required",
                stream=True,
            )
    assert info.value.status_code == 502
    assert info.value.response.headers["x-toolshim-emulated"] == "true"


async def test_the_sdk_raises_on_an_error_event_mid_stream() -> None:
    class BreaksMidStream(FakeUpstream):
        async def stream_body(self, body: Any, *, headers: Any = None) -> Any:
            sent = 0
            async for chunk in super().stream_body(body, headers=headers):
                yield chunk
                sent += 1
                if sent == 3:
                    raise UpstreamStatusError("the model crashed", status=500)

    upstream = BreaksMidStream(["A long answer that will not finish."])
    async with sdk(upstream, mode="off") as client:
        stream = await client.chat.completions.create(
            model="fake-model",
            messages=[{"role": "user", "content": "Hello?"}],
            stream=True,
        )
        with pytest.raises(openai.APIError) as info:
            async for _ in stream:
                pass
    assert "the model crashed" in info.value.message


async def test_a_successful_call_still_parses() -> None:
    async with sdk(FakeUpstream([CALL_JSON]), mode="force") as client:
        reply = await client.chat.completions.create(
            model="fake-model",
            messages=[{"role": "user", "content": "Weather in Paris?"}],
            tools=[cast(Any, WEATHER)],
        )
    calls = reply.choices[0].message.tool_calls
    assert calls is not None and calls[0].type == "function"
    assert calls[0].function.name == "get_weather"


@pytest.mark.parametrize("tools", [True, False])
async def test_text_sent_before_an_error_mid_stream_all_reaches_the_caller(tools: bool) -> None:
    class BreaksAfterThreePieces(FakeUpstream):
        async def stream_body(self, body: Any, *, headers: Any = None) -> Any:
            self.history.append(dict(body))
            for piece in ({"role": "assistant", "content": ""}, "Hello ", "world ", "and more"):
                delta = piece if isinstance(piece, dict) else {"content": piece}
                yield {
                    "id": "chatcmpl-1",
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": "m",
                    "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
                }
            raise UpstreamStatusError("connection reset mid-stream", status=502)

    async with proxy(BreaksAfterThreePieces([], tools="native")) as p:
        response = await p.client.post("/v1/chat/completions", json=chat(tools=tools, stream=True))
    events = sse_events(response.text)
    text = "".join(
        e["choices"][0]["delta"].get("content") or ""
        for e in events
        if isinstance(e, dict) and e.get("choices")
    )
    assert text == "Hello world and more"
    assert events[-1] == "[DONE]" and events[-2]["error"]["message"] == (
        "connection reset mid-stream"
    )
