"""POST /v1/chat/completions through the in-process proxy: every mode, streamed and not."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.server.helpers import CALL_JSON, FENCED_CALL, WEATHER, assemble, chat, proxy, sse_events
from toolshim.testing import FakeUpstream, Reply, call


def weather_call(arguments: dict[str, Any]) -> None:
    assert arguments == {"city": "Paris"}


# -- non-streaming ----------------------------------------------------------------------------


async def test_native_tool_call_passes_through() -> None:
    upstream = FakeUpstream([Reply(None, [call("get_weather", {"city": "Paris"}, id="call_1")])])
    async with proxy(upstream) as p:
        response = await p.client.post("/v1/chat/completions", json=chat())
    assert response.status_code == 200
    assert response.headers["x-toolshim-emulated"] == "false"
    body = response.json()
    (tool_call,) = body["choices"][0]["message"]["tool_calls"]
    assert tool_call["id"] == "call_1"
    assert tool_call["function"]["name"] == "get_weather"
    weather_call(json.loads(tool_call["function"]["arguments"]))
    assert body["choices"][0]["finish_reason"] == "tool_calls"
    assert body["toolshim"]["emulated"] is False
    assert body["toolshim"]["mode"] == "auto"
    assert upstream.history[0]["tools"] == [WEATHER]


async def test_rejected_tools_are_emulated_and_learned() -> None:
    upstream = FakeUpstream([CALL_JSON, CALL_JSON], tools="reject")
    async with proxy(upstream) as p:
        first = await p.client.post("/v1/chat/completions", json=chat())
        second = await p.client.post("/v1/chat/completions", json=chat())
    for response in (first, second):
        assert response.status_code == 200
        assert response.headers["x-toolshim-emulated"] == "true"
        message = response.json()["choices"][0]["message"]
        assert message["content"] is None
        assert message["tool_calls"][0]["id"].startswith("emulated_")
        weather_call(json.loads(message["tool_calls"][0]["function"]["arguments"]))
    meta = first.json()["toolshim"]
    assert meta["emulated"] is True and meta["llm_calls"] == 2
    assert "tool calls emulated" in meta["warnings"]
    # The rejection was learned: the second request went straight to emulation.
    assert second.json()["toolshim"]["llm_calls"] == 1
    assert [("tools" in body) for body in upstream.history] == [True, False, False]


async def test_ignored_tools_with_a_fenced_call_are_rescued() -> None:
    upstream = FakeUpstream([FENCED_CALL], tools="ignore")
    async with proxy(upstream) as p:
        response = await p.client.post("/v1/chat/completions", json=chat())
    body = response.json()
    assert body["choices"][0]["finish_reason"] == "tool_calls"
    assert body["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert "tool calls recovered from content" in body["toolshim"]["warnings"]
    assert response.headers["x-toolshim-emulated"] == "false"


async def test_fallback_emulates_after_a_plain_text_reply() -> None:
    upstream = FakeUpstream(["Let me think about Paris.", CALL_JSON], tools="ignore")
    async with proxy(upstream, mode="fallback") as p:
        response = await p.client.post("/v1/chat/completions", json=chat())
    body = response.json()
    assert body["toolshim"]["mode"] == "fallback"
    assert body["toolshim"]["llm_calls"] == 2
    assert body["toolshim"]["emulated"] is True
    weather_call(
        json.loads(body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"])
    )
    assert "tools" in upstream.history[0] and "tools" not in upstream.history[1]


async def test_force_never_sends_tools_upstream() -> None:
    upstream = FakeUpstream([CALL_JSON])
    async with proxy(upstream, mode="force") as p:
        response = await p.client.post("/v1/chat/completions", json=chat())
    assert response.json()["toolshim"]["emulated"] is True
    assert "tools" not in upstream.history[0]
    system = upstream.history[0]["messages"][0]
    assert system["role"] == "system" and "get_weather" in system["content"]


async def test_off_passes_the_upstream_rejection_through() -> None:
    upstream = FakeUpstream([], tools="reject")
    async with proxy(upstream, mode="off") as p:
        response = await p.client.post("/v1/chat/completions", json=chat())
    assert response.status_code == 400
    assert "does not support tools" in response.json()["error"]["message"]


async def test_strip_drops_tools_and_answers_as_text() -> None:
    upstream = FakeUpstream(["It is sunny in Paris, I believe."])
    async with proxy(upstream, mode="strip") as p:
        response = await p.client.post("/v1/chat/completions", json=chat())
    body = response.json()
    assert body["choices"][0]["message"]["content"] == "It is sunny in Paris, I believe."
    assert "tools" not in upstream.history[0]
    assert any("tools dropped" in w for w in body["toolshim"]["warnings"])


async def test_plain_request_without_tools_is_a_pass_through() -> None:
    upstream = FakeUpstream(["Hello!"])
    async with proxy(upstream) as p:
        response = await p.client.post("/chat/completions", json=chat(tools=False))
    body = response.json()
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "Hello!"}
    assert body["toolshim"] == {
        "mode": "auto",
        "emulated": False,
        "dialect": None,
        "strategy": None,
        "llm_calls": 1,
        "reasks": 0,
        "warnings": [],
    }
    assert body["usage"]["total_tokens"] > 0


# -- per-request overrides ----------------------------------------------------------------------


async def test_mode_header_overrides_the_default() -> None:
    upstream = FakeUpstream([CALL_JSON])
    async with proxy(upstream, mode="off") as p:
        response = await p.client.post(
            "/v1/chat/completions", json=chat(), headers={"x-toolshim-mode": "force"}
        )
    assert response.json()["toolshim"]["mode"] == "force"
    assert "tools" not in upstream.history[0]


async def test_toolshim_body_object_overrides_and_is_not_sent_upstream() -> None:
    upstream = FakeUpstream([CALL_JSON])
    async with proxy(upstream, mode="off") as p:
        response = await p.client.post(
            "/v1/chat/completions", json=chat(toolshim={"mode": "force", "max_reasks": 0})
        )
    assert response.json()["toolshim"]["mode"] == "force"
    assert "toolshim" not in upstream.history[0]


async def test_dialect_and_strategy_headers_reach_the_engine() -> None:
    upstream = FakeUpstream(['{"tool_calls": []}', "It is sunny."])
    async with proxy(upstream, mode="force") as p:
        response = await p.client.post(
            "/v1/chat/completions",
            json=chat(),
            headers={"x-toolshim-strategy": "decision", "x-toolshim-dialect": "json"},
        )
    body = response.json()
    assert body["toolshim"]["strategy"] == "decision"
    assert body["toolshim"]["dialect"] == "json"
    assert body["choices"][0]["message"]["content"] == "It is sunny."
    assert body["toolshim"]["llm_calls"] == 2


@pytest.mark.parametrize(
    ("headers", "body_extra"),
    [({"x-toolshim-mode": "sometimes"}, {}), ({}, {"toolshim": {"mode": "sometimes"}})],
)
async def test_unknown_mode_is_a_400(headers: dict[str, str], body_extra: dict[str, Any]) -> None:
    upstream = FakeUpstream(["unused"])
    async with proxy(upstream) as p:
        response = await p.client.post(
            "/v1/chat/completions", json=chat(**body_extra), headers=headers
        )
    assert response.status_code == 400
    error = response.json()["error"]
    assert "'sometimes'" in error["message"] and "force" in error["message"]
    assert error["type"] == "invalid_request_error"
    assert upstream.calls == 0


async def test_pinned_model_replaces_whatever_the_caller_names() -> None:
    upstream = FakeUpstream(["hi", "hi"])
    options = {"default_model": "served-model", "pin_model": True}
    async with proxy(upstream, app_options=options) as p:
        await p.client.post("/v1/chat/completions", json=chat(tools=False, model="gpt-4o"))
        body = chat(tools=False)
        del body["model"]
        await p.client.post("/v1/chat/completions", json=body)
    assert [b["model"] for b in upstream.history] == ["served-model", "served-model"]


async def test_default_model_fills_only_a_missing_model() -> None:
    upstream = FakeUpstream(["hi", "hi"])
    async with proxy(upstream, app_options={"default_model": "fallback-model"}) as p:
        await p.client.post("/v1/chat/completions", json=chat(tools=False, model="named"))
        body = chat(tools=False)
        del body["model"]
        await p.client.post("/v1/chat/completions", json=body)
    assert [b["model"] for b in upstream.history] == ["named", "fallback-model"]


# -- streaming --------------------------------------------------------------------------------


async def test_streamed_emulated_call_for_a_rejecting_upstream() -> None:
    upstream = FakeUpstream([CALL_JSON], tools="reject")
    async with proxy(upstream) as p:
        response = await p.client.post("/v1/chat/completions", json=chat(stream=True))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["x-toolshim-emulated"] == "true"
    events = sse_events(response.text)
    assert events[-1] == "[DONE]"
    assert all(e["object"] == "chat.completion.chunk" for e in events[:-1])
    message = assemble(events)
    assert message["finish_reason"] == "tool_calls"
    (tool_call,) = message["tool_calls"]
    assert tool_call["name"] == "get_weather" and tool_call["id"].startswith("emulated_")
    weather_call(json.loads(tool_call["arguments"]))
    assert message["toolshim"]["emulated"] is True
    # The metadata rides on the last chunk only.
    assert [("toolshim" in e) for e in events[:-1]] == [False] * (len(events) - 2) + [True]


async def test_streamed_native_call_is_relayed() -> None:
    upstream = FakeUpstream([Reply(None, [call("get_weather", {"city": "Paris"}, id="call_9")])])
    async with proxy(upstream) as p:
        response = await p.client.post("/v1/chat/completions", json=chat(stream=True))
    message = assemble(sse_events(response.text))
    assert message["tool_calls"][0]["id"] == "call_9"
    weather_call(json.loads(message["tool_calls"][0]["arguments"]))
    assert response.headers["x-toolshim-emulated"] == "false"


async def test_streamed_fenced_call_from_an_ignoring_upstream() -> None:
    upstream = FakeUpstream([FENCED_CALL], tools="ignore")
    async with proxy(upstream) as p:
        response = await p.client.post("/v1/chat/completions", json=chat(stream=True))
    message = assemble(sse_events(response.text))
    assert message["finish_reason"] == "tool_calls"
    assert message["content"] == ""
    weather_call(json.loads(message["tool_calls"][0]["arguments"]))


async def test_streamed_fallback_with_plain_text_first() -> None:
    upstream = FakeUpstream(["Let me think about Paris.", CALL_JSON], tools="ignore")
    async with proxy(upstream, mode="fallback") as p:
        response = await p.client.post("/v1/chat/completions", json=chat(stream=True))
    message = assemble(sse_events(response.text))
    assert message["finish_reason"] == "tool_calls"
    assert message["content"] == ""  # the held native text never reached the caller
    assert message["toolshim"]["llm_calls"] == 2
    assert response.headers["x-toolshim-emulated"] == "true"


async def test_streamed_text_answer_and_usage_when_asked() -> None:
    upstream = FakeUpstream(["The weather in Paris is mild today."], tools="ignore")
    async with proxy(upstream, mode="force") as p:
        response = await p.client.post(
            "/v1/chat/completions",
            json=chat(stream=True, stream_options={"include_usage": True}),
        )
    events = sse_events(response.text)
    message = assemble(events)
    assert message["content"] == "The weather in Paris is mild today."
    assert message["finish_reason"] == "stop"
    assert message["usage"]["total_tokens"] > 0
    usage_chunks = [e for e in events[:-1] if e.get("usage")]
    assert len(usage_chunks) == 1 and usage_chunks[0]["choices"] == []


async def test_streamed_pass_through_has_no_usage_unless_asked() -> None:
    upstream = FakeUpstream(["Hello there, how are you?"])
    async with proxy(upstream) as p:
        response = await p.client.post("/v1/chat/completions", json=chat(tools=False, stream=True))
    events = sse_events(response.text)
    assert assemble(events)["content"] == "Hello there, how are you?"
    assert not any(e.get("usage") for e in events[:-1])
    assert len(events) > 3  # streamed in pieces, not in one block


@pytest.mark.parametrize("mode", ["auto", "off", "fallback", "force", "strip"])
@pytest.mark.parametrize("stream", [False, True])
async def test_every_mode_answers_a_question_without_tools(mode: str, stream: bool) -> None:
    upstream = FakeUpstream(["Paris is the capital of France."])
    async with proxy(upstream, mode=mode) as p:
        response = await p.client.post(
            "/v1/chat/completions", json=chat(tools=False, stream=stream)
        )
    assert response.status_code == 200
    if stream:
        message = assemble(sse_events(response.text))
        content, meta = message["content"], message["toolshim"]
    else:
        content = response.json()["choices"][0]["message"]["content"]
        meta = response.json()["toolshim"]
    assert content == "Paris is the capital of France."
    assert meta["mode"] == mode
