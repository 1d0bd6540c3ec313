"""The Responses codec without a server: requests into core types, answers and streams back out,
checked against the openai SDK's own types. The Codex fixtures are the first two requests of
a real ``codex exec`` run (codex-cli 0.171.0) recorded by a stand-in server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from openai import omit
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from toolshim.errors import InvalidRequestError, ToolCallError, UpstreamStatusError
from toolshim.testing import WEATHER_RESPONSES as WEATHER
from toolshim.testing import read_sse
from toolshim.types import (
    Choice,
    Completion,
    Message,
    Metadata,
    StreamChunk,
    ToolCall,
    ToolCallDelta,
    ToolChoice,
    Usage,
)
from toolshim.wire.base import Decoded
from toolshim.wire.openai_responses.events import (
    ResponsesStreamEncoder,
    encode_completion,
)
from toolshim.wire.openai_responses.input import ResponsesContext, ResponsesRequest, decode_request

FIXTURES = Path(__file__).parent / "fixtures"
EVENTS: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)


def codex(name: str) -> dict[str, Any]:
    return dict(json.loads((FIXTURES / name).read_text()))


def context_of(decoded: Decoded) -> ResponsesContext:
    assert isinstance(decoded.request, ResponsesRequest) and decoded.request.context is not None
    return decoded.request.context


def body(**extra: Any) -> dict[str, Any]:
    return {"model": "fake-model", "input": "What is the weather in Paris?", **extra}


# -- requests ---------------------------------------------------------------------------------


def test_a_string_input_is_one_user_message_after_the_instructions() -> None:
    decoded = decode_request(body(instructions="Be brief."))
    assert [(m.role, m.content) for m in decoded.request.messages] == [
        ("system", "Be brief."),
        ("user", "What is the weather in Paris?"),
    ]
    assert decoded.request.tools == () and decoded.warnings == ()
    assert context_of(decoded).id.startswith("resp_") and context_of(decoded).store is True


def test_codex_first_request_decodes_to_one_system_message_and_its_function_tools() -> None:
    decoded = decode_request(codex("codex_request_first.json"))
    request = decoded.request
    roles = [m.role for m in request.messages]
    assert roles == ["system", "user", "user"]  # two developer messages merged
    assert "Codex CLI" in request.messages[0].text
    names = [t.name for t in request.tools]
    assert "exec_command" in names and "web_search" not in names
    assert all(t.to_openai()["type"] == "function" for t in request.tools)
    exec_command = next(t for t in request.tools if t.name == "exec_command")
    assert exec_command.parameters["required"] == ["cmd"]
    assert request.stream and request.parallel_tool_calls is True
    assert request.choice == ToolChoice.AUTO
    # what the proxy answers itself never goes upstream
    assert set(request.params) == {"stream_options"}
    assert context_of(decoded).store is False
    assert any("web_search tool dropped" in w for w in decoded.warnings)
    assert any("namespace tool 'multi_agent_v1' dropped" in w for w in decoded.warnings)


def test_codex_second_request_carries_the_call_and_its_output() -> None:
    decoded = decode_request(codex("codex_request_after_call.json"))
    messages = decoded.request.messages
    assistant, result = messages[-2], messages[-1]
    assert assistant.role == "assistant" and assistant.content is None
    assert [(c.id, c.name) for c in assistant.tool_calls] == [("call_abc", "exec_command")]
    assert json.loads(assistant.tool_calls[0].arguments) == {"cmd": "echo hi > out.txt"}
    assert result.role == "tool" and result.tool_call_id == "call_abc"
    assert result.name == "exec_command" and "Process exited with code 0" in result.text


def test_calls_right_after_an_assistant_message_share_it_and_reasoning_is_dropped() -> None:
    items = [
        {"role": "user", "content": [{"type": "input_text", "text": "Weather in Paris and Oslo?"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "opaque"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Checking both.", "annotations": []}],
        },
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "get_weather",
            "arguments": '{"city":"Paris"}',
        },
        {
            "type": "function_call",
            "call_id": "c2",
            "name": "get_weather",
            "arguments": '{"city":"Oslo"}',
        },
        {"type": "function_call_output", "call_id": "c1", "output": "18C"},
        {
            "type": "function_call_output",
            "call_id": "c2",
            "output": [{"type": "input_text", "text": "-3C"}],
        },
    ]
    request = decode_request(body(input=items, tools=[WEATHER])).request
    assert [m.role for m in request.messages] == ["user", "assistant", "tool", "tool"]
    assistant = request.messages[1]
    assert assistant.content == "Checking both."
    assert [c.id for c in assistant.tool_calls] == ["c1", "c2"]
    assert [m.text for m in request.messages[2:]] == ["18C", "-3C"]


def test_images_stay_parts_and_unknown_items_are_dropped_with_a_warning() -> None:
    items = [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "What is this?"},
                {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "low"},
            ],
        },
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
    ]
    decoded = decode_request(body(input=items))
    (message,) = decoded.request.messages
    assert message.content == (
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "low"}},
    )
    assert decoded.warnings == (
        "input items of type 'web_search_call' dropped: they belong to a tool that toolshim "
        "does not serve",
    )


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"input": None}, "input"),
        ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input.0"),
        ({"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]}, "input.0.call_id"),
        ({"input": [{"role": "tool", "content": "x"}]}, "input.0.role"),
        ({"tools": [WEATHER], "tool_choice": {"type": "function", "name": "nope"}}, "tool_choice"),
        ({"tools": [WEATHER], "tool_choice": {"type": "web_search"}}, "tool_choice"),
        ({"tools": [WEATHER, WEATHER]}, "tools.1.name"),
        ({"background": True}, "background"),
        ({"max_output_tokens": 0}, "max_output_tokens"),
        ({"text": {"format": {"type": "json_schema", "name": "x"}}}, "text.format.schema"),
        ({"include": "reasoning.encrypted_content"}, "include"),
        ({"include": [1]}, "include.0"),
        ({"metadata": {"run": 1}}, "metadata.run"),
        ({"metadata": ["run"]}, "metadata"),
        ({"temperature": "hot"}, "temperature"),
        ({"top_p": True}, "top_p"),
    ],
)
def test_a_malformed_request_is_a_400_naming_the_field(extra: dict[str, Any], param: str) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        decode_request(body(**extra))
    assert caught.value.status == 400 and caught.value.param == param


def test_tool_choice_variants() -> None:
    other = {**WEATHER, "name": "get_time"}
    cases = {
        "auto": ToolChoice.AUTO,
        "none": ToolChoice.NONE,
        "required": ToolChoice.REQUIRED,
    }
    for wire, choice in cases.items():
        assert decode_request(body(tools=[WEATHER], tool_choice=wire)).request.choice == choice
    forced = decode_request(
        body(tools=[WEATHER, other], tool_choice={"type": "function", "name": "get_time"})
    ).request
    assert forced.choice == ToolChoice.function("get_time")
    allowed = decode_request(
        body(
            tools=[WEATHER, other],
            tool_choice={
                "type": "allowed_tools",
                "mode": "required",
                "tools": [{"type": "function", "name": "get_time"}],
            },
        )
    ).request
    assert allowed.choice == ToolChoice.REQUIRED and [t.name for t in allowed.tools] == ["get_time"]


def test_options_map_to_chat_completions_names() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    request = decode_request(
        body(
            temperature=0.2,
            top_p=0.9,
            max_output_tokens=64,
            reasoning={"effort": "low", "summary": "auto"},
            text={
                "format": {"type": "json_schema", "name": "count", "schema": schema, "strict": True}
            },
            store=False,
            include=["reasoning.encrypted_content"],
            metadata={"k": "v"},
            prompt_cache_key="x",
        )
    ).request
    assert dict(request.params) == {
        "temperature": 0.2,
        "top_p": 0.9,
        "max_tokens": 64,
        "reasoning_effort": "low",
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "count", "schema": schema, "strict": True},
        },
    }


def test_a_freeform_tool_is_a_function_of_one_string_and_its_call_comes_back_custom() -> None:
    patch = {
        "type": "custom",
        "name": "apply_patch",
        "description": "Apply a patch",
        "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"},
    }
    decoded = decode_request(body(tools=[patch]))
    (spec,) = decoded.request.tools
    assert spec.parameters["required"] == ["input"] and "start: /.+/" in str(spec.parameters)
    call = ToolCall.from_arguments("call_1", "apply_patch", {"input": "*** Begin Patch"})
    data = encode_completion(completion(Message("assistant", None, (call,))), context_of(decoded))
    (item,) = data["output"]
    assert item["type"] == "custom_tool_call" and item["input"] == "*** Begin Patch"
    assert item["call_id"] == "call_1"
    Response.model_validate(data)


# -- answers ----------------------------------------------------------------------------------

META = Metadata(
    mode="force", emulated=True, dialect="json", llm_calls=1, warnings=("tool calls emulated",)
)


def completion(message: Message, finish: str = "stop") -> Completion:
    return Completion(
        id="chatcmpl-1",
        model="fake-model",
        created=0,
        choices=(Choice(0, message, finish),),
        usage=Usage(10, 5, 15),
        meta=META,
    )


def test_a_completion_is_a_response_object_the_sdk_reads() -> None:
    context = context_of(decode_request(body(tools=[WEATHER], metadata={"k": "v"})))
    call = ToolCall("emulated_1_0", "get_weather", '{"city": "Paris"}')
    data = encode_completion(completion(Message("assistant", None, (call,)), "tool_calls"), context)
    response = Response.model_validate(data)
    assert response.id == context.id and response.status == "completed"
    (item,) = response.output
    assert item.type == "function_call" and item.call_id == "emulated_1_0"
    assert item.name == "get_weather" and json.loads(item.arguments) == {"city": "Paris"}
    assert response.usage is not None and response.usage.total_tokens == 15
    assert data["toolshim"]["emulated"] is True and data["metadata"] == {"k": "v"}

    text = encode_completion(completion(Message("assistant", "Sunny."), "length"), context)
    response = Response.model_validate(text)
    assert response.output_text == "Sunny." and response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens"


def parse_sse(data: list[bytes]) -> list[dict[str, Any]]:
    events = []
    for item in read_sse(data):
        event = item.json()
        assert item.event == event["type"]
        events.append(event)
    return events


def run_stream(chunks: list[StreamChunk], context: Any) -> list[dict[str, Any]]:
    encoder = ResponsesStreamEncoder(context)
    out: list[bytes] = []
    for chunk in chunks:
        out += encoder.feed(chunk)
    out += encoder.finish()
    return parse_sse(out)


def sdk_final(events: list[dict[str, Any]], tools: list[Any]) -> Response:
    state: ResponseStreamState[Any] = ResponseStreamState(input_tools=tools, text_format=omit)
    for event in events:
        state.handle_event(EVENTS.validate_python(event))
    assert state._completed_response is not None
    return state._completed_response


def test_a_streamed_text_answer_sends_the_events_in_order() -> None:
    context = context_of(decode_request(body(stream=True)))
    chunks = [
        StreamChunk(role="assistant"),
        StreamChunk(content="Sun"),
        StreamChunk(content="ny."),
        StreamChunk(finish_reason="stop"),
        StreamChunk(usage=Usage(3, 2, 5), meta=META),
    ]
    events = run_stream(chunks, context)
    assert [e["type"] for e in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    final = sdk_final(events, [])
    assert final.output_text == "Sunny." and final.usage is not None
    assert events[-1]["response"]["toolshim"]["mode"] == "force"


def test_streamed_and_unstreamed_answers_agree() -> None:
    context = context_of(decode_request(body(tools=[WEATHER], stream=True)))
    calls = (
        ToolCall("call_1", "get_weather", '{"city": "Paris"}'),
        ToolCall("call_2", "get_weather", '{"city": "Oslo"}'),
    )
    whole = encode_completion(
        completion(Message("assistant", "Checking.", calls), "tool_calls"), context
    )
    chunks = [StreamChunk(role="assistant"), StreamChunk(content="Checking.")]
    for i, call in enumerate(calls):
        chunks.append(StreamChunk(tool_calls=(ToolCallDelta(i, call.id, call.name, ""),)))
        chunks.append(StreamChunk(tool_calls=(ToolCallDelta(i, arguments=call.arguments[:5]),)))
        chunks.append(StreamChunk(tool_calls=(ToolCallDelta(i, arguments=call.arguments[5:]),)))
    chunks.append(StreamChunk(finish_reason="tool_calls", usage=Usage(10, 5, 15), meta=META))
    events = run_stream(chunks, context)
    types = [e["type"] for e in events]
    assert types.count("response.function_call_arguments.delta") == 4
    assert types.index("response.output_item.done") < types.index(
        "response.function_call_arguments.delta"
    )
    final = sdk_final(events, [WEATHER])

    def shape(items: list[Any]) -> list[Any]:
        return [{k: v for k, v in i.items() if k != "id"} for i in items]

    streamed = events[-1]["response"]
    assert shape(streamed["output"]) == shape(whole["output"])
    assert {k: v for k, v in streamed.items() if k not in ("output", "id")} == {
        k: v for k, v in whole.items() if k not in ("output", "id")
    }
    assert [i.type for i in final.output] == ["message", "function_call", "function_call"]


def test_a_stream_that_breaks_ends_with_response_failed() -> None:
    context = context_of(decode_request(body(stream=True)))
    encoder = ResponsesStreamEncoder(context)
    out = encoder.feed(StreamChunk(content="Hal"))
    error = ToolCallError("the model never made a valid call")
    error.meta = META
    events = parse_sse(out + encoder.fail(error, None))
    last = events[-1]
    assert last["type"] == "response.failed"
    assert last["response"]["status"] == "failed"
    assert last["response"]["error"] == {
        "code": "server_error",
        "message": "the model never made a valid call",
        "type": "tool_call_error",
        "param": None,
    }
    assert last["response"]["toolshim"]["mode"] == "force"
    for event in events:
        EVENTS.validate_python(event)
    limited = ResponsesStreamEncoder(context)
    failed = parse_sse(limited.fail(UpstreamStatusError("slow down", status=429), None))
    assert [e["type"] for e in failed] == [
        "response.created",
        "response.in_progress",
        "response.failed",
    ]
    assert failed[-1]["response"]["error"]["code"] == "rate_limit_exceeded"


def test_an_empty_stream_is_one_empty_message() -> None:
    context = context_of(decode_request(body(stream=True)))
    events = run_stream([StreamChunk(finish_reason="stop")], context)
    assert events[-1]["response"]["output"][0]["content"][0]["text"] == ""
    assert sdk_final(events, []).output_text == ""


def test_the_upstreams_reasoning_is_a_reasoning_item_streamed_or_not() -> None:
    context = context_of(decode_request(body(stream=True)))
    message = Message("assistant", "Sunny.", extra={"reasoning_content": "Paris is in France."})
    whole = encode_completion(completion(message), context)
    chunks = [
        StreamChunk(role="assistant", extra={"reasoning_content": "Paris is "}),
        StreamChunk(extra={"reasoning_content": "in France."}),
        StreamChunk(content="Sunny."),
        StreamChunk(finish_reason="stop", usage=Usage(10, 5, 15), meta=META),
    ]
    events = run_stream(chunks, context)
    types = [e["type"] for e in events]
    assert types[2:8] == [
        "response.output_item.added",
        "response.content_part.added",
        "response.reasoning_text.delta",
        "response.reasoning_text.delta",
        "response.reasoning_text.done",
        "response.content_part.done",
    ]
    streamed = events[-1]["response"]["output"]
    assert [i["type"] for i in streamed] == [i["type"] for i in whole["output"]]
    assert streamed[0]["content"] == whole["output"][0]["content"]
    assert sdk_final(events, []).output_text == "Sunny."
