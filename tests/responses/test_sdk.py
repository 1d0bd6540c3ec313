"""The openai SDK's ``responses.create`` and ``responses.stream`` against the proxy on a real
socket, in every mode, over a scripted upstream: calls, results, previous_response_id,
tool_choice, errors; streamed and unstreamed answers agree."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.responses.conftest import LiveFactory
from toolshim.capabilities.registry import Registry
from toolshim.errors import UpstreamConnectionError, UpstreamStatusError, UpstreamTimeoutError
from toolshim.testing import CALL_JSON, FakeUpstream, Reply, call
from toolshim.testing import WEATHER_RESPONSES as WEATHER

QUESTION = "What is the weather in Paris?"
NATIVE_CALL = Reply(None, [call("get_weather", {"city": "Paris"}, id="call_native")])

# mode -> (how the upstream treats tools, its replies for one question that needs the tool)
MODES: dict[str, tuple[str, list[Any]]] = {
    "off": ("native", [NATIVE_CALL]),
    "force": ("ignore", [CALL_JSON]),
    "auto": ("reject", [CALL_JSON]),  # rejected natively, learned, emulated
    "fallback": ("ignore", ["Let me think about Paris.", CALL_JSON]),
}


def ask(client: openai.OpenAI, stream: bool, **extra: Any) -> Any:
    """One request, created or streamed; returns the final Response (and checks the stream)."""
    body: dict[str, Any] = {"model": "fake-model", "input": QUESTION, "tools": [WEATHER], **extra}
    if not stream:
        return client.responses.create(**body)
    with client.responses.stream(**body) as events:
        seen = [event.type for event in events]
        final = events.get_final_response()
    assert seen[:2] == ["response.created", "response.in_progress"]
    assert seen[-1] == "response.completed"
    return final


def calls_of(response: Any) -> list[tuple[str, dict[str, Any]]]:
    return [
        (item.name, json.loads(item.arguments))
        for item in response.output
        if item.type == "function_call"
    ]


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_tool_call_in_every_mode(live: LiveFactory, mode: str, stream: bool) -> None:
    behaviour, replies = MODES[mode]
    upstream = FakeUpstream(replies, tools=behaviour)  # type: ignore[arg-type]
    proxy = live(upstream, mode=mode)
    response = ask(proxy.client, stream)
    assert response.status == "completed"
    assert calls_of(response) == [("get_weather", {"city": "Paris"})]
    (item,) = response.output
    assert item.call_id == ("call_native" if mode == "off" else item.call_id)
    meta = response.model_extra["toolshim"]
    assert meta["mode"] == mode and meta["emulated"] is (mode != "off")
    if mode != "off":
        assert item.call_id.startswith("emulated_")
        assert "tool calls emulated" in meta["warnings"]


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
def test_strip_mode_answers_in_text_without_tools_upstream(live: LiveFactory, stream: bool) -> None:
    upstream = FakeUpstream(["It is sunny in Paris."])
    response = ask(live(upstream, mode="strip").client, stream)
    assert response.output_text == "It is sunny in Paris." and calls_of(response) == []
    assert "tools" not in upstream.history[0]


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
def test_a_function_call_output_round_trip(live: LiveFactory, stream: bool) -> None:
    upstream = FakeUpstream([CALL_JSON, "It is 18°C and sunny in Paris."], tools="ignore")
    client = live(upstream, mode="force").client
    first = ask(client, stream)
    (item,) = first.output
    history = [
        {"role": "user", "content": QUESTION},
        {
            "type": "function_call",
            "call_id": item.call_id,
            "name": item.name,
            "arguments": item.arguments,
        },
        {"type": "function_call_output", "call_id": item.call_id, "output": "18°C, sunny"},
    ]
    second = ask(client, stream, input=history)
    assert second.output_text == "It is 18°C and sunny in Paris."
    sent = json.dumps(upstream.history[1]["messages"], ensure_ascii=False)
    assert "18°C, sunny" in sent


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
def test_previous_response_id_continues_the_conversation(
    live: LiveFactory, stream: bool, tmp_path: Path
) -> None:
    upstream = FakeUpstream([CALL_JSON, "18°C in Paris."], tools="ignore")
    client = live(upstream, mode="force").client
    first = ask(client, stream, instructions="Answer briefly.")
    (item,) = first.output
    result = [{"type": "function_call_output", "call_id": item.call_id, "output": "18°C"}]
    # a restart in between: a new proxy over the same registry file finds the response
    restarted = FakeUpstream(["18°C in Paris."], tools="ignore")
    again = live(restarted, mode="force")
    second = ask(again.client, stream, input=result, previous_response_id=first.id)
    assert second.output_text == "18°C in Paris." and second.previous_response_id == first.id
    text = json.dumps(restarted.history[0]["messages"], ensure_ascii=False)
    assert QUESTION in text and "18°C" in text
    assert "Answer briefly." not in text  # instructions are not carried over (as at OpenAI)


def test_an_unknown_or_unstored_previous_response_is_a_400(live: LiveFactory) -> None:
    upstream = FakeUpstream(["Hello."])
    client = live(upstream).client
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="fake-model", input="hi", previous_response_id="resp_nope")
    assert "resp_nope" in caught.value.message
    assert caught.value.body["param"] == "previous_response_id"  # type: ignore[index]
    unstored = client.responses.create(model="fake-model", input="hi", store=False)
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model="fake-model", input="hi", previous_response_id=unstored.id)
    assert upstream.calls == 1


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
def test_tool_choice_variants(live: LiveFactory, stream: bool) -> None:
    time_tool = {**WEATHER, "name": "get_time", "description": "Local time in a city"}
    forced = '{"tool_calls": [{"name": "get_time", "arguments": {"city": "Paris"}}]}'
    upstream = FakeUpstream(
        ["I cannot tell.", CALL_JSON, forced, "No tools needed."], tools="ignore"
    )
    client = live(upstream, mode="force").client
    required = ask(client, stream, tool_choice="required")  # prose first: re-asked
    assert calls_of(required) == [("get_weather", {"city": "Paris"})]
    assert required.model_extra["toolshim"]["reasks"] == 1
    named = ask(
        client,
        stream,
        tools=[WEATHER, time_tool],
        tool_choice={"type": "function", "name": "get_time"},
    )
    assert calls_of(named) == [("get_time", {"city": "Paris"})]
    none = ask(client, stream, tool_choice="none")
    assert none.output_text == "No tools needed."
    assert "get_weather" not in json.dumps(upstream.history[-1])


@pytest.mark.parametrize("reply", [CALL_JSON, "Sunny, 18°C."], ids=["call", "text"])
def test_streamed_and_created_answers_agree(live: LiveFactory, reply: str) -> None:
    created = ask(live(FakeUpstream([reply], tools="ignore"), mode="force").client, False)
    streamed = ask(live(FakeUpstream([reply], tools="ignore"), mode="force").client, True)

    def shape(value: Any) -> Any:
        """Ids aside, and the ``parsed*`` fields the SDK's stream helper adds."""
        if isinstance(value, dict):
            return {
                k: shape(v)
                for k, v in value.items()
                if k not in ("id", "call_id") and not k.startswith("parsed")
            }
        if isinstance(value, list):
            return [shape(v) for v in value]
        return value

    assert shape(created.to_dict()["output"]) == shape(streamed.to_dict()["output"])
    assert created.model_extra["toolshim"] == streamed.model_extra["toolshim"]
    assert created.usage is not None and created.usage == streamed.usage
    assert created.status == streamed.status == "completed"


@pytest.mark.parametrize("mode", ["off", "force"])
def test_an_answer_cut_by_max_output_tokens_is_incomplete_streamed_or_not(
    live: LiveFactory, mode: str
) -> None:
    cut = Reply("It is sunny in Par", finish_reason="length")
    client = live(FakeUpstream([cut, cut]), mode=mode).client
    body: dict[str, Any] = {"model": "fake-model", "input": QUESTION, "max_output_tokens": 5}
    created = client.responses.create(**body)
    with client.responses.stream(**body) as events:
        seen = list(events)
    # as at OpenAI, the last event is response.incomplete (the SDK's get_final_response()
    # waits for a response.completed, and raises)
    assert seen[-1].type == "response.incomplete"
    streamed = seen[-1].response
    for response in (created, streamed):
        assert response.status == "incomplete" and response.output_text == "It is sunny in Par"
        assert response.incomplete_details is not None
        assert response.incomplete_details.reason == "max_output_tokens"
        assert response.max_output_tokens == 5


def test_dropped_tools_are_named_in_the_warnings(live: LiveFactory) -> None:
    upstream = FakeUpstream(["Hello."])
    response = live(upstream, mode="force").client.responses.create(
        model="fake-model",
        input="hi",
        tools=[WEATHER, {"type": "web_search"}],  # type: ignore[list-item]
    )
    warnings = response.model_extra["toolshim"]["warnings"]
    assert any(w.startswith("web_search tool dropped") for w in warnings)


def test_errors_come_in_the_openai_shape(live: LiveFactory) -> None:
    upstream = FakeUpstream([CALL_JSON.replace("get_weather", "nope")] * 3, tools="ignore")
    client = live(upstream, mode="force", max_reasks=1).client
    with pytest.raises(openai.APIStatusError) as caught:
        client.responses.create(
            model="fake-model", input=QUESTION, tools=[WEATHER], tool_choice="required"
        )
    assert caught.value.status_code == 502
    with pytest.raises(openai.BadRequestError) as bad:
        client.responses.create(model="fake-model", input=[{"type": "item_reference", "id": "x"}])
    assert bad.value.body["param"] == "input.0"  # type: ignore[index]


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
@pytest.mark.parametrize(
    ("failure", "status", "error_class"),
    [
        (
            UpstreamStatusError("model 'nope' not found", status=404),
            404,
            openai.NotFoundError,
        ),
        (
            UpstreamStatusError("slow down", status=429, retry_after="7"),
            429,
            openai.RateLimitError,
        ),
        (UpstreamConnectionError("connection refused"), 502, openai.InternalServerError),
        (
            UpstreamTimeoutError("no answer within 5 s", deadline="read", seconds=5),
            504,
            openai.InternalServerError,
        ),
    ],
    ids=["404", "429", "502", "504"],
)
def test_upstream_failures_keep_their_status_in_the_openai_shape(
    live: LiveFactory, stream: bool, failure: Exception, status: int, error_class: type
) -> None:
    client = live(FakeUpstream([failure]), mode="off").client

    def send() -> None:
        if not stream:
            client.responses.create(model="fake-model", input=QUESTION)
            return
        with client.responses.stream(model="fake-model", input=QUESTION) as events:
            list(events)

    with pytest.raises(error_class) as caught:
        send()
    error = caught.value
    assert isinstance(error, openai.APIStatusError) and error.status_code == status
    assert set(error.body) >= {"message", "type", "param", "code"}  # type: ignore[arg-type]
    assert str(failure) in error.message
    assert error.response.json()["toolshim"]["mode"] == "off"
    if status == 429:
        assert error.response.headers["retry-after"] == "7"


class BreaksMidStream(FakeUpstream):
    """Streams the first chunk of its reply, then loses the connection."""

    async def stream_body(self, body: Any, *, headers: Any = None) -> AsyncIterator[dict[str, Any]]:
        async for chunk in super().stream_body(body, headers=headers):
            yield chunk
            raise UpstreamConnectionError("connection reset by the upstream")


def test_a_stream_that_fails_after_it_began_ends_with_response_failed(
    live: LiveFactory,
) -> None:
    client = live(BreaksMidStream(["Sunny all week in Paris."]), mode="off").client
    with client.responses.stream(model="fake-model", input=QUESTION) as events:
        seen = list(events)
    assert seen[0].type == "response.created"
    failed = seen[-1]
    assert failed.type == "response.failed" and failed.response.error is not None
    assert failed.response.error.message == "connection reset by the upstream"
    assert failed.response.model_extra["toolshim"]["llm_calls"] == 1


def test_a_stream_that_fails_before_it_began_is_an_http_error(live: LiveFactory) -> None:
    upstream = FakeUpstream([CALL_JSON.replace("get_weather", "nope")] * 3, tools="ignore")
    client = live(upstream, mode="force", max_reasks=1).client
    with pytest.raises(openai.InternalServerError) as caught:  # noqa: SIM117
        with client.responses.stream(
            model="fake-model", input=QUESTION, tools=[WEATHER], tool_choice="required"
        ) as events:
            list(events)
    assert caught.value.status_code == 502 and "'nope'" in caught.value.message


def test_the_registry_memory_store_is_used_for_an_in_memory_registry(live: LiveFactory) -> None:
    upstream = FakeUpstream(["One.", "Two."])
    proxy = live(upstream, registry=Registry())
    first = proxy.client.responses.create(model="fake-model", input="hi")
    second = proxy.client.responses.create(
        model="fake-model", input="again", previous_response_id=first.id
    )
    assert second.output_text == "Two."
    assert [m["content"] for m in upstream.history[1]["messages"]] == ["hi", "One.", "again"]
