"""Legacy ``functions``/``function_call`` through the proxy, driven by the real openai SDK.

The SDK still takes ``functions=`` and ``function_call=``; the proxy must emulate them for a
model that rejects tools and answer in the legacy shape, streamed and not.
"""

from __future__ import annotations

import json
from typing import Any, cast

import openai
import pytest
from openai.types.chat import ChatCompletionChunk, ChatCompletionMessageParam
from openai.types.chat.completion_create_params import Function

from tests.server.helpers import CALL_JSON, WEATHER, sdk
from toolshim.testing import FakeUpstream, Reply, call

FUNCTION = cast(Function, WEATHER["function"])
CLOCK: Function = {"name": "get_time", "parameters": {"type": "object", "properties": {}}}
ASK: list[ChatCompletionMessageParam] = [
    {"role": "user", "content": "What is the weather in Paris?"}
]


def assert_no_legacy_fields(body: dict[str, Any]) -> None:
    """An upstream body in the tools shape only."""
    assert "functions" not in body and "function_call" not in body
    for message in body["messages"]:
        assert message["role"] != "function"
        assert "function_call" not in message


async def fold(stream: openai.AsyncStream[ChatCompletionChunk]) -> dict[str, Any]:
    """A legacy stream folded as an old client does: name first, then argument fragments."""
    deltas: list[dict[str, Any]] = []
    content, finish, meta = "", None, None
    async for chunk in stream:
        meta = (chunk.model_extra or {}).get("toolshim", meta)
        for choice in chunk.choices:
            assert choice.delta.tool_calls is None
            if choice.delta.function_call is not None:
                deltas.append(choice.delta.function_call.model_dump(exclude_none=True))
            content += choice.delta.content or ""
            finish = choice.finish_reason or finish
    return {
        "deltas": deltas,
        "name": "".join(d.get("name", "") for d in deltas),
        "arguments": "".join(d.get("arguments", "") for d in deltas),
        "content": content,
        "finish": finish,
        "toolshim": meta,
    }


@pytest.mark.parametrize("mode", ["auto", "force"])
async def test_a_named_function_call_is_emulated_and_answered_as_function_call(mode: str) -> None:
    upstream = FakeUpstream([CALL_JSON], tools="reject")
    async with sdk(upstream, mode=mode) as client:
        raw = await client.chat.completions.with_raw_response.create(
            model="fake-model",
            messages=ASK,
            functions=[FUNCTION, CLOCK],
            function_call={"name": "get_weather"},
            temperature=0,
        )
    completion = raw.parse()
    assert raw.headers["x-toolshim-emulated"] == "true"
    choice = completion.choices[0]
    assert choice.finish_reason == "function_call"
    assert choice.message.tool_calls is None
    assert choice.message.content is None
    assert choice.message.function_call is not None
    assert choice.message.function_call.name == "get_weather"
    assert json.loads(choice.message.function_call.arguments) == {"city": "Paris"}
    meta = (completion.model_extra or {})["toolshim"]
    assert meta["emulated"] is True and meta["mode"] == mode
    # auto tried the tools natively first (and was rejected); both went in the tools shape.
    assert len(upstream.history) == (2 if mode == "auto" else 1)
    for body in upstream.history:
        assert_no_legacy_fields(body)
        assert body["temperature"] == 0
    if mode == "auto":
        assert upstream.history[0]["tools"][0]["function"] == FUNCTION
        assert upstream.history[0]["tool_choice"] == {
            "type": "function",
            "function": {"name": "get_weather"},
        }
    emulated = upstream.history[-1]
    assert "tools" not in emulated
    prompt = json.dumps(emulated["messages"])
    assert "get_weather" in prompt and "city" in prompt  # the tool prompt, with its schema


async def test_a_streamed_legacy_call_arrives_as_function_call_deltas() -> None:
    upstream = FakeUpstream([CALL_JSON], tools="reject")
    async with sdk(upstream) as client:
        stream = await client.chat.completions.create(
            model="fake-model", messages=ASK, functions=[FUNCTION], stream=True
        )
        folded = await fold(stream)
    assert folded["deltas"][0] == {"name": "get_weather", "arguments": ""}
    assert all("name" not in d for d in folded["deltas"][1:])
    assert folded["name"] == "get_weather"
    assert json.loads(folded["arguments"]) == {"city": "Paris"}
    assert folded["finish"] == "function_call"
    assert folded["content"] == ""
    assert folded["toolshim"]["emulated"] is True
    assert_no_legacy_fields(upstream.history[-1])


@pytest.mark.parametrize("stream", [False, True])
async def test_legacy_history_reaches_an_emulated_model_as_text(stream: bool) -> None:
    upstream = FakeUpstream(["It is sunny in Paris."], tools="reject")
    messages: list[ChatCompletionMessageParam] = [
        *ASK,
        {
            "role": "assistant",
            "content": None,
            "function_call": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
        },
        {"role": "function", "name": "get_weather", "content": "sunny, 24 C"},
    ]
    async with sdk(upstream) as client:
        if stream:
            chunks = await client.chat.completions.create(
                model="fake-model", messages=messages, functions=[FUNCTION], stream=True
            )
            folded = await fold(chunks)
            text, finish = folded["content"], folded["finish"]
        else:
            done = await client.chat.completions.create(
                model="fake-model", messages=messages, functions=[FUNCTION]
            )
            text, finish = done.choices[0].message.content, done.choices[0].finish_reason
            assert done.choices[0].message.function_call is None
    assert text == "It is sunny in Paris."
    assert finish == "stop"
    for body in upstream.history:
        assert_no_legacy_fields(body)
    rendered = json.dumps(upstream.history[-1]["messages"])
    assert "sunny, 24 C" in rendered and "Paris" in rendered


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("rescue", [True, False], ids=["relayed", "raw"])
async def test_native_parallel_calls_come_back_as_one_function_call(
    stream: bool, rescue: bool
) -> None:
    """In ``off`` the native reply is not trimmed by the engine; without rescue, its stream
    chunks are relayed raw, so the downgrade works on the upstream's own chunk dicts."""
    reply = Reply(
        None, [call("get_weather", {"city": "Paris"}, id="call_1"), call("get_time", id="call_2")]
    )
    upstream = FakeUpstream([reply], tools="native")
    async with sdk(upstream, mode="off", rescue=rescue) as client:
        if stream:
            chunks = await client.chat.completions.create(
                model="fake-model", messages=ASK, functions=[FUNCTION, CLOCK], stream=True
            )
            folded = await fold(chunks)
            name, arguments = folded["name"], folded["arguments"]
            finish, meta = folded["finish"], folded["toolshim"]
        else:
            done = await client.chat.completions.create(
                model="fake-model", messages=ASK, functions=[FUNCTION, CLOCK]
            )
            message = done.choices[0].message
            assert message.tool_calls is None and message.function_call is not None
            name, arguments = message.function_call.name, message.function_call.arguments
            finish, meta = done.choices[0].finish_reason, (done.model_extra or {})["toolshim"]
    assert name == "get_weather"
    assert json.loads(arguments) == {"city": "Paris"}
    assert finish == "function_call"
    assert meta["emulated"] is False
    # Upstream, the tools shape (no parallel_tool_calls: some models reject the field); the
    # dropped call is not silent.
    (body,) = upstream.history
    assert_no_legacy_fields(body)
    assert "parallel_tool_calls" not in body
    assert [t["function"]["name"] for t in body["tools"]] == ["get_weather", "get_time"]
    assert any("first" in w and "2" in w for w in meta["warnings"]), meta["warnings"]


async def test_functions_with_tools_is_a_400_naming_functions() -> None:
    upstream = FakeUpstream([])
    async with sdk(upstream) as client:
        with pytest.raises(openai.BadRequestError) as info:
            await client.chat.completions.create(
                model="fake-model",
                messages=ASK,
                functions=[FUNCTION],
                tools=[cast(Any, WEATHER)],
            )
    assert info.value.status_code == 400
    assert isinstance(info.value.body, dict)
    assert info.value.body.get("param") == "functions"
    assert upstream.history == []
