"""After results, the call a question still asks for: opened for the model to write."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.engine.test_focus import prefilling
from toolshim.capabilities import Registry, Source
from toolshim.engine import Engine
from toolshim.engine.next_call import pending_tools
from toolshim.testing import FunctionUpstream
from toolshim.types import Message, ToolCall, ToolSpec

STRING = {"type": "string"}


def spec(name: str, parameter: str) -> ToolSpec:
    return ToolSpec(
        name, "", {"type": "object", "properties": {parameter: STRING}, "required": [parameter]}
    )


TOOLS = (
    spec("find_user", "username"),
    spec("list_orders", "user_id"),
    spec("get_order", "order_id"),
    spec("get_weather", "city"),
)


def after(question: str, name: str, result: str) -> tuple[Message, ...]:
    call = ToolCall("c1", name, "{}")
    return (
        Message("user", question),
        Message("assistant", "", tool_calls=(call,)),
        Message("tool", result, tool_call_id="c1"),
    )


def names(tools: list[ToolSpec]) -> list[str]:
    return [t.name for t in tools]


def test_a_tool_the_question_asks_for_by_name_and_no_call_used_is_pending() -> None:
    messages = after("What are alice's orders?", "find_user", "User alice has id u-17")
    # "orders" is list_orders' word; get_order's only through the singular: after it.
    assert names(pending_tools(messages, TOOLS)) == ["list_orders", "get_order"]
    weather = after("What is the weather in the capital of Egypt?", "get_capital", "Cairo")
    assert names(pending_tools(weather, TOOLS)) == ["get_weather"]


@pytest.mark.parametrize(
    "messages",
    [
        # Called already since the question.
        after("What is the weather in Paris?", "get_weather", "sunny"),
        # No result since the question: the first reply is the model's own.
        (Message("user", "What are alice's orders?"),),
        # Nothing the question names.
        after("Who is alice?", "find_user", "User alice has id u-17"),
    ],
)
def test_nothing_is_pending(messages: tuple[Message, ...]) -> None:
    assert pending_tools(messages, TOOLS) == []


def body(result: str) -> dict[str, Any]:
    find = {"name": "find_user", "arguments": '{"username": "alice"}'}
    return {
        "model": "small",
        "messages": [
            {"role": "user", "content": "What are alice's orders?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "type": "function", "function": find}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": result},
        ],
        "tools": [
            {"type": "function", "function": {"name": t.name, "parameters": t.parameters}}
            for t in TOOLS
        ],
    }


def engine(upstream: FunctionUpstream) -> Engine:
    built = Engine(upstream, mode="force", dialect="hermes", registry=Registry())
    built.registry.learn(upstream.key, "small", "prefill", "yes", Source.UPSTREAM)
    return built


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_an_answer_where_the_chain_goes_on_is_opened_as_the_pending_call(
    stream: bool,
) -> None:
    seen: list[dict[str, Any]] = []
    reply = prefilling("alice's user id is u-17.", '{"user_id": "u-17"}}\n</tool_call>', seen)
    shim = engine(FunctionUpstream(reply))
    request = body("User alice has id u-17")
    if stream:
        chunks = [c async for c in shim.astream({**request, "stream": True})]
        assert "u-17." not in "".join(c.content or "" for c in chunks)
        arguments = "".join(c.tool_calls[0].arguments or "" for c in chunks if c.tool_calls)
    else:
        completion = await shim.acomplete(request)
        (call,) = completion.message.tool_calls
        assert call.name == "list_orders"
        arguments = call.arguments
        assert any("still asks for 'list_orders'" in w for w in completion.meta.warnings)
    assert json.loads(arguments) == {"user_id": "u-17"}
    opened = seen[-1]["messages"][-1]
    assert opened["role"] == "assistant" and '"name": "list_orders"' in opened["content"]


async def test_a_pending_call_with_a_value_nobody_said_leaves_the_answer() -> None:
    seen: list[dict[str, Any]] = []
    reply = prefilling("alice's user id is u-17.", '{"user_id": "u-99"}}\n</tool_call>', seen)
    completion = await engine(FunctionUpstream(reply)).acomplete(body("User alice has id u-17"))
    assert completion.message.content == "alice's user id is u-17." and len(seen) == 2


async def test_without_continuation_nothing_is_opened() -> None:
    upstream = FunctionUpstream(lambda request: "alice's user id is u-17.")
    plain = Engine(upstream, mode="force", dialect="hermes", registry=Registry())
    completion = await plain.acomplete(body("User alice has id u-17"))
    assert completion.message.content == "alice's user id is u-17." and len(upstream.history) == 1


def test_a_tool_whose_call_failed_is_still_pending() -> None:
    """The 0.5B called list_orders("alice") first, then find_user, then answered with the id."""
    messages = (
        Message("user", "What are alice's orders?"),
        Message(
            "assistant",
            "",
            tool_calls=(
                ToolCall("c1", "list_orders", '{"user_id": "alice"}'),
                ToolCall("c2", "find_user", '{"username": "alice"}'),
            ),
        ),
        Message("tool", "error: unknown user id 'alice'", tool_call_id="c1"),
        Message("tool", "User alice has id u-17", tool_call_id="c2"),
    )
    assert names(pending_tools(messages, TOOLS))[0] == "list_orders"
