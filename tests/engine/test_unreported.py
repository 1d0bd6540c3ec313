"""An answer that says nothing of a call that failed is asked for again from the results
(toolshim.engine.unreported): the 1.5B answered "The weather in Nairobi is currently sunny."
after ``error: no weather data for Nairobi``."""

from __future__ import annotations

from typing import Any

import pytest

from toolshim.capabilities.facts import Source
from toolshim.capabilities.registry import Registry
from toolshim.engine import Engine
from toolshim.engine.unreported import reports_failure, unrecovered_errors
from toolshim.testing import FunctionUpstream, Reply
from toolshim.testing.tools import function_tool
from toolshim.types import Message, ToolCall

QUESTION = "What's the weather in the capital of Kenya? Find the capital first."
TOOLS = [
    function_tool("get_capital", country="string"),
    function_tool("get_weather", city="string"),
]


def conversation(*outcomes: tuple[str, str]) -> list[Message]:
    messages = [Message("user", QUESTION)]
    for i, (name, result) in enumerate(outcomes):
        messages.append(Message("assistant", "", tool_calls=(ToolCall(f"c{i}", name, "{}"),)))
        messages.append(Message("tool", result, tool_call_id=f"c{i}"))
    return messages


def test_unrecovered_errors_are_those_no_later_call_mended() -> None:
    failed = "error: no weather data for Nairobi"
    assert unrecovered_errors(
        conversation(("get_capital", "Nairobi"), ("get_weather", failed))
    ) == (failed,)
    mended = conversation(
        ("get_weather", failed), ("get_capital", "Nairobi"), ("get_weather", "sun")
    )
    assert unrecovered_errors(mended) == ()
    assert unrecovered_errors(conversation(("get_capital", "Nairobi"))) == ()
    # Only since the user's last message.
    earlier = [*conversation(("get_weather", failed)), Message("user", "And Oslo?")]
    assert unrecovered_errors(earlier) == ()


@pytest.mark.parametrize(
    ("answer", "told"),
    [
        ("The weather in Nairobi is currently sunny.", False),
        ("User erin has 1 order.", False),
        ("There is no weather data for Nairobi.", True),
        ("I have no weather for Atlantis.", True),
        ("The ticker ZZZZ isn't recognized.", True),
        ("Sorry, I could not get the weather.", True),
        ("Looking it up failed.", True),
        ("Paris is clear; the refusal said not today.", True),  # an MCP tool's refusal
    ],
)
def test_an_answer_tells_of_a_failure_in_its_own_words(answer: str, told: bool) -> None:
    assert reports_failure(answer) is told


def body() -> dict[str, Any]:
    def called(i: int, name: str, arguments: str, result: str) -> list[dict[str, Any]]:
        call = {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }
        return [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": result},
        ]

    return {
        "model": "small",
        "tools": TOOLS,
        "messages": [
            {"role": "user", "content": QUESTION},
            *called(0, "get_capital", '{"country": "Kenya"}', "The capital of Kenya is Nairobi"),
            *called(1, "get_weather", '{"city": "Nairobi"}', "error: no weather data for Nairobi"),
        ],
    }


def model(first: str, again: str, seen: list[dict[str, Any]]) -> Any:
    def reply(request: dict[str, Any]) -> str:
        seen.append(request)
        return first if len(seen) == 1 else again

    return reply


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_an_answer_silent_on_the_failure_is_asked_for_again(stream: bool) -> None:
    seen: list[dict[str, Any]] = []
    again = "I could not get the weather for Nairobi: there is no weather data for it."
    upstream = FunctionUpstream(model("The weather in Nairobi is currently sunny.", again, seen))
    engine = Engine(upstream, mode="force", dialect="pythonic", registry=Registry())
    if stream:
        chunks = [c async for c in engine.astream({**body(), "stream": True})]
        text = "".join(c.content or "" for c in chunks)
        warnings = next(c.meta for c in reversed(chunks) if c.meta is not None).warnings
    else:
        completion = await engine.acomplete(body())
        text, warnings = completion.message.text, completion.meta.warnings
    assert text == again  # the silent answer was never sent
    assert len(seen) == 2
    assert "say what failed" in seen[1]["messages"][-1]["content"]
    assert any("said nothing of a call that failed" in w for w in warnings)


async def test_an_answer_that_tells_of_it_stands() -> None:
    seen: list[dict[str, Any]] = []
    told = "Nairobi is the capital, but there is no weather data for it."
    upstream = FunctionUpstream(model(told, "unused", seen))
    engine = Engine(upstream, mode="force", dialect="pythonic", registry=Registry())
    completion = await engine.acomplete(body())
    assert completion.message.text == told and len(seen) == 1


async def test_after_a_step_opened_in_vain_the_silent_answer_is_asked_for_again() -> None:
    """The 1.5B wrote both calls in one reply; the weather's failed, so the step was opened
    again (toolshim.engine.plans) and it wrote the same failed call: its "sunny" answer was
    then returned as it was."""
    seen: list[dict[str, Any]] = []
    again = "I could not get the weather for Nairobi: there is no weather data for it."

    def reply(request: dict[str, Any]) -> str:
        seen.append(request)
        last = request["messages"][-1]
        if last["role"] == "assistant":
            return last["content"] + 'Nairobi")]'
        answers = sum(m["messages"][-1]["role"] == "user" for m in seen)
        return "The weather in Nairobi is currently sunny." if answers == 1 else again

    upstream = FunctionUpstream(reply)
    engine = Engine(upstream, mode="force", dialect="pythonic", registry=Registry())
    engine.registry.learn(upstream.key, "small", "prefill", "yes", Source.UPSTREAM)
    request = body()
    messages = request["messages"]
    both = {**messages[1], "tool_calls": [*messages[1]["tool_calls"], *messages[3]["tool_calls"]]}
    request["messages"] = [messages[0], both, messages[2], messages[4]]
    completion = await engine.acomplete(request)
    assert completion.message.text == again
    # The step opened first (in vain), then the model's answer, silent, asked for again.
    assert [m["messages"][-1]["role"] for m in seen] == ["assistant", "user", "user"]


async def test_an_answer_cut_by_max_tokens_is_not_asked_for_again() -> None:
    """The 1.5B's "0.0000…" after a failed conversion ran to max_tokens; asked again, it ran to
    it again and its task hung."""
    seen: list[dict[str, Any]] = []

    def cut(request: dict[str, Any]) -> Reply:
        seen.append(request)
        return Reply("The price is 0.0000000000", finish_reason="length")

    engine = Engine(FunctionUpstream(cut), mode="force", dialect="pythonic", registry=Registry())
    completion = await engine.acomplete({**body(), "max_tokens": 8})
    assert len(seen) == 1 and completion.finish_reason == "length"
