"""After results that leave no step to take, the answer is asked for at once without tools
(engine.answer_first): the 0.5B wrote the call it had just made in 43 of its 100 agent tasks,
and each such turn spent a request on it before the answer was asked for without tools."""

from __future__ import annotations

from typing import Any

import pytest

from tests.engine.helpers import called, text_and_warnings
from toolshim.engine import Engine
from toolshim.engine.answer_first import WARNING
from toolshim.testing import FakeUpstream
from toolshim.testing.tools import function_tool

TOOLS = [
    function_tool("get_weather", "The current weather in a city", city="string"),
    function_tool("get_capital", "The capital city of a country", country="string"),
    function_tool("lookup_order", "An order by its id", order_id="string"),
]
ANSWER = "It is 18°C and sunny in Paris."
REPEAT = '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}'
WITHOUT_TOOLS = "Do not call a tool"


def paris(question: str, *more: list[dict[str, Any]]) -> list[dict[str, Any]]:
    messages = [{"role": "user", "content": question}]
    messages += called("get_weather", '{"city": "Paris"}', '{"temp_c": 18, "sky": "sunny"}')
    for extra in more:
        messages += extra
    return messages


async def serve(
    engine: Engine, messages: list[dict[str, Any]], stream: bool, **extra: Any
) -> tuple[str, list[str]]:
    body = {"model": "m", "messages": messages, "tools": TOOLS, **extra}
    return await text_and_warnings(engine, body, stream)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize(
    "question",
    [
        "What's the weather in Paris?",
        "is it sunny in paris right now",
        "Tell me: what is the weather like in Paris today?",
    ],
)
async def test_results_that_leave_no_step_are_answered_in_one_request_without_tools(
    question: str, stream: bool
) -> None:
    upstream = FakeUpstream([ANSWER, REPEAT])
    engine = Engine(upstream, mode="force", registry=":memory:")
    text, warnings = await serve(engine, paris(question), stream)
    assert text == ANSWER
    assert upstream.calls == 1
    asked = upstream.history[0]["messages"]
    assert WITHOUT_TOOLS in asked[-1]["content"]
    assert "get_capital" not in str(asked)  # no tool is described
    assert WARNING in warnings


@pytest.mark.parametrize(
    ("question", "more"),
    [
        # another offered tool the user names, which no call has used
        ("What's the capital of France, and the weather there?", []),
        # a name no call has taken
        ("Is it warmer in Paris than in Oslo?", []),
        # a number no call has taken
        ("What's the weather in Paris? Also order 1001.", []),
        # one call for a message that lists things
        ("weather in paris and rome", []),
        # a call that failed
        (
            "What's the weather in Paris and in the capital of Japan?",
            [called("get_capital", '{"country": "Japan"}', "Error: the service is down", "c2")],
        ),
    ],
    ids=["tool-named", "name-left", "number-left", "listed", "failed"],
)
async def test_results_that_leave_a_step_offer_the_tools_again(
    question: str, more: list[list[dict[str, Any]]]
) -> None:
    upstream = FakeUpstream([ANSWER, ANSWER])  # (an answer silent on a failure is asked again)
    engine = Engine(upstream, mode="force", registry=":memory:")
    text, warnings = await serve(engine, paris(question, *more), False)
    assert text == ANSWER
    assert WARNING not in warnings
    assert WITHOUT_TOOLS not in upstream.history[0]["messages"][-1]["content"]
    assert "lookup_order" in str(upstream.history[0]["messages"])  # the tools are described


async def test_results_of_two_calls_for_a_list_are_answered_without_tools() -> None:
    messages = paris("Is it warmer in Paris or in Rome?")
    messages += called("get_weather", '{"city": "Rome"}', '{"temp_c": 24}', "c2")
    upstream = FakeUpstream(["Rome is warmer: 24°C against 18°C."])
    engine = Engine(upstream, mode="force", registry=":memory:")
    _, warnings = await serve(engine, messages, False)
    assert upstream.calls == 1 and WARNING in warnings


@pytest.mark.parametrize(
    "extra",
    [{"tool_choice": "required"}, {"response_format": {"type": "json_object"}}],
    ids=["required", "response-format"],
)
async def test_a_turn_the_caller_shapes_keeps_its_tools(extra: dict[str, Any]) -> None:
    upstream = FakeUpstream([REPEAT, ANSWER, ANSWER])
    engine = Engine(upstream, mode="force", registry=":memory:")
    _, warnings = await serve(engine, paris("What's the weather in Paris?"), False, **extra)
    assert WARNING not in warnings


async def test_a_request_that_ends_with_the_users_message_is_not_answered_first() -> None:
    messages = paris("What's the weather in Paris?")
    messages.append({"role": "user", "content": "thanks! and the capital of Peru?"})
    upstream = FakeUpstream(
        ['{"tool_calls": [{"name": "get_capital", "arguments": {"country": "Peru"}}]}']
    )
    engine = Engine(upstream, mode="force", registry=":memory:")
    completion = await engine.acomplete({"model": "m", "messages": messages, "tools": TOOLS})
    assert [c.name for c in completion.tool_calls] == ["get_capital"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_new_call_written_where_the_answer_was_asked_for_gets_the_tools(
    stream: bool,
) -> None:
    """Asked for its answer without tools, a model that writes a call it has no result for
    wants a step nothing foresaw: the tools are offered, and its call goes to the caller."""
    capital = '{"tool_calls": [{"name": "get_capital", "arguments": {"country": "France"}}]}'
    upstream = FakeUpstream([capital, capital])
    engine = Engine(upstream, mode="force", registry=":memory:")
    question = "What's the weather in Paris (France)?"  # ("France" in brackets: no name left)
    body = {"model": "m", "messages": paris(question), "tools": TOOLS}
    if stream:
        names = ""
        async for chunk in engine.astream({**body, "stream": True}):
            names += "".join(d.name or "" for d in chunk.tool_calls)
            assert not chunk.content  # the call written without tools is never shown as text
    else:
        completion = await engine.acomplete(body)
        names = "".join(c.name for c in completion.tool_calls)
    assert names == "get_capital"
    assert upstream.calls == 2
    assert WITHOUT_TOOLS in upstream.history[0]["messages"][-1]["content"]
    assert "get_capital" in str(upstream.history[1]["messages"])  # the tools, offered
