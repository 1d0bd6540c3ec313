"""The OpenAI wire format: request validation and lossless round trips."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolshim.errors import InvalidRequestError
from toolshim.types import ToolChoice
from toolshim.wire.openai_chat import (
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


scalars = (
    st.none()
    | st.booleans()
    | st.integers(-2, 2)
    | st.sampled_from(["", "x", "auto", "user", "true"])
)
loose = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=2)
        | st.dictionaries(
            st.sampled_from(["name", "role", "content", "type", "function", "arguments", "id"]),
            inner,
            max_size=3,
        )
    ),
    max_leaves=6,
)


def mostly(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Usually ``valid``, sometimes anything: requests near the edge of validity."""
    return st.one_of(valid, valid, valid, valid, valid, valid, valid, valid, loose)


text = st.text(max_size=5)
call = st.fixed_dictionaries(
    {
        "function": mostly(
            st.fixed_dictionaries(
                {"name": mostly(text)},
                optional={"arguments": mostly(text | st.dictionaries(text, scalars))},
            )
        )
    },
    optional={"id": mostly(text), "type": mostly(st.just("function"))},
)
message = st.fixed_dictionaries(
    {"role": mostly(st.sampled_from(["user", "assistant", "system", "tool"]))},
    optional={
        "content": mostly(
            st.none()
            | text
            | st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": text}), max_size=2)
        ),
        "name": mostly(text),
        "tool_call_id": mostly(text),
        "tool_calls": mostly(st.lists(call, max_size=2)),
    },
)
tool = st.fixed_dictionaries(
    {"type": mostly(st.just("function"))},
    optional={
        "function": mostly(
            st.fixed_dictionaries(
                {"name": mostly(st.text(min_size=1, max_size=5))},
                optional={
                    "description": mostly(text),
                    "parameters": mostly(st.just({"type": "object"})),
                },
            )
        )
    },
)
messy_requests = st.fixed_dictionaries(
    {"messages": mostly(st.lists(mostly(message), min_size=1, max_size=3))},
    optional={
        "model": mostly(text),
        "tools": mostly(st.lists(mostly(tool), max_size=2)),
        "tool_choice": mostly(
            st.sampled_from(["auto", "none", "required"])
            | st.just({"type": "function", "function": {"name": "f"}})
        ),
        "parallel_tool_calls": mostly(st.booleans()),
        "stream": mostly(st.booleans()),
    },
)


@settings(max_examples=400)
@given(messy_requests)
def test_the_fast_check_never_accepts_what_pydantic_rejects(data: dict[str, Any]) -> None:
    """parse_request skips pydantic for plainly valid requests; that must change nothing."""
    from pydantic import ValidationError

    from toolshim.wire.openai_chat.requests import _plainly_valid, _WireRequest

    if not _plainly_valid(data):
        return
    try:
        _WireRequest.model_validate(data)
    except ValidationError as exc:  # pragma: no cover - a failure is the bug this test finds
        raise AssertionError(f"fast check accepted an invalid request: {exc}") from exc
