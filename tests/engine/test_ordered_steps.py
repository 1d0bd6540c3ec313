"""A request that orders its steps gets them one tool at a time (engine.checks.ordered_steps):
the 0.5B wrote ``get_capital("Egypt")`` and ``get_weather("Egypt")`` in one reply for "the
capital of Egypt and then the weather there", and answered from the failed weather call."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.engine.helpers import called
from toolshim.capabilities.facts import Source
from toolshim.capabilities.registry import Registry
from toolshim.engine import Engine
from toolshim.engine.checks.ordered_steps import orders_steps
from toolshim.engine.plans import chained_value, fixing_steps
from toolshim.testing import FunctionUpstream
from toolshim.testing.tools import function_tool
from toolshim.types import Message, ToolCall

TOOLS = [
    function_tool("get_capital", "The capital city of a country", country="string"),
    function_tool("get_weather", "The current weather in a city", city="string"),
]
CHAIN = '[get_capital(country="Egypt"), get_weather(city="Egypt")]'
ANSWER = "The capital of Egypt is Cairo."


def model(first: str, seen: list[dict[str, Any]]) -> Any:
    """``first`` to the question; once the capital is in, the answer (or, handed an assistant
    message to continue, the weather call for Cairo)."""

    def reply(body: dict[str, Any]) -> str:
        seen.append(body)
        last = body["messages"][-1]
        if last["role"] == "assistant":
            return last["content"] + 'Cairo")]'
        return ANSWER if "Cairo" in json.dumps(body["messages"]) else first

    return reply


def engine_for(upstream: FunctionUpstream) -> Engine:
    engine = Engine(upstream, mode="force", dialect="pythonic", registry=Registry())
    engine.registry.learn(upstream.key, "small", "prefill", "yes", Source.UPSTREAM)
    return engine


def body_for(question: str) -> dict[str, Any]:
    return {"model": "small", "messages": [{"role": "user", "content": question}], "tools": TOOLS}


def with_result(body: dict[str, Any], message: Any, result: str) -> dict[str, Any]:
    call = message.tool_calls[0]
    return {
        **body,
        "messages": [*body["messages"], *called(call.name, call.arguments, result, call.id)],
    }


async def test_the_next_step_waits_for_the_first_result() -> None:
    seen: list[dict[str, Any]] = []
    upstream = FunctionUpstream(model(CHAIN, seen))
    engine = engine_for(upstream)
    body = body_for("Get the capital of Egypt and then the weather there.")
    first = await engine.acomplete(body)
    calls = [(c.name, json.loads(c.arguments)) for c in first.message.tool_calls]
    assert calls == [("get_capital", {"country": "Egypt"})]
    assert any("one step at a time" in w for w in first.meta.warnings)
    assert len(seen) == 1
    # With the capital in, the answer is opened as the weather call the model had planned.
    second = await engine.acomplete(with_result(body, first.message, "The capital is Cairo."))
    made = [(c.name, json.loads(c.arguments)) for c in second.message.tool_calls]
    assert made == [("get_weather", {"city": "Cairo"})]


async def test_streamed_the_same() -> None:
    seen: list[dict[str, Any]] = []
    engine = engine_for(FunctionUpstream(model(CHAIN, seen)))
    body = body_for("Find the capital of Egypt first, then its weather.")
    names = [
        d.name
        async for chunk in engine.astream({**body, "stream": True})
        for d in chunk.tool_calls
        if d.name
    ]
    assert names == ["get_capital"]


@pytest.mark.parametrize(
    ("question", "reply", "expected"),
    [
        # No order said: both calls go out together.
        (
            "What is the capital of Egypt, and the weather in Paris?",
            '[get_capital(country="Egypt"), get_weather(city="Paris")]',
            ["get_capital", "get_weather"],
        ),
        # Ordered, but the calls are of one tool: they go out together.
        (
            "Get the weather in Paris, then in London.",
            '[get_weather(city="Paris"), get_weather(city="London")]',
            ["get_weather", "get_weather"],
        ),
        # Ordered, but independent: every value is the user's own (BFCL parallel_multiple).
        (
            "Get the capital of Egypt. Then get the weather in Paris.",
            '[get_capital(country="Egypt"), get_weather(city="Paris")]',
            ["get_capital", "get_weather"],
        ),
        # A value the user did not write waits ("Oslo": the capital call will give it).
        (
            "Find the capital of Norway, then tell me its weather.",
            '[get_capital(country="Norway"), get_weather(city="Oslo")]',
            ["get_capital"],
        ),
    ],
    ids=["not-ordered", "one-tool", "ordered-independent", "unsaid-value"],
)
async def test_calls_that_can_go_together_do(
    question: str, reply: str, expected: list[str]
) -> None:
    engine = engine_for(FunctionUpstream(model(reply, [])))
    completion = await engine.acomplete(body_for(question))
    assert [c.name for c in completion.message.tool_calls] == expected


@pytest.mark.parametrize(
    ("text", "ordered"),
    [
        ("Get the capital of Egypt and then the weather there.", True),
        ("Which order ids does alice have? Find her user id first.", True),
        ("List the orders of bob (look up his user id, then his orders).", True),
        ("First, find the id; after that, the orders.", True),
        ("Convert it using that result.", True),
        ("The weather in Paris and in London?", False),
        ("Give me the first three primes.", False),
        ("What is the first name of user 5?", False),
    ],
)
def test_words_that_order_steps(text: str, ordered: bool) -> None:
    assert orders_steps(text) is ordered


PRICE_TOOLS = [
    function_tool("get_stock_price", "Latest stock price in USD", symbol="string"),
    function_tool(
        "convert_currency",
        "Convert an amount between currencies",
        amount="number",
        from_currency="string",
        to_currency="string",
    ),
]
PRICE_QUESTION = "What is one AAPL share in EUR? Get the USD price, then convert it."


def price_model(seen: list[dict[str, Any]]) -> Any:
    """Calls for the price, then answers with it in USD (or, handed an opened call, converts)."""

    def reply(body: dict[str, Any]) -> str:
        seen.append(body)
        last = body["messages"][-1]
        if last["role"] == "assistant":
            return last["content"] + 'amount=191.25, from_currency="USD", to_currency="EUR")]'
        if "191.25" in json.dumps(body["messages"]):
            return "AAPL is trading at 191.25 USD."
        return '[get_stock_price(symbol="AAPL")]'

    return reply


@pytest.mark.parametrize(
    ("question", "result", "expected"),
    [
        (PRICE_QUESTION, '{"price_usd": 191.25}', ["convert_currency"]),
        # Not ordered: the answer stands.
        ("What is one AAPL share in EUR?", '{"price_usd": 191.25}', []),
        # The first step failed: the answer (the error) stands.
        (PRICE_QUESTION, "error: market closed 191.25", []),
    ],
    ids=["ordered", "not-ordered", "failed"],
)
async def test_a_step_the_user_named_is_taken_before_the_answer(
    question: str, result: str, expected: list[str]
) -> None:
    seen: list[dict[str, Any]] = []
    engine = Engine(
        FunctionUpstream(price_model(seen)), mode="force", dialect="pythonic", registry=Registry()
    )
    engine.registry.learn(engine.upstream.key, "small", "prefill", "yes", Source.UPSTREAM)
    body = {
        "model": "small",
        "messages": [{"role": "user", "content": question}],
        "tools": PRICE_TOOLS,
    }
    first = await engine.acomplete(body)
    assert [c.name for c in first.message.tool_calls] == ["get_stock_price"]
    second = await engine.acomplete(with_result(body, first.message, result))
    made = [(c.name, json.loads(c.arguments)) for c in second.message.tool_calls]
    if expected:
        assert made == [
            ("convert_currency", {"amount": 191.25, "from_currency": "USD", "to_currency": "EUR"})
        ]
    else:
        assert made == [] and "191.25" in (second.message.text or "")


def failed_call(question: str, name: str, arguments: str, error: str) -> list[Message]:
    return [
        Message("user", question),
        Message("assistant", "", tool_calls=(ToolCall("c0", name, arguments),)),
        Message("tool", error, tool_call_id="c0"),
    ]


ORDER_TOOLS = ["find_user", "list_orders", "lookup_order", "get_weather"]


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        # The error and the user both name what find_user finds: it is the step left.
        (
            failed_call(
                "List the orders of user bob (look up his user id, then his orders).",
                "list_orders",
                '{"user_id": "bob"}',
                "error: unknown user id 'bob'; user ids look like 'u-17'",
            ),
            ("find_user",),
        ),
        # The user named no other tool the error names: the error is the answer.
        (
            failed_call(
                "Which orders does erin have? Find her user id first.",
                "find_user",
                '{"username": "erin"}',
                "error: no user named 'erin'",
            ),
            (),
        ),
        (
            failed_call(
                "What's the weather in Atlantis?",
                "get_weather",
                '{"city": "Atlantis"}',
                "error: no weather data for city 'Atlantis'",
            ),
            (),
        ),
        # The call worked: nothing to fix.
        (
            failed_call(
                "List the orders of user bob (look up his user id, then his orders).",
                "list_orders",
                '{"user_id": "u-42"}',
                '{"user_id": "u-42", "order_ids": ["1002"]}',
            ),
            (),
        ),
    ],
    ids=["named-by-both", "named-by-neither", "one-tool", "worked"],
)
def test_the_step_that_fixes_a_failed_call(
    messages: list[Message], expected: tuple[str, ...]
) -> None:
    assert fixing_steps(messages, ORDER_TOOLS) == expected


def chain(*steps: tuple[str, str, str]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Which orders does alice have?"}]
    for i, (name, arguments, result) in enumerate(steps):
        messages += called(name, arguments, result, f"c{i}")
    return messages


UNKNOWN = "error: unknown user id 'alice'; user ids look like 'u-17'"


@pytest.mark.parametrize(
    ("last", "error_shown"),
    [('{"user_id": "u-17", "order_ids": ["1001"]}', False), ("error: service down", True)],
    ids=["recovered", "not-recovered"],
)
async def test_a_failure_a_later_call_recovered_is_left_out_of_the_answer(
    last: str, error_shown: bool
) -> None:
    seen: list[dict[str, Any]] = []

    def reply(body: dict[str, Any]) -> str:
        seen.append(body)
        if "Do not call a tool" in body["messages"][-1]["content"]:
            return "alice has order 1001."
        return '[list_orders(user_id="u-17")]'  # the call it has the result of, again

    engine = Engine(FunctionUpstream(reply), mode="force", dialect="pythonic", registry=Registry())
    tools = [
        function_tool("find_user", "Find a user id by username", username="string"),
        function_tool("list_orders", "List the order ids of a user id", user_id="string"),
    ]
    messages = chain(
        ("list_orders", '{"user_id": "alice"}', UNKNOWN),
        ("find_user", '{"username": "alice"}', '{"user_id": "u-17"}'),
        ("list_orders", '{"user_id": "u-17"}', last),
    )
    completion = await engine.acomplete({"model": "m", "messages": messages, "tools": tools})
    assert completion.message.text == "alice has order 1001."
    asked = seen[-1]["messages"][-1]["content"]
    assert '{"user_id": "u-17"}' in asked  # the lookup's result is there either way
    assert ("unknown user id" in asked) is error_shown


@pytest.mark.parametrize(
    ("lookup_result", "expected"),
    [
        ("User bob has id u-42", "u-42"),  # in words: its one id-like token
        ('{"username": "bob", "user_id": "u-42"}', "u-42"),
        ("User bob has id u-42 (formerly u-7)", None),  # two: which is not known
        ("bob joined in March", None),  # none
    ],
)
def test_the_value_a_failed_call_lacked(lookup_result: str, expected: str | None) -> None:
    messages = [
        *failed_call(
            "List the orders of user bob (look up his user id, then his orders).",
            "list_orders",
            '{"user_id": "bob"}',
            "error: unknown user id 'bob'; user ids look like 'u-17'",
        ),
        Message("assistant", "", tool_calls=(ToolCall("c1", "find_user", '{"username": "bob"}'),)),
        Message("tool", lookup_result, tool_call_id="c1"),
    ]
    assert chained_value(messages, "list_orders", "user_id") == expected
