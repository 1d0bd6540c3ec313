"""The official anthropic SDK against the proxy on a real uvicorn: /v1/messages in every mode,
streamed and not, tool results, tool_choice, and the errors in Anthropic's shape."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

import anthropic
from tests.anthropic.conftest import ASK, TIME, blocks, live
from toolshim.errors import UpstreamStatusError
from toolshim.testing import CALL_JSON, FakeUpstream, Reply, call
from toolshim.testing import WEATHER_ANTHROPIC as WEATHER

NATIVE_CALL = Reply(None, [call("get_weather", {"city": "Paris"}, id="call_1")])

# mode, how the fake treats tools, its reply, the blocks expected
MODES: list[tuple[str, str, Any, str]] = [
    ("off", "native", NATIVE_CALL, "toolu_"),
    ("auto", "native", NATIVE_CALL, "toolu_"),
    ("fallback", "native", NATIVE_CALL, "toolu_"),
    ("force", "ignore", CALL_JSON, "toolu_emulated_"),
    ("auto", "reject", CALL_JSON, "toolu_emulated_"),
    ("fallback", "reject", CALL_JSON, "toolu_emulated_"),
]


async def _create_and_stream(mode: str, tools: str, reply: Any) -> tuple[Any, Any, FakeUpstream]:
    upstream = FakeUpstream([reply, reply], tools=tools)  # type: ignore[arg-type]
    async with live(upstream, mode=mode) as proxy:
        created = await proxy.client.messages.create(
            model="fake-model", max_tokens=200, messages=ASK, tools=[WEATHER]
        )
        async with proxy.client.messages.stream(
            model="fake-model", max_tokens=200, messages=ASK, tools=[WEATHER]
        ) as stream:
            streamed = await stream.get_final_message()
    return created, streamed, upstream


@pytest.mark.parametrize(("mode", "tools", "reply", "id_kind"), MODES)
async def test_tool_call_in_every_mode_streamed_and_not(
    mode: str, tools: str, reply: Any, id_kind: str
) -> None:
    created, streamed, _ = await _create_and_stream(mode, tools, reply)
    expected = [
        {"type": "tool_use", "id": id_kind, "name": "get_weather", "input": {"city": "Paris"}}
    ]
    assert blocks(created) == expected
    assert blocks(streamed) == expected
    assert created.stop_reason == streamed.stop_reason == "tool_use"
    assert created.id.startswith("msg_") and streamed.id.startswith("msg_")
    meta = created.model_extra["toolshim"]
    assert meta["mode"] == mode
    assert meta["emulated"] is (id_kind == "toolu_emulated_")
    assert ("tool calls emulated" in meta["warnings"]) is meta["emulated"]


async def test_strip_mode_answers_in_text_streamed_and_not() -> None:
    upstream = FakeUpstream(["It is sunny.", "It is sunny."], tools="reject")
    async with live(upstream, mode="strip") as proxy:
        created = await proxy.client.messages.create(
            model="fake-model", max_tokens=200, messages=ASK, tools=[WEATHER]
        )
        async with proxy.client.messages.stream(
            model="fake-model", max_tokens=200, messages=ASK, tools=[WEATHER]
        ) as stream:
            streamed = await stream.get_final_message()
    assert blocks(created) == blocks(streamed) == [{"type": "text", "text": "It is sunny."}]
    assert created.stop_reason == streamed.stop_reason == "end_turn"
    assert all("tools" not in body for body in upstream.history)


async def test_emulated_response_carries_the_header_and_usage() -> None:
    upstream = FakeUpstream([CALL_JSON], tools="ignore")
    async with live(upstream, mode="force") as proxy:
        raw = await proxy.client.messages.with_raw_response.create(
            model="fake-model", max_tokens=200, messages=ASK, tools=[WEATHER]
        )
    assert raw.headers["x-toolshim-emulated"] == "true"
    message = await raw.parse()
    assert message.usage.input_tokens == 10
    assert message.usage.output_tokens > 0


async def test_tool_result_round_trip_reaches_the_upstream_as_a_tool_message() -> None:
    upstream = FakeUpstream(["Paris: 21°C and sunny."], tools="ignore")
    history = [
        *ASK,
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me look."},
                {
                    "type": "tool_use",
                    "id": "toolu_emulated_1_0",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_emulated_1_0",
                    "content": [{"type": "text", "text": "21°C, sunny"}],
                },
                {"type": "text", "text": "Answer briefly."},
            ],
        },
    ]
    async with live(upstream, mode="off") as proxy:
        message = await proxy.client.messages.create(
            model="fake-model", max_tokens=200, messages=history, tools=[WEATHER]
        )
    assert blocks(message) == [{"type": "text", "text": "Paris: 21°C and sunny."}]
    assert message.stop_reason == "end_turn"
    sent = upstream.history[0]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "user"]
    assert sent[1]["tool_calls"][0]["id"] == "toolu_emulated_1_0"
    assert sent[1]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert sent[2] == {
        "role": "tool",
        "content": "21°C, sunny",
        "tool_call_id": "toolu_emulated_1_0",
    }
    assert sent[3] == {"role": "user", "content": "Answer briefly."}


async def test_an_error_result_is_marked_for_the_model() -> None:
    upstream = FakeUpstream(["Sorry, the lookup failed."])
    history = [
        *ASK,
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": "no such city",
                    "is_error": True,
                }
            ],
        },
    ]
    async with live(upstream, mode="off") as proxy:
        await proxy.client.messages.create(
            model="fake-model", max_tokens=50, messages=history, tools=[WEATHER]
        )
    assert upstream.history[0]["messages"][2]["content"] == "Error: no such city"


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ({"type": "any"}, "required"),
        (
            {"type": "tool", "name": "get_time"},
            {"type": "function", "function": {"name": "get_time"}},
        ),
        ({"type": "none"}, "none"),
        ({"type": "auto", "disable_parallel_tool_use": True}, "auto"),
    ],
)
async def test_tool_choice_goes_upstream_as_its_chat_equivalent(choice: Any, wire: Any) -> None:
    reply = Reply(None, [call("get_time", {"city": "Oslo"})]) if choice["type"] != "none" else "Hi"
    upstream = FakeUpstream([reply])
    async with live(upstream, mode="off") as proxy:
        await proxy.client.messages.create(
            model="fake-model",
            max_tokens=50,
            messages=ASK,
            tools=[WEATHER, TIME],
            tool_choice=choice,
        )
    body = upstream.history[0]
    assert body["tool_choice"] == wire
    assert body.get("parallel_tool_calls") is (
        False if choice.get("disable_parallel_tool_use") else None
    )


async def test_tool_choice_is_enforced_when_emulating() -> None:
    """``tool`` forces that tool: a call to another one is re-asked; ``none`` returns text."""
    other = '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]}'
    wanted = '{"tool_calls": [{"name": "get_time", "arguments": {"city": "Oslo"}}]}'
    upstream = FakeUpstream([other, wanted, "Hello there."], tools="ignore")
    async with live(upstream, mode="force") as proxy:
        forced = await proxy.client.messages.create(
            model="fake-model",
            max_tokens=50,
            messages=ASK,
            tools=[WEATHER, TIME],
            tool_choice={"type": "tool", "name": "get_time"},
        )
        none = await proxy.client.messages.create(
            model="fake-model",
            max_tokens=50,
            messages=ASK,
            tools=[WEATHER, TIME],
            tool_choice={"type": "none"},
        )
    assert [b["name"] for b in blocks(forced)] == ["get_time"]
    assert forced.model_extra["toolshim"]["reasks"] == 1
    assert blocks(none) == [{"type": "text", "text": "Hello there."}]
    assert none.stop_reason == "end_turn"


async def test_system_stop_sequences_and_sampling_reach_the_upstream() -> None:
    upstream = FakeUpstream(["ok"])
    async with live(upstream, mode="off") as proxy:
        await proxy.client.messages.create(
            model="fake-model",
            max_tokens=64,
            system=[{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
            messages=ASK,
            stop_sequences=["END"],
            metadata={"user_id": "u-1"},
            # (this SDK version has no sampling arguments; Claude Code still sends them)
            extra_body={"temperature": 0.2, "top_p": 0.9, "top_k": 40},
        )
    body = upstream.history[0]
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert (
        body["max_tokens"],
        body["stop"],
        body["temperature"],
        body["top_p"],
        body["top_k"],
    ) == (
        64,
        ["END"],
        0.2,
        0.9,
        40,
    )
    assert "metadata" not in body


async def test_server_tools_are_dropped_with_a_warning() -> None:
    upstream = FakeUpstream(["ok"])
    async with live(upstream, mode="off") as proxy:
        message = await proxy.client.messages.create(
            model="fake-model",
            max_tokens=50,
            messages=ASK,
            tools=[WEATHER, {"type": "web_search_20250305", "name": "web_search"}],
        )
    assert [t["function"]["name"] for t in upstream.history[0]["tools"]] == ["get_weather"]
    assert any(
        "'web_search'" in w and "dropped" in w for w in message.model_extra["toolshim"]["warnings"]
    )


async def test_beta_query_and_anthropic_headers_are_accepted() -> None:
    upstream = FakeUpstream(["ok", "ok"])
    async with live(upstream, mode="off") as proxy:
        beta = await proxy.client.beta.messages.create(
            model="fake-model",
            max_tokens=10,
            messages=ASK,
            betas=["interleaved-thinking-2025-05-14"],
        )
        async with httpx.AsyncClient() as http:
            response = await http.post(
                f"{proxy.url}/v1/messages?beta=true",
                headers={
                    "x-api-key": "sk-ant-x",
                    "anthropic-version": "2023-06-01",
                    "anthropic-beta": "x",
                },
                json={"model": "fake-model", "max_tokens": 10, "messages": ASK},
            )
    assert beta.content[0].text == "ok"
    assert response.status_code == 200, response.text
    assert response.json()["content"] == [{"type": "text", "text": "ok"}]


async def test_max_tokens_stop_reason() -> None:
    upstream = FakeUpstream([Reply("It is", finish_reason="length")] * 2)
    async with live(upstream, mode="off") as proxy:
        created = await proxy.client.messages.create(model="fake-model", max_tokens=2, messages=ASK)
        async with proxy.client.messages.stream(
            model="fake-model", max_tokens=2, messages=ASK
        ) as stream:
            streamed = await stream.get_final_message()
    assert created.stop_reason == streamed.stop_reason == "max_tokens"


# -- errors ---------------------------------------------------------------------------------


def _failing(status: int, message: str = "upstream says no") -> FakeUpstream:
    return FakeUpstream(
        [UpstreamStatusError(message, status=status, body={"error": {"message": message}})]
    )


@pytest.mark.parametrize(
    ("status", "exception", "kind"),
    [
        (400, anthropic.BadRequestError, "invalid_request_error"),
        (401, anthropic.AuthenticationError, "authentication_error"),
        (403, anthropic.PermissionDeniedError, "permission_error"),
        (404, anthropic.NotFoundError, "not_found_error"),
        (429, anthropic.RateLimitError, "rate_limit_error"),
        (500, anthropic.InternalServerError, "api_error"),
        (
            529,
            anthropic.InternalServerError,
            "overloaded_error",
        ),  # (OverloadedError where the SDK has it)
    ],
)
async def test_upstream_errors_in_anthropic_shape(
    status: int, exception: type[Exception], kind: str
) -> None:
    async with live(_failing(status), mode="off") as proxy:
        with pytest.raises(exception) as caught:
            await proxy.client.messages.create(model="fake-model", max_tokens=10, messages=ASK)
    error = caught.value
    assert isinstance(error, anthropic.APIStatusError)
    assert error.status_code == status
    assert error.body["type"] == "error"  # type: ignore[index]
    assert error.body["error"] == {"type": kind, "message": "upstream says no"}  # type: ignore[index]


async def test_bad_requests_are_invalid_request_errors() -> None:
    async with live(FakeUpstream(), mode="off") as proxy:
        with pytest.raises(anthropic.BadRequestError) as no_messages:
            await proxy.client.messages.create(model="fake-model", max_tokens=10, messages=[])
        with pytest.raises(anthropic.BadRequestError) as unknown_tool:
            await proxy.client.messages.create(
                model="fake-model",
                max_tokens=10,
                messages=ASK,
                tools=[WEATHER],
                tool_choice={"type": "tool", "name": "nope"},
            )
        async with httpx.AsyncClient() as http:
            not_json = await http.post(f"{proxy.url}/v1/messages", content=b"{oops")
            wrong_method = await http.get(f"{proxy.url}/v1/messages")
            unknown = await http.post(f"{proxy.url}/v1/messages/nope", json={})
    assert "messages" in no_messages.value.message
    assert "'nope'" in unknown_tool.value.message
    assert not_json.status_code == 400
    assert not_json.json()["error"]["type"] == "invalid_request_error"
    assert wrong_method.status_code == 405
    assert wrong_method.json()["type"] == "error"
    assert unknown.status_code == 404
    assert unknown.json()["error"]["type"] == "not_found_error"


async def test_unreachable_upstream_is_an_api_error() -> None:
    from toolshim.upstreams import OpenAIUpstream

    async with live(OpenAIUpstream("http://127.0.0.1:9/v1"), mode="off") as proxy:
        with pytest.raises(anthropic.InternalServerError) as caught:
            await proxy.client.messages.create(model="fake-model", max_tokens=10, messages=ASK)
    assert caught.value.status_code == 502
    assert caught.value.body["error"]["type"] == "api_error"  # type: ignore[index]


async def test_retries_exhausted_is_an_error_with_the_metadata() -> None:
    bad = '{"tool_calls": [{"name": "nope", "arguments": {}}]}'
    upstream = FakeUpstream([bad, bad, bad], tools="ignore")
    async with live(upstream, mode="force") as proxy:
        with pytest.raises(anthropic.InternalServerError) as caught:
            await proxy.client.messages.create(
                model="fake-model",
                max_tokens=10,
                messages=ASK,
                tools=[WEATHER],
                tool_choice={"type": "any"},
            )
    body = caught.value.body
    assert caught.value.status_code == 502
    assert body["error"]["type"] == "api_error"  # type: ignore[index]
    assert body["toolshim"]["reasks"] == 2  # type: ignore[index]
    assert caught.value.response.headers["x-toolshim-emulated"] == "true"
    assert caught.value.response.headers["x-should-retry"] == "false"


async def test_sdk_retries_are_not_spent_on_exhausted_reasks() -> None:
    bad = '{"tool_calls": [{"name": "nope", "arguments": {}}]}'
    upstream = FakeUpstream([bad] * 9, tools="ignore")
    async with live(upstream, mode="force") as proxy:
        client = proxy.client.with_options(max_retries=2)
        with pytest.raises(anthropic.InternalServerError):
            await client.messages.create(
                model="fake-model",
                max_tokens=10,
                messages=ASK,
                tools=[WEATHER],
                tool_choice={"type": "any"},
            )
    assert upstream.calls == 3  # one turn: the call and two re-asks, not three turns


async def test_a_stream_that_breaks_after_it_began_ends_with_an_error_event() -> None:
    class Breaking(FakeUpstream):
        async def stream_body(self, body: Any, *, headers: Any = None) -> Any:
            yield {
                "id": "c",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "m",
                "choices": [
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "content": "Hel"},
                        "finish_reason": None,
                    }
                ],
            }
            raise UpstreamStatusError("overloaded", status=529)

    async with live(Breaking(), mode="off") as proxy:
        async with httpx.AsyncClient() as http:
            response = await http.post(
                f"{proxy.url}/v1/messages",
                json={"model": "fake-model", "max_tokens": 10, "messages": ASK, "stream": True},
            )
        with pytest.raises(anthropic.APIStatusError) as caught:
            async with proxy.client.messages.stream(
                model="fake-model", max_tokens=10, messages=ASK
            ) as stream:
                await stream.get_final_message()
    names = [
        line[len("event: ") :] for line in response.text.splitlines() if line.startswith("event: ")
    ]
    assert names == ["message_start", "content_block_start", "content_block_delta", "error"]
    assert "overloaded" in str(caught.value)
