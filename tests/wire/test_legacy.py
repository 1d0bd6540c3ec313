"""Legacy ``functions``/``function_call``: requests upgraded to tools, answers downgraded back."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from toolshim.errors import InvalidRequestError
from toolshim.testing import WEATHER_FUNCTION as WEATHER
from toolshim.types import (
    Choice,
    Completion,
    Message,
    StreamChunk,
    ToolCall,
    ToolCallDelta,
    ToolChoice,
)
from toolshim.wire.openai_chat import (
    chunk_from_dict,
    chunk_to_dict,
    completion_to_dict,
    parse_request,
    request_to_body,
)
from toolshim.wire.openai_chat.legacy import downgrade_chunk, has_legacy_fields

TIME = {"name": "get_time", "parameters": {"type": "object", "properties": {}}}


def written(chunk: StreamChunk) -> dict[str, Any]:
    return chunk_to_dict(chunk, id="chatcmpl-1", model="m", created=1)


def legacy(**extra: Any) -> dict[str, Any]:
    return {
        "model": "m",
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "functions": [WEATHER, TIME],
        **extra,
    }


# -- requests ---------------------------------------------------------------------------------


def test_functions_become_tools_and_the_request_is_marked_legacy() -> None:
    request = parse_request(legacy(temperature=0.2, user="u1", stream=True))
    assert request.legacy_functions is True
    assert [t.name for t in request.tools] == ["get_weather", "get_time"]
    assert request.tools[0].description == "Current weather for a city"
    assert request.tools[0].parameters == WEATHER["parameters"]
    assert request.tools[0].to_openai() == {"type": "function", "function": WEATHER}
    assert request.tool_choice is None and request.choice is ToolChoice.AUTO
    # The legacy answer holds one call: one is asked for (without sending parallel_tool_calls
    # upstream, which some models reject).
    assert request.parallel_tool_calls is None
    assert not request.allows_parallel
    # Nothing else is dropped, and the legacy fields do not ride along in params.
    assert dict(request.params) == {"temperature": 0.2, "user": "u1"}
    assert request.stream is True


@pytest.mark.parametrize(
    ("function_call", "expected"),
    [
        ("auto", ToolChoice.AUTO),
        ("none", ToolChoice.NONE),
        ({"name": "get_time"}, ToolChoice.function("get_time")),
    ],
)
def test_function_call_becomes_tool_choice(function_call: Any, expected: ToolChoice) -> None:
    request = parse_request(legacy(function_call=function_call))
    assert request.tool_choice == expected
    body = request_to_body(request)
    assert "functions" not in body and "function_call" not in body
    assert body["tools"] == [
        {"type": "function", "function": WEATHER},
        {"type": "function", "function": TIME},
    ]
    if isinstance(function_call, dict):
        assert body["tool_choice"] == {"type": "function", "function": {"name": "get_time"}}
    else:
        assert body["tool_choice"] == function_call


def test_an_explicit_parallel_tool_calls_is_kept() -> None:
    assert parse_request(legacy(parallel_tool_calls=True)).parallel_tool_calls is True


def test_a_tools_request_is_not_legacy() -> None:
    request = parse_request(
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": []}
    )
    assert request.legacy_functions is False
    assert request.parallel_tool_calls is None


def test_the_callers_dict_is_not_mutated() -> None:
    body = legacy(
        function_call={"name": "get_weather"},
        messages=[
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": None, "function_call": {"name": "get_time"}},
            {"role": "function", "name": "get_time", "content": "noon"},
        ],
    )
    before = copy.deepcopy(body)
    parse_request(body)
    assert body == before


@pytest.mark.parametrize(
    ("extra", "param", "words"),
    [
        ({"tools": [{"type": "function", "function": TIME}]}, "functions", "tools"),
        ({"function_call": {"name": "nope"}}, "function_call", "'get_weather', 'get_time'"),
        ({"function_call": "required"}, "function_call", "'required'"),
        ({"function_call": {"nam": "get_time"}}, "function_call", '"none", "auto"'),
        ({"function_call": "auto", "tool_choice": "auto"}, "function_call", "tool_choice"),
        ({"functions": {"name": "x"}}, "functions", "dict"),
        ({"functions": [WEATHER, "get_time"]}, "functions.1", "str"),
        ({"functions": [{"description": "no name"}]}, "functions.0.name", "None"),
        ({"functions": [WEATHER, WEATHER]}, "functions.1.name", "duplicate"),
        ({"functions": [{**TIME, "parameters": "{}"}]}, "functions.0.parameters", "object"),
        ({"functions": [{**TIME, "description": 3}]}, "functions.0.description", "string"),
    ],
)
def test_malformed_legacy_fields_name_the_field(
    extra: dict[str, Any], param: str, words: str
) -> None:
    with pytest.raises(InvalidRequestError) as info:
        parse_request(legacy(**extra))
    assert info.value.param == param
    assert words in str(info.value)


def test_function_call_without_functions_is_refused() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "function_call": "auto"}
    with pytest.raises(InvalidRequestError) as info:
        parse_request(body)
    assert info.value.param == "function_call"


def test_a_malformed_assistant_function_call_names_its_message() -> None:
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "function_call": "x"}]
    with pytest.raises(InvalidRequestError) as info:
        parse_request(legacy(messages=messages))
    assert info.value.param == "messages.1.function_call"


def test_legacy_history_becomes_tool_calls_and_tool_results() -> None:
    messages = [
        {"role": "user", "content": "Weather in Paris and Rome, and the time?"},
        {
            "role": "assistant",
            "content": None,
            "function_call": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
        },
        {"role": "function", "name": "get_weather", "content": "sunny"},
        {
            "role": "assistant",
            "content": "Now Rome.",
            "function_call": {"name": "get_weather", "arguments": '{"city": "Rome"}'},
        },
        {
            "role": "assistant",
            "content": None,
            "function_call": {"name": "get_time", "arguments": "{}"},
        },
        {"role": "function", "name": "get_weather", "content": "rainy"},
        {"role": "function", "name": "get_time", "content": "noon"},
        {"role": "function", "name": "get_weather", "content": "late result", "x": 1},
    ]
    request = parse_request(legacy(messages=messages))
    m = request.messages
    assert [x.role for x in m] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "assistant",
        "tool",
        "tool",
        "tool",
    ]
    assert [(c.id, c.name, c.arguments) for c in m[1].tool_calls] == [
        ("legacy_0", "get_weather", '{"city": "Paris"}')
    ]
    assert [c.id for c in m[3].tool_calls] == ["legacy_1"]
    assert m[3].content == "Now Rome."
    assert [c.id for c in m[4].tool_calls] == ["legacy_2"]
    # Each result answers the latest call of its name before it; names and fields are kept.
    assert [(x.tool_call_id, x.name, x.content) for x in m if x.role == "tool"] == [
        ("legacy_0", "get_weather", "sunny"),
        ("legacy_1", "get_weather", "rainy"),
        ("legacy_2", "get_time", "noon"),
        ("legacy_1", "get_weather", "late result"),
    ]
    assert dict(m[7].extra) == {"x": 1}
    assert all("function_call" not in x.extra for x in m)
    body = request_to_body(request)
    assert "function_call" not in json.dumps(body)
    assert all(x["role"] != "function" for x in body["messages"])


def test_a_result_without_its_call_gets_a_fresh_id() -> None:
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "function_call": {"name": "get_time"}},
        {"role": "function", "name": "get_weather", "content": "sunny"},
        {"role": "function", "content": "no name"},
    ]
    m = parse_request(legacy(messages=messages)).messages
    assert m[1].tool_calls[0].arguments == "{}"
    assert (m[2].role, m[2].tool_call_id) == ("tool", "legacy_1")
    # Without a name, a result answers the latest call of any name.
    assert (m[3].role, m[3].tool_call_id) == ("tool", "legacy_0")


def test_legacy_history_is_upgraded_in_a_tools_request_too() -> None:
    """A conversation begun with functions may continue with tools (or with no tools)."""
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "function_call": {"name": "get_time"}},
        {"role": "function", "name": "get_time", "content": "noon"},
    ]
    request = parse_request({"model": "m", "messages": messages})
    assert request.legacy_functions is False
    assert [x.role for x in request.messages] == ["user", "assistant", "tool"]
    assert request.has_tool_history


def test_echoed_null_legacy_fields_are_dropped() -> None:
    """``message.model_dump()`` of an SDK answer carries ``function_call: None``."""
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello", "function_call": None, "tool_calls": None},
        {"role": "user", "content": "bye"},
    ]
    request = parse_request({"model": "m", "messages": messages, "function_call": None})
    assert request.messages[1] == Message("assistant", "hello")
    assert "function_call" not in request_to_body(request)
    assert not has_legacy_fields({"model": "m", "messages": [{"role": "user"}]})


# -- completions ------------------------------------------------------------------------------


def completion(*calls: ToolCall, legacy: bool = True, content: str | None = None) -> Completion:
    message = Message("assistant", content, tool_calls=calls)
    finish = "tool_calls" if calls else "stop"
    return Completion("c1", "m", 1, (Choice(0, message, finish),), legacy=legacy)


PARIS = ToolCall("call_1", "get_weather", '{"city": "Paris"}')
NOON = ToolCall("call_2", "get_time", "{}")


def test_a_legacy_completion_answers_with_function_call() -> None:
    data = completion_to_dict(completion(PARIS))
    choice = data["choices"][0]
    assert choice["finish_reason"] == "function_call"
    assert choice["message"] == {
        "role": "assistant",
        "content": None,
        "function_call": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
    }
    parsed = ChatCompletion.model_validate(data)
    assert parsed.choices[0].message.function_call is not None
    assert parsed.choices[0].message.function_call.name == "get_weather"
    assert parsed.choices[0].message.tool_calls is None


def test_only_the_first_of_several_calls_is_kept() -> None:
    message = completion_to_dict(completion(PARIS, NOON, content="Checking."))["choices"][0]
    assert message["message"]["function_call"]["name"] == "get_weather"
    assert message["message"]["content"] == "Checking."
    assert "tool_calls" not in message["message"]


def test_a_text_answer_is_unchanged_and_non_legacy_keeps_tool_calls() -> None:
    text = completion(content="Sunny.")
    assert completion_to_dict(text) == completion_to_dict(replace(text, legacy=False))
    assert completion_to_dict(text)["choices"][0]["finish_reason"] == "stop"
    plain = completion_to_dict(completion(PARIS, legacy=False))["choices"][0]
    assert plain["finish_reason"] == "tool_calls"
    assert plain["message"]["tool_calls"][0]["id"] == "call_1"


# -- stream chunks ----------------------------------------------------------------------------


def fold(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """Legacy stream chunks folded as an old client does (checked against the SDK's types)."""
    name, arguments, content, finish = "", "", "", None
    for data in chunks:
        chunk = ChatCompletionChunk.model_validate(data)
        for choice in chunk.choices:
            assert choice.delta.tool_calls is None
            if choice.delta.function_call is not None:
                name += choice.delta.function_call.name or ""
                arguments += choice.delta.function_call.arguments or ""
            content += choice.delta.content or ""
            finish = choice.finish_reason or finish
    return {"name": name, "arguments": arguments, "content": content, "finish": finish}


def test_built_chunks_stream_function_call_name_first_then_arguments() -> None:
    chunks = [
        StreamChunk(role="assistant", content=""),
        StreamChunk(tool_calls=(ToolCallDelta(0, id="e_0", name="get_weather", arguments=""),)),
        StreamChunk(tool_calls=(ToolCallDelta(0, arguments='{"city": '),)),
        StreamChunk(tool_calls=(ToolCallDelta(0, arguments='"Paris"}'),)),
        StreamChunk(tool_calls=(ToolCallDelta(1, id="e_1", name="get_time", arguments=""),)),
        StreamChunk(tool_calls=(ToolCallDelta(1, arguments="{}"),)),
        StreamChunk(finish_reason="tool_calls"),
    ]
    out = [written(replace(c, legacy=True)) for c in chunks]
    assert out[1]["choices"][0]["delta"] == {
        "function_call": {"name": "get_weather", "arguments": ""}
    }
    assert out[2]["choices"][0]["delta"] == {"function_call": {"arguments": '{"city": '}}
    assert out[4]["choices"][0]["delta"] == {}  # the second call is dropped
    assert fold(out) == {
        "name": "get_weather",
        "arguments": '{"city": "Paris"}',
        "content": "",
        "finish": "function_call",
    }


def test_raw_native_chunks_are_downgraded_without_touching_the_upstreams_dict() -> None:
    raw = {
        "id": "up-1",
        "object": "chat.completion.chunk",
        "created": 5,
        "model": "m",
        "system_fingerprint": "fp",
        "choices": [
            {
                "index": 0,
                "delta": {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                        },
                        {
                            "index": 1,
                            "id": "call_2",
                            "type": "function",
                            "function": {"name": "get_time", "arguments": "{}"},
                        },
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
    }
    before = copy.deepcopy(raw)
    chunk = chunk_from_dict(raw)
    out = written(replace(chunk, legacy=True))
    assert raw == before
    assert out["id"] == "up-1" and out["system_fingerprint"] == "fp"
    assert out["choices"][0] == {
        "index": 0,
        "delta": {
            "role": "assistant",
            "function_call": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
        },
        "finish_reason": "function_call",
    }
    assert written(chunk) == raw  # not legacy: as the upstream sent it


def test_chunks_without_calls_are_unchanged() -> None:
    for chunk in (StreamChunk(content="Hi"), StreamChunk(finish_reason="stop")):
        assert written(replace(chunk, legacy=True)) == written(chunk)
    assert downgrade_chunk({"choices": []}) == {"choices": []}


arguments_text = st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=8)).map(
    json.dumps
)


@given(
    calls=st.lists(
        st.tuples(st.sampled_from(["get_weather", "get_time"]), arguments_text),
        min_size=1,
        max_size=3,
    ),
    piece=st.integers(min_value=1, max_value=20),
)
def test_a_streamed_legacy_call_is_the_first_tools_call_at_any_fragment_size(
    calls: list[tuple[str, str]], piece: int
) -> None:
    chunks = [StreamChunk(role="assistant", content="")]
    for i, (name, arguments) in enumerate(calls):
        chunks.append(StreamChunk(tool_calls=(ToolCallDelta(i, f"c{i}", name, ""),)))
        for start in range(0, len(arguments), piece):
            fragment = arguments[start : start + piece]
            chunks.append(StreamChunk(tool_calls=(ToolCallDelta(i, arguments=fragment),)))
    chunks.append(StreamChunk(finish_reason="tool_calls"))
    folded = fold([written(replace(c, legacy=True)) for c in chunks])
    name, arguments = calls[0]
    assert folded == {
        "name": name,
        "arguments": arguments,
        "content": "",
        "finish": "function_call",
    }
