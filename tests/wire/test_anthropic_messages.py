"""The Anthropic Messages codec without I/O: requests into core types, and core chunks into
Anthropic's events in their exact order."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolshim.errors import ConfigError, InvalidRequestError, ToolCallError
from toolshim.testing import read_sse
from toolshim.types import Metadata, StreamChunk, ToolCallDelta, ToolChoice, Usage
from toolshim.wire.anthropic.codec import CODEC, error_type, stop_reason
from toolshim.wire.openai_chat import chunk_from_dict, completion_from_dict, request_to_body

TOOL = {"name": "f", "input_schema": {"type": "object", "properties": {"x": {"type": "integer"}}}}


def request(**extra: Any) -> dict[str, Any]:
    return {
        "model": "m",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": "hi"}],
        **extra,
    }


def events(raw: list[bytes]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for item in raw:
        [event] = read_sse(item)
        payload = event.json()
        assert payload["type"] == event.event
        out.append((payload["type"], payload))
    return out


def test_a_request_with_every_kind_of_block() -> None:
    decoded = CODEC.decode(
        request(
            system="sys",
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "a"},
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": "QUJD"},
                        },
                    ],
                },
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "hm", "signature": "s"},
                        {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"x": 1}},
                    ],
                },
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "2"}],
                },
            ],
            tools=[TOOL, {"type": "bash_20250124", "name": "bash"}],
            tool_choice={"type": "any", "disable_parallel_tool_use": True},
            toolshim={"mode": "force"},
        )
    )
    body = request_to_body(decoded.request)
    assert body["messages"] == [
        {"role": "system", "content": "sys"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "a"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD"}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "toolu_1",
                    "type": "function",
                    "function": {"name": "f", "arguments": '{"x": 1}'},
                }
            ],
        },
        {"role": "tool", "content": "2", "tool_call_id": "toolu_1"},
    ]
    assert body["tools"] == [
        {"type": "function", "function": {"name": "f", "parameters": TOOL["input_schema"]}}
    ]
    assert decoded.request.choice == ToolChoice.REQUIRED
    assert decoded.request.parallel_tool_calls is False
    assert dict(decoded.overrides) == {"mode": "force"}
    assert decoded.warnings == (
        "server tool 'bash' (bash_20250124) dropped: toolshim serves custom (function) tools only",
    )


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"model": ""}, "model"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "messages.0"),
        ({"messages": [{"role": "user", "content": [{"type": "video"}]}]}, "messages.0.content.0"),
        ({"tools": [{"name": "f"}]}, "tools.0"),
        ({"tools": [TOOL], "tool_choice": {"type": "tool", "name": "g"}}, "tool_choice.name"),
        ({"tool_choice": {"type": "sometimes"}}, "tool_choice"),
        ({"stop_sequences": "END"}, "stop_sequences"),
    ],
)
def test_malformed_requests_name_the_field(extra: dict[str, Any], param: str) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        CODEC.decode(request(**extra))
    assert caught.value.param == param


def test_stream_events_come_in_anthropic_order() -> None:
    decoded = CODEC.decode(request(tools=[TOOL], stream=True))
    encoder = CODEC.stream_encoder(decoded.request)
    raw = []
    for chunk in [
        StreamChunk(role="assistant"),
        StreamChunk(content="Let me "),
        StreamChunk(content="check."),
        StreamChunk(tool_calls=(ToolCallDelta(0, id="emulated_1_0", name="f"),)),
        StreamChunk(tool_calls=(ToolCallDelta(0, arguments='{"x": '),)),
        StreamChunk(tool_calls=(ToolCallDelta(0, arguments="1}"),)),
        StreamChunk(tool_calls=(ToolCallDelta(1, id="emulated_1_1", name="f", arguments="{}"),)),
        StreamChunk(finish_reason="tool_calls"),
        StreamChunk(usage=Usage(12, 5, 17), meta=Metadata("force", emulated=True)),
    ]:
        raw += encoder.feed(chunk)
    raw += encoder.finish()
    got = events(raw)
    assert [name for name, _ in got] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert got[0][1]["message"]["id"].startswith("msg_")
    assert got[1][1] == {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "text", "text": ""},
    }
    assert got[5][1]["content_block"] == {
        "type": "tool_use",
        "id": "toolu_emulated_1_0",
        "name": "f",
        "input": {},
    }
    assert got[6][1]["delta"] == {"type": "input_json_delta", "partial_json": '{"x": '}
    assert [e[1]["index"] for e in got[9:12]] == [2, 2, 2]
    delta = got[12][1]
    assert delta["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    assert delta["usage"] == {"input_tokens": 12, "output_tokens": 5}
    assert delta["toolshim"]["emulated"] is True


def test_a_broken_stream_ends_with_an_error_event() -> None:
    encoder = CODEC.stream_encoder(CODEC.decode(request(stream=True)).request)
    raw = encoder.feed(StreamChunk(content="Hel")) + encoder.fail(ToolCallError("gave up"), None)
    got = events(raw)
    assert [name for name, _ in got][-1] == "error"
    assert got[-1][1]["error"] == {"type": "api_error", "message": "gave up"}


def test_stop_reasons() -> None:
    plain = CODEC.decode(request()).request
    stopping = CODEC.decode(request(stop_sequences=["END"])).request
    assert stop_reason("tool_calls", None, plain) == "tool_use"
    assert stop_reason("length", None, plain) == "max_tokens"
    assert stop_reason("stop", None, plain) == "end_turn"
    assert stop_reason("stop", "END", stopping) == "stop_sequence"
    assert stop_reason("stop", "OTHER", stopping) == "end_turn"


def test_error_types_by_status() -> None:
    assert [error_type(s) for s in (400, 401, 403, 404, 413, 429, 500, 502, 503, 504, 529)] == [
        "invalid_request_error",
        "authentication_error",
        "permission_error",
        "not_found_error",
        "request_too_large",
        "rate_limit_error",
        "api_error",
        "api_error",
        "overloaded_error",
        "api_error",
        "overloaded_error",
    ]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
FIELDS = [
    "model",
    "messages",
    "system",
    "tools",
    "tool_choice",
    "max_tokens",
    "stop_sequences",
    "stream",
    "top_k",
    "toolshim",
]
BLOCKS = st.fixed_dictionaries(
    {
        "type": st.sampled_from(
            ["text", "image", "tool_use", "tool_result", "thinking", "document", "x"]
        )
    },
    optional={
        "text": json_values,
        "id": json_values,
        "name": json_values,
        "input": json_values,
        "content": json_values,
        "tool_use_id": json_values,
        "source": json_values,
        "is_error": json_values,
    },
)
MESSAGES = st.lists(
    st.fixed_dictionaries(
        {
            "role": st.sampled_from(["user", "assistant", "system", "tool"]),
            "content": st.text(max_size=5) | st.lists(BLOCKS, max_size=3) | json_values,
        }
    ),
    max_size=3,
)


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=6),
    MESSAGES,
    st.booleans(),
)
def test_any_json_is_decoded_or_rejected_as_a_bad_request(
    payload: dict[str, Any], messages: Any, valid_model: bool
) -> None:
    payload = {**payload, "messages": messages or payload.get("messages")}
    if valid_model:
        payload["model"] = "m"
    try:
        decoded = CODEC.decode(payload)
    except (InvalidRequestError, ConfigError):
        return
    request_to_body(decoded.request)


@pytest.mark.parametrize("source", [1, "text", None, [], {"type": "base64"}])
def test_a_document_block_whose_source_is_not_text_is_a_bad_request(source: Any) -> None:
    """Found by the property test above: a ``document`` whose ``source`` is not an object
    raised AttributeError (a 500) instead of a 400."""
    payload = {
        "model": "m",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": [{"type": "document", "source": source}]}],
    }
    with pytest.raises(InvalidRequestError, match="document"):
        CODEC.decode(payload)


@pytest.mark.parametrize("field", ["matched_stop", "stop_reason"])
def test_the_stop_sequence_an_upstream_reports_is_the_stop_sequence(field: str) -> None:
    decoded = CODEC.decode(request(stop_sequences=["END"]))
    finishing = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop", field: "END"}]}
    encoder = CODEC.stream_encoder(decoded.request)
    encoder.feed(chunk_from_dict({"choices": [{"index": 0, "delta": {"content": "Hi"}}]}))
    encoder.feed(chunk_from_dict(finishing))
    delta = dict(events(encoder.finish()))["message_delta"]
    assert delta["delta"] == {"stop_reason": "stop_sequence", "stop_sequence": "END"}
    whole = completion_from_dict(
        {
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "Hi"},
                    "finish_reason": "stop",
                    field: "END",
                }
            ]
        }
    )
    body = CODEC.encode(whole, decoded.request)
    assert (body["stop_reason"], body["stop_sequence"]) == ("stop_sequence", "END")
