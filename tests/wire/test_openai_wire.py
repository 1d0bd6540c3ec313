"""The OpenAI wire format: request validation and lossless round trips."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolshim.errors import InvalidRequestError
from toolshim.types import ToolChoice
from toolshim.wire.openai import (
    completion_from_dict,
    completion_to_dict,
    parse_request,
    request_to_body,
)

TOOL = {
    "type": "function",
    "function": {"name": "f", "parameters": {"type": "object", "properties": {}}},
}


@pytest.mark.parametrize(
    ("body", "param", "text"),
    [
        ([], None, "must be a JSON object"),
        ({"model": "m"}, "messages", "Field required"),
        ({"model": "m", "messages": "hi"}, "messages", "valid list"),
        ({"model": "m", "messages": []}, "messages", "at least 1"),
        ({"model": "m", "messages": [{"content": "x"}]}, "messages.0.role", "Field required"),
        (
            {
                "model": "m",
                "messages": [{"role": "user"}],
                "tools": [{"type": "function", "function": {}}],
            },
            "tools.0.function.name",
            "Field required",
        ),
        (
            {"model": "m", "messages": [{"role": "user"}], "tools": [{"type": "function"}]},
            "tools.0.function",
            "needs a 'function'",
        ),
        (
            {
                "model": "m",
                "messages": [{"role": "user"}],
                "tools": [TOOL],
                "tool_choice": "always",
            },
            "tool_choice",
            "'always' is not one of",
        ),
        (
            {
                "model": "m",
                "messages": [{"role": "user"}],
                "tools": [TOOL],
                "tool_choice": {"type": "function", "function": {"name": "g"}},
            },
            "tool_choice",
            "not among the tools: 'f'",
        ),
        (
            {"model": "m", "messages": [{"role": "user"}], "tools": [TOOL, TOOL]},
            "tools.1.function.name",
            "duplicate tool name 'f'",
        ),
    ],
)
def test_bad_requests_name_the_field(body: Any, param: str | None, text: str) -> None:
    with pytest.raises(InvalidRequestError) as info:
        parse_request(body)
    assert info.value.param == param
    assert text in info.value.message
    assert info.value.status == 400


def test_tool_choice_is_canonical() -> None:
    base = {"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [TOOL]}
    assert parse_request(base).choice == ToolChoice.AUTO
    assert parse_request({**base, "tool_choice": "required"}).choice == ToolChoice.REQUIRED
    named = parse_request({**base, "tool_choice": {"type": "function", "function": {"name": "f"}}})
    assert named.choice == ToolChoice.function("f")
    assert (
        parse_request({**base, "tool_choice": {"type": "function", "name": "f"}}).choice.name == "f"
    )


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
messages = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["system", "user", "assistant"]), "content": st.text(max_size=20)},
        optional={"name": st.text(min_size=1, max_size=5), "x_vendor": json_values},
    ),
    min_size=1,
    max_size=4,
)


@given(
    messages=messages,
    extra=st.dictionaries(
        st.sampled_from(["temperature", "seed", "top_p", "user", "options", "n"]), json_values
    ),
)
def test_request_round_trip_keeps_every_field(
    messages: list[dict[str, Any]], extra: dict[str, Any]
) -> None:
    body = {"model": "m", "messages": messages, "tools": [TOOL], "tool_choice": "auto", **extra}
    assert request_to_body(parse_request(body)) == body


def test_completion_round_trip_keeps_unknown_fields() -> None:
    data = {
        "id": "x",
        "object": "chat.completion",
        "created": 5,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "hi", "reasoning_content": "hmm"},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": 1,
            "completion_tokens": 2,
            "total_tokens": 3,
            "prompt_tokens_details": {"cached_tokens": 0},
        },
        "system_fingerprint": "fp",
    }
    assert completion_to_dict(completion_from_dict(data)) == data
