"""The openai SDK's ``responses.create`` and ``responses.stream`` against a real ``toolshim serve``
process in every mode, in front of the scripted upstream as its own process: a tool call, the
``function_call_output`` round trip on ``previous_response_id``, ``tool_choice`` and the options
that go upstream; streamed and created answers agree."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.e2e.conftest import FakeUpstreamProcess, Process, ProxyFactory
from toolshim.testing import WEATHER_RESPONSES as WEATHER

pytestmark = pytest.mark.e2e

TIME = {**WEATHER, "name": "get_time", "description": "Local time in a city"}
QUESTION = "What is the weather in Paris?"
ANSWER = "It is 18°C and sunny in Paris."
CALL = {"name": "get_weather", "arguments": {"city": "Paris"}}
CALL_TEXT = json.dumps({"tool_calls": [CALL]})

# mode -> (how the upstream treats tools, its replies to one question that needs the tool)
MODES: dict[str, tuple[str, list[Any]]] = {
    "off": ("native", [{"tool_calls": [CALL]}]),
    "force": ("ignore", [CALL_TEXT]),
    "auto": ("reject", [CALL_TEXT]),  # rejected natively, learned, emulated
    "fallback": ("ignore", ["Let me think about Paris.", CALL_TEXT]),
    "strip": ("ignore", ["I have no tools; Paris is usually mild."]),
}


@pytest.fixture
def client_for(serve: ProxyFactory) -> Iterator[Any]:
    """``client_for(mode)``: a new ``toolshim serve --mode MODE`` and an SDK client for it."""
    clients: list[openai.OpenAI] = []

    def factory(mode: str) -> tuple[openai.OpenAI, Process]:
        proxy = serve("--mode", mode)
        client = openai.OpenAI(base_url=proxy.url, api_key="sk-test", max_retries=0)
        clients.append(client)
        return client, proxy

    yield factory
    for client in clients:
        client.close()


def ask(client: openai.OpenAI, stream: bool, **body: Any) -> Any:
    """One request, created or streamed; returns the final Response (checking the events)."""
    body = {"model": "fake-model", "input": QUESTION, "tools": [WEATHER], **body}
    if not stream:
        return client.responses.create(**body)
    with client.responses.stream(**body) as events:
        seen = [(event.type, event.sequence_number) for event in events]
        final = events.get_final_response()
    types = [kind for kind, _ in seen]
    assert types[:2] == ["response.created", "response.in_progress"], types
    assert types[-1] == "response.completed", types
    assert [number for _, number in seen] == list(range(len(seen)))
    return final


def calls_of(response: Any) -> list[tuple[str, dict[str, Any]]]:
    return [
        (item.name, json.loads(item.arguments))
        for item in response.output
        if item.type == "function_call"
    ]


def shape(value: Any) -> Any:
    """A response's output without its ids and the ``parsed*`` fields the stream helper adds."""
    if isinstance(value, dict):
        return {
            k: shape(v)
            for k, v in value.items()
            if k not in ("id", "call_id") and not k.startswith("parsed")
        }
    if isinstance(value, list):
        return [shape(v) for v in value]
    return value


@pytest.mark.parametrize("mode", sorted(MODES))
def test_every_mode_serves_the_responses_api_created_and_streamed(
    client_for: Any, fake_upstream: FakeUpstreamProcess, mode: str
) -> None:
    behaviour, replies = MODES[mode]
    client, proxy = client_for(mode)
    answers = {}
    for stream in (False, True):
        fake_upstream.script(tools=behaviour, replies=replies)
        answers[stream] = ask(client, stream)
        response = answers[stream]
        assert response.status == "completed" and response.id.startswith("resp_")
        meta = response.model_extra["toolshim"]
        assert meta["mode"] == mode and meta["emulated"] is (mode not in ("off", "strip"))
        sent = fake_upstream.history()["requests"]
        if mode == "strip":
            assert calls_of(response) == [] and response.output_text == replies[0]
            assert all("tools" not in body for body in sent)
        else:
            assert calls_of(response) == [("get_weather", {"city": "Paris"})]
            # auto: the first request learns that the model rejects tools, the second knows
            expected = {"off": 1, "force": 1, "auto": 1 if stream else 2, "fallback": 2}
            assert len(sent) == expected[mode]
            (call,) = [item for item in response.output if item.type == "function_call"]
            assert call.call_id.startswith("call_" if mode == "off" else "emulated_")
    created, streamed = answers[False], answers[True]
    assert shape(created.to_dict()["output"]) == shape(streamed.to_dict()["output"])
    if mode != "auto":
        assert created.model_extra["toolshim"] == streamed.model_extra["toolshim"]

    # the header, as on chat completions
    raw = httpx.post(
        f"{proxy.url}/responses", json={"model": "fake-model", "input": "hi"}, timeout=30
    )
    assert raw.headers["x-toolshim-emulated"] == "false"

    if mode == "strip":
        return
    # the call's output on previous_response_id, created and streamed: the upstream sees the
    # question, the call and its result, and the answer comes back as text
    for stream, first in answers.items():
        (call,) = [item for item in first.output if item.type == "function_call"]
        # fallback asks natively first, then again emulated when the reply has no call
        fake_upstream.script(tools=behaviour, replies=[ANSWER] * (2 if mode == "fallback" else 1))
        result = [{"type": "function_call_output", "call_id": call.call_id, "output": "18°C"}]
        second = ask(client, stream, input=result, previous_response_id=first.id)
        assert second.output_text == ANSWER and second.previous_response_id == first.id
        sent = fake_upstream.history()["requests"][-1]
        text = json.dumps(sent["messages"], ensure_ascii=False)
        assert QUESTION in text and "18°C" in text and "get_weather" in text
        if mode == "off":  # native history keeps the call ids
            assert sent["messages"][-1] == {
                "role": "tool",
                "content": "18°C",
                "tool_call_id": call.call_id,
                "name": "get_weather",
            }


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
def test_tool_choice_and_options_through_serve(
    client_for: Any, fake_upstream: FakeUpstreamProcess, stream: bool
) -> None:
    client, _ = client_for("force")
    forced = json.dumps({"tool_calls": [{"name": "get_time", "arguments": {"city": "Paris"}}]})
    fake_upstream.script(tools="ignore", replies=["I cannot tell.", CALL_TEXT])
    required = ask(client, stream, tool_choice="required", max_output_tokens=64, temperature=0)
    assert calls_of(required) == [("get_weather", {"city": "Paris"})]
    assert required.model_extra["toolshim"]["reasks"] == 1
    first = fake_upstream.history()["requests"][0]
    assert first["max_tokens"] == 64 and first["temperature"] == 0

    fake_upstream.script(tools="ignore", replies=[forced])
    named = ask(
        client, stream, tools=[WEATHER, TIME], tool_choice={"type": "function", "name": "get_time"}
    )
    assert calls_of(named) == [("get_time", {"city": "Paris"})]

    fake_upstream.script(tools="ignore", replies=["No tools needed."])
    none = ask(client, stream, tool_choice="none")
    assert none.output_text == "No tools needed." and calls_of(none) == []
    assert "get_weather" not in json.dumps(fake_upstream.history()["requests"])

    two = json.dumps({"tool_calls": [CALL, {"name": "get_time", "arguments": {"city": "Oslo"}}]})
    fake_upstream.script(tools="ignore", replies=[two])
    one = ask(client, stream, tools=[WEATHER, TIME], parallel_tool_calls=False)
    assert calls_of(one) == [("get_weather", {"city": "Paris"})]

    schema = {
        "type": "object",
        "properties": {"celsius": {"type": "integer"}},
        "required": ["celsius"],
        "additionalProperties": False,
    }
    fake_upstream.script(tools="native", replies=['{"celsius": 18}'])
    structured = ask(
        client,
        stream,
        tools=[],
        text={"format": {"type": "json_schema", "name": "t", "schema": schema, "strict": True}},
    )
    assert json.loads(structured.output_text) == {"celsius": 18}
    (sent,) = fake_upstream.history()["requests"]
    assert sent["response_format"]["json_schema"]["schema"] == schema


def test_a_stored_response_survives_a_restart_of_serve(
    serve: ProxyFactory, fake_upstream: FakeUpstreamProcess, tmp_path: Any
) -> None:
    registry = str(tmp_path / "capabilities.sqlite3")
    fake_upstream.script(tools="ignore", replies=[CALL_TEXT, "Hello.", ANSWER])
    before = serve("--mode", "force", "--registry", registry)
    with openai.OpenAI(base_url=before.url, api_key="sk-test", max_retries=0) as client:
        first = ask(client, False)
        unstored = client.responses.create(model="fake-model", input="hi", store=False)
    assert before.stop() == 0
    after = serve("--mode", "force", "--registry", registry)
    with openai.OpenAI(base_url=after.url, api_key="sk-test", max_retries=0) as client:
        (call,) = first.output
        result = [{"type": "function_call_output", "call_id": call.call_id, "output": "18°C"}]
        second = ask(client, True, input=result, previous_response_id=first.id)
        assert second.output_text == ANSWER
        for unknown in (unstored.id, "resp_unknown"):
            with pytest.raises(openai.BadRequestError) as caught:
                client.responses.create(
                    model="fake-model", input="again", previous_response_id=unknown
                )
            assert unknown in caught.value.message
            assert caught.value.code == "previous_response_not_found"
