"""Hypothesis strategies for request bodies: arbitrary JSON, and requests of each protocol the
proxy serves (chat completions, Anthropic Messages, Responses) that are nearly right (every
field present in some shape, most of them wrong), shared by the fuzz test and
``benchmarks/fuzz_requests.py``."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

__all__ = ["bodies", "chat_like", "json_values", "messages_like", "raw_bodies", "responses_like"]

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values: st.SearchStrategy[Any] = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=16,
)


def _maybe(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``values`` three times in four, any JSON value otherwise (most fields right, some not)."""
    return st.one_of(values, values, values, json_values)


roles = st.sampled_from(["user", "system", "assistant", "tool", "developer", "function"]) | st.text(
    max_size=10
)
parts = st.lists(
    st.fixed_dictionaries(
        {"type": st.sampled_from(["text", "image_url", "input_audio"]) | st.text(max_size=6)},
        optional={"text": _maybe(st.text(max_size=30)), "image_url": json_values},
    ),
    max_size=3,
)
tool_calls = st.lists(
    st.fixed_dictionaries(
        {
            "id": _maybe(st.text(max_size=10)),
            "type": _maybe(st.just("function")),
            "function": _maybe(
                st.fixed_dictionaries(
                    {
                        "name": _maybe(st.text(max_size=10)),
                        "arguments": _maybe(st.text(max_size=30)),
                    }
                )
            ),
        }
    ),
    max_size=2,
)
messages = st.fixed_dictionaries(
    {"role": _maybe(roles)},
    optional={
        "content": _maybe(st.text(max_size=60) | st.none() | parts),
        "tool_calls": _maybe(tool_calls),
        "tool_call_id": _maybe(st.text(max_size=10)),
        "name": _maybe(st.text(max_size=10)),
    },
)
schemas = st.recursive(
    st.fixed_dictionaries(
        {"type": st.sampled_from(["string", "integer", "number", "boolean", "null"])},
        optional={"enum": st.lists(scalars, max_size=3), "description": st.text(max_size=10)},
    ),
    lambda inner: (
        st.fixed_dictionaries(
            {
                "type": st.just("object"),
                "properties": st.dictionaries(st.text(max_size=6), inner, max_size=3),
            },
            optional={"required": st.lists(st.text(max_size=6), max_size=2)},
        )
        | st.fixed_dictionaries({"type": st.just("array"), "items": inner})
    ),
    max_leaves=8,
)
tools = st.lists(
    st.fixed_dictionaries(
        {
            "type": _maybe(st.just("function")),
            "function": _maybe(
                st.fixed_dictionaries(
                    {"name": _maybe(st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,10}", fullmatch=True))},
                    optional={
                        "description": _maybe(st.text(max_size=20)),
                        "parameters": _maybe(schemas),
                    },
                )
            ),
        }
    ),
    max_size=3,
)
tool_choice = (
    st.sampled_from(["auto", "none", "required"])
    | json_values
    | st.fixed_dictionaries(
        {
            "type": st.just("function"),
            "function": st.fixed_dictionaries({"name": _maybe(st.text(max_size=8))}),
        }
    )
)
chat_like: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
    {"messages": _maybe(st.lists(messages, min_size=1, max_size=4))},
    optional={
        "model": _maybe(st.text(max_size=10)),
        "tools": _maybe(tools),
        "tool_choice": tool_choice,
        "parallel_tool_calls": _maybe(st.booleans()),
        "stream": _maybe(st.booleans()),
        "stream_options": _maybe(st.fixed_dictionaries({"include_usage": st.booleans()})),
        "functions": json_values,
        "function_call": json_values,
        "response_format": _maybe(st.fixed_dictionaries({"type": st.just("text")})),
        "max_tokens": _maybe(st.integers(1, 4096)),
        "n": _maybe(st.just(1)),
        "toolshim": st.fixed_dictionaries(
            {},
            optional={
                "mode": _maybe(st.sampled_from(["auto", "off", "fallback", "force", "strip"])),
                "dialect": _maybe(st.sampled_from(["json", "hermes", "pythonic", "compact"])),
                "strategy": _maybe(st.sampled_from(["single", "decision"])),
                "max_reasks": json_values,
            },
        )
        | json_values,
    },
)
bodies: st.SearchStrategy[Any] = chat_like | json_values
raw_bodies = st.binary(max_size=200) | st.text(max_size=200).map(str.encode)

_text = st.text(max_size=20)
_blocks = st.lists(
    st.fixed_dictionaries(
        {
            "type": _maybe(
                st.sampled_from(
                    ["text", "tool_use", "tool_result", "image", "document", "thinking"]
                )
            )
        },
        optional={
            "text": _maybe(_text),
            "id": _maybe(_text),
            "name": _maybe(_text),
            "input": _maybe(st.dictionaries(_text, json_values, max_size=2)),
            "tool_use_id": _maybe(_text),
            "content": _maybe(
                _text
                | st.lists(
                    st.fixed_dictionaries({"type": st.just("text"), "text": _text}), max_size=2
                )
            ),
            "is_error": _maybe(st.booleans()),
            "source": json_values,
            "thinking": _maybe(_text),
        },
    ),
    max_size=3,
)
messages_like: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
    {
        "model": _maybe(st.text(min_size=1, max_size=10)),
        "max_tokens": _maybe(st.integers(1, 4096)),
        "messages": _maybe(
            st.lists(
                st.fixed_dictionaries(
                    {
                        "role": _maybe(st.sampled_from(["user", "assistant"])),
                        "content": _maybe(_text | _blocks),
                    }
                ),
                min_size=1,
                max_size=3,
            )
        ),
    },
    optional={
        "system": _maybe(_text | _blocks),
        "tools": _maybe(
            st.lists(
                st.fixed_dictionaries(
                    {"name": _maybe(st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,10}", fullmatch=True))},
                    optional={"description": _maybe(_text), "input_schema": _maybe(schemas)},
                ),
                max_size=2,
            )
        ),
        "tool_choice": _maybe(
            st.fixed_dictionaries(
                {"type": _maybe(st.sampled_from(["auto", "any", "tool", "none"]))},
                optional={
                    "name": _maybe(_text),
                    "disable_parallel_tool_use": _maybe(st.booleans()),
                },
            )
        ),
        "stream": _maybe(st.booleans()),
        "stop_sequences": _maybe(st.lists(_text, max_size=2)),
        "temperature": _maybe(st.floats(0, 1)),
        "metadata": json_values,
        "thinking": json_values,
    },
)
"""Anthropic Messages requests (``/v1/messages``), nearly right."""

_items = st.lists(
    st.fixed_dictionaries(
        {
            "type": _maybe(
                st.sampled_from(["message", "function_call", "function_call_output", "reasoning"])
            )
        },
        optional={
            "role": _maybe(st.sampled_from(["user", "assistant", "system", "developer"])),
            "content": _maybe(
                _text
                | st.lists(
                    st.fixed_dictionaries(
                        {
                            "type": _maybe(
                                st.sampled_from(["input_text", "output_text", "input_image"])
                            )
                        },
                        optional={"text": _maybe(_text), "image_url": json_values},
                    ),
                    max_size=2,
                )
            ),
            "call_id": _maybe(_text),
            "name": _maybe(_text),
            "arguments": _maybe(_text),
            "output": _maybe(_text),
            "id": _maybe(_text),
        },
    ),
    max_size=3,
)
responses_like: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
    {"model": _maybe(st.text(min_size=1, max_size=10)), "input": _maybe(_text | _items)},
    optional={
        "instructions": _maybe(_text),
        "tools": _maybe(
            st.lists(
                st.fixed_dictionaries(
                    {
                        "type": _maybe(st.just("function")),
                        "name": _maybe(
                            st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,10}", fullmatch=True)
                        ),
                    },
                    optional={"parameters": _maybe(schemas), "strict": _maybe(st.booleans())},
                ),
                max_size=2,
            )
        ),
        "tool_choice": tool_choice,
        "stream": _maybe(st.booleans()),
        "max_output_tokens": _maybe(st.integers(1, 4096)),
        "previous_response_id": _maybe(_text),
        "parallel_tool_calls": _maybe(st.booleans()),
        "text": json_values,
        "reasoning": json_values,
        "store": _maybe(st.booleans()),
        "include": json_values,
    },
)
"""OpenAI Responses requests (``/v1/responses``), nearly right."""
