"""A later question answered with numbers nothing in the conversation holds is opened as a call
(toolshim.engine.invented): the 0.5B answered "NVDA is 100" a turn after the user named NVDA."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.engine.helpers import called
from toolshim.capabilities.facts import Source
from toolshim.capabilities.registry import Registry
from toolshim.engine import Engine
from toolshim.testing import FunctionUpstream, prefilling
from toolshim.testing.tools import function_tool

TOOLS = [
    function_tool("get_stock_price", "The latest price of a stock in USD", symbol="string"),
    function_tool("convert_currency", "Convert an amount", amount="number", to="string"),
]
EARLIER = [
    {"role": "user", "content": "I'm thinking about buying some NVDA."},
    {"role": "assistant", "content": "NVDA is NVIDIA's ticker symbol. What would you like?"},
]


def engine_for(upstream: FunctionUpstream) -> Engine:
    engine = Engine(upstream, mode="force", dialect="pythonic", registry=Registry())
    engine.registry.learn(upstream.key, "small", "prefill", "yes", Source.UPSTREAM)
    return engine


def body(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"model": "small", "tools": TOOLS, "messages": list(messages)}


@pytest.mark.parametrize(
    ("continued", "expected"),
    [
        ('get_stock_price(symbol="NVDA")]', [("get_stock_price", {"symbol": "NVDA"})]),
        ('get_stock_price(symbol="AMD")]', []),  # a value nobody gave: the answer stands
    ],
    ids=["said", "made-up"],
)
async def test_a_later_question_answered_with_a_made_up_number_is_opened_as_a_call(
    continued: str, expected: list[tuple[str, Any]]
) -> None:
    seen: list[dict[str, Any]] = []
    answer = "The latest stock price in USD for NVDA is 100."
    engine = engine_for(FunctionUpstream(prefilling(answer, continued, seen)))
    question = {"role": "user", "content": "What is that stock trading at now?"}
    completion = await engine.acomplete(body(*EARLIER, question))
    made = [(c.name, json.loads(c.arguments)) for c in completion.message.tool_calls]
    assert made == expected
    assert len(seen) == 2
    assert seen[1]["messages"][-1] == {"role": "assistant", "content": "["}
    if expected:
        assert completion.meta is not None
        assert any("values no message or result gives (100)" in w for w in completion.meta.warnings)
    else:
        assert completion.message.text == answer


@pytest.mark.parametrize(
    ("messages", "answer"),
    [
        # The conversation's first question: the numbers are the model's knowledge.
        ([{"role": "user", "content": "How many legs does a spider have?"}], "A spider has 8."),
        # A number the conversation holds.
        (
            [*EARLIER, {"role": "user", "content": "Is 120 dollars a good price for it?"}],
            "120 dollars is a fair price.",
        ),
        # No number.
        ([*EARLIER, {"role": "user", "content": "What does NVIDIA make?"}], "Graphics chips."),
    ],
    ids=["first-question", "said-number", "no-number"],
)
async def test_answers_that_invent_nothing_in_a_later_turn_are_returned(
    messages: list[dict[str, Any]], answer: str
) -> None:
    seen: list[dict[str, Any]] = []
    engine = engine_for(
        FunctionUpstream(prefilling(answer, 'get_stock_price(symbol="NVDA")]', seen))
    )
    completion = await engine.acomplete(body(*messages))
    assert completion.message.text == answer
    assert not completion.message.tool_calls
    assert len(seen) == 1


WEATHER = [function_tool("get_weather", "The current weather in a city", city="string")]
PARIS = [
    {"role": "user", "content": "What's the weather in Paris?"},
    *called("get_weather", '{"city": "Paris"}', '{"temperature_c": 18, "sky": "sunny"}', "c0"),
    {"role": "assistant", "content": "It is sunny and 18 °C in Paris."},
]


@pytest.mark.parametrize(
    ("question", "answer", "continued", "expected"),
    [
        # A new subject answered with the earlier result's number: opened, the call is made.
        (
            "And in Oslo?",
            "The weather in Oslo is sunny with 18 degrees.",
            'get_weather(city="Oslo")]',
            [("get_weather", {"city": "Oslo"})],
        ),
        # Opened, the model wrote the earlier question's call again: the answer stands.
        ("And in Oslo?", "Oslo: sunny, 18 degrees.", 'get_weather(city="Paris")]', []),
        # No new subject: the earlier result is the answer.
        ("Thanks! How warm was it again?", "It was 18 degrees.", 'get_weather(city="x")]', []),
        # A new subject, but a number the results do not hold: not borrowed (nor invented:
        # the question gives it).
        ("Is 25 warm for Oslo?", "25 is warm.", 'get_weather(city="Oslo")]', []),
    ],
    ids=["new-subject", "same-call-again", "no-new-subject", "not-from-results"],
)
async def test_an_earlier_questions_numbers_for_a_new_subject_open_a_call(
    question: str, answer: str, continued: str, expected: list[tuple[str, Any]]
) -> None:
    seen: list[dict[str, Any]] = []
    engine = engine_for(FunctionUpstream(prefilling(answer, continued, seen)))
    request = {
        "model": "small",
        "tools": WEATHER,
        "messages": [*PARIS, {"role": "user", "content": question}],
    }
    completion = await engine.acomplete(request)
    made = [(c.name, json.loads(c.arguments)) for c in completion.message.tool_calls]
    assert made == expected
    if expected:
        assert completion.meta is not None
        assert any("for a new subject (18)" in w for w in completion.meta.warnings)
    else:
        assert completion.message.text == answer
