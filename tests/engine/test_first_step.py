"""A request that orders its steps, whose model made up the value of every call twice, is not
answered without tools while its first step is left: that step is opened as its call
(toolshim.engine.next_step). The 1.5B, asked for the weather in the capital of Japan ("Look
up the capital first"), wrote get_capital(country="Tokyo"), was told nobody said Tokyo, wrote
get_weather(city="Tokyo"), and answered from what it knew; handed ``[get_capital(country="``
it wrote "Japan"."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.engine.test_plans import engine_for
from toolshim.engine.checks.ordered_steps import first_step_tool
from toolshim.testing import FunctionUpstream
from toolshim.testing.tools import function_tool
from toolshim.types import ChatRequest, Message, ToolSpec

TOOLS = [
    function_tool("get_capital", "The capital city of a country", country="string"),
    function_tool("get_weather", "Current weather for a city", city="string"),
    function_tool("get_stock_price", "The price of a stock in USD", symbol="string"),
    function_tool("convert_currency", "Convert an amount", amount="number", to="string"),
]
SPECS = tuple(
    ToolSpec(t["function"]["name"], t["function"]["description"], t["function"]["parameters"])
    for t in TOOLS
)
QUESTION = "What's the weather like in the capital of Japan? Look up the capital first."
KNOWN = "Tokyo is mild, 10 to 25°C in summer."


def request(text: str) -> ChatRequest:
    return ChatRequest("small", (Message("user", text),), SPECS)


@pytest.mark.parametrize(
    ("text", "tool"),
    [
        (QUESTION, "get_capital"),
        ("Find the capital of Norway, then tell me its current weather.", "get_capital"),
        ("Get the capital of Egypt and then the weather there.", "get_capital"),
        ("One AAPL share in EUR? Get the USD price, then convert it.", "get_stock_price"),
        ("Weather in Oslo? First check the weather.", "get_weather"),
    ],
)
def test_the_first_step_a_request_orders_is_read_from_its_clause(text: str, tool: str) -> None:
    assert first_step_tool(request(text)) == tool


@pytest.mark.parametrize(
    "text",
    [
        "What's the weather like in the capital of Japan?",  # no order
        "Get the weather and the capital, then tell me.",  # both tools in the first clause
        "Do something first.",  # no tool named
    ],
)
def test_no_first_step_where_none_is_ordered_or_one_named(text: str) -> None:
    assert first_step_tool(request(text)) is None


def test_not_a_first_step_once_a_result_is_in() -> None:
    asked = request(QUESTION)
    later = ChatRequest(
        "small", (*asked.messages, Message("assistant", "ok"), Message("tool", "x")), SPECS
    )
    assert first_step_tool(later) is None


def model(seen: list[dict[str, Any]], continued: str) -> Any:
    """Makes up Tokyo twice, answers from what it knows without tools, and continues an
    opened call with ``continued``."""

    def reply(body: dict[str, Any]) -> str:
        seen.append(body)
        last = body["messages"][-1]
        if last["role"] == "assistant":
            return last["content"] + continued
        if not any(
            "get_weather(" in m["content"] for m in body["messages"] if m["role"] == "system"
        ):
            return KNOWN  # asked without tools
        if "could not be used" in json.dumps(body["messages"]):
            return '[get_weather(city="Tokyo")]'
        return '[get_capital(country="Tokyo"), get_weather(city="Tokyo")]'

    return reply


async def test_the_first_step_is_opened_instead_of_an_answer_without_tools() -> None:
    seen: list[dict[str, Any]] = []
    engine = engine_for(FunctionUpstream(model(seen, 'Japan")]')))
    body = {"model": "small", "messages": [{"role": "user", "content": QUESTION}], "tools": TOOLS}
    completion = await engine.acomplete(body)
    (call,) = completion.message.tool_calls
    assert (call.name, json.loads(call.arguments)) == ("get_capital", {"country": "Japan"})
    assert seen[-1]["messages"][-1] == {"role": "assistant", "content": '[get_capital(country="'}
    assert "'get_capital', opened as its call" in " ".join(completion.meta.warnings)  # type: ignore[union-attr]


async def test_the_answer_stands_when_the_opened_step_is_made_up_again() -> None:
    seen: list[dict[str, Any]] = []
    engine = engine_for(FunctionUpstream(model(seen, 'Tokyo")]')))
    body = {"model": "small", "messages": [{"role": "user", "content": QUESTION}], "tools": TOOLS}
    completion = await engine.acomplete(body)
    assert not completion.message.tool_calls and completion.message.text == KNOWN


async def test_without_a_continued_reply_the_answer_stands() -> None:
    seen: list[dict[str, Any]] = []
    engine = engine_for(FunctionUpstream(model(seen, 'Japan")]')), prefill=False)
    body = {"model": "small", "messages": [{"role": "user", "content": QUESTION}], "tools": TOOLS}
    completion = await engine.acomplete(body)
    assert not completion.message.tool_calls and completion.message.text == KNOWN
    assert all(m["messages"][-1]["role"] != "assistant" for m in seen)


async def test_calls_written_before_the_step_the_request_puts_first_wait() -> None:
    """ "Get the USD price, then convert it": the 1.5B wrote the conversion of 1 USD first
    ("one" share is said, so the value check lets it through), then the price."""
    reply = '[convert_currency(amount=1, to="EUR"), get_stock_price(symbol="AAPL")]'
    engine = engine_for(FunctionUpstream(lambda body: reply))
    question = "What is the price of one AAPL share in EUR? Get the USD price, then convert it."
    body = {"model": "small", "messages": [{"role": "user", "content": question}], "tools": TOOLS}
    completion = await engine.acomplete(body)
    assert [c.name for c in completion.message.tool_calls] == ["get_stock_price"]
    warnings = " ".join(completion.meta.warnings)  # type: ignore[union-attr]
    assert "'get_stock_price' comes first; later call(s) 'convert_currency'" in warnings
    # In the order the request gives, the conversion waits as before: 1 is not the price.
    in_order = '[get_stock_price(symbol="AAPL"), convert_currency(amount=1, to="EUR")]'
    engine = engine_for(FunctionUpstream(lambda body: in_order))
    completion = await engine.acomplete(body)
    assert [c.name for c in completion.message.tool_calls] == ["get_stock_price"]
    warnings = " ".join(completion.meta.warnings)  # type: ignore[union-attr]
    assert "'convert_currency' needs a value not given yet" in warnings


async def test_a_reply_with_only_later_steps_is_asked_for_the_first_once() -> None:
    """ "Get the USD price, then convert it": the 1.5B wrote the conversion of 1 USD alone."""
    seen: list[dict[str, Any]] = []

    def reply(body: dict[str, Any]) -> str:
        seen.append(body)
        if "could not be used" in json.dumps(body["messages"]):
            return '[get_stock_price(symbol="AAPL")]'
        return '[convert_currency(amount=1, to="EUR")]'

    engine = engine_for(FunctionUpstream(reply))
    question = "What is the price of one AAPL share in EUR? Get the USD price, then convert it."
    body = {"model": "small", "messages": [{"role": "user", "content": question}], "tools": TOOLS}
    completion = await engine.acomplete(body)
    assert [c.name for c in completion.message.tool_calls] == ["get_stock_price"]
    assert "asks for 'get_stock_price' first" in seen[-1]["messages"][-1]["content"]

    # Written again after the re-ask: the first step is opened as its call.
    def stubborn(body: dict[str, Any]) -> str:
        last = body["messages"][-1]
        if last["role"] == "assistant":
            return last["content"] + 'AAPL")]'
        return '[convert_currency(amount=1, to="EUR")]'

    completion = await engine_for(FunctionUpstream(stubborn)).acomplete(body)
    (call,) = completion.message.tool_calls
    assert (call.name, json.loads(call.arguments)) == ("get_stock_price", {"symbol": "AAPL"})
    # Where no reply can be opened as a call, the later step goes on: asked once.
    plain = engine_for(FunctionUpstream(stubborn), prefill=False)
    completion = await plain.acomplete(body)
    assert [c.name for c in completion.message.tool_calls] == ["convert_currency"]


async def test_the_first_step_is_not_asked_for_after_another_re_ask() -> None:
    """After the made-up re-ask, a reply of only the later step is the made-up check's second
    strike (the first step is then opened), not a re-ask for the first step."""
    seen: list[dict[str, Any]] = []
    engine = engine_for(FunctionUpstream(model(seen, 'Japan")]')))
    body = {"model": "small", "messages": [{"role": "user", "content": QUESTION}], "tools": TOOLS}
    await engine.acomplete(body)
    assert not any("asks for 'get_capital' first" in json.dumps(b) for b in seen)


@pytest.mark.parametrize(
    "text",
    [
        # "with the value" makes a step use a result, but says nothing of which comes first
        "Find the statistical significance between dataset_A with the values 12, 24, 36 and "
        "dataset_B with the values 15, 30, 45.",
        "Retrieve the details for the user with the ID 7890.",
    ],
)
def test_no_first_step_is_read_from_words_that_only_use_a_value(text: str) -> None:
    tools = (
        ToolSpec("event_finder_find_upcoming", "Find upcoming events"),
        ToolSpec("t_test", "A t-test of two datasets"),
        ToolSpec("get_user_info", "A user's details by id"),
    )
    assert first_step_tool(ChatRequest("small", (Message("user", text),), tools)) is None
