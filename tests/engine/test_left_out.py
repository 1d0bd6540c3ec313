"""An answer after a chain that gives none of the numbers its results hold is asked for once
more, with them (engine.left_out): the 0.5B answered "the capital of Norway is Oslo, and its
current weather is snowing" with -3 °C in the result."""

from __future__ import annotations

from typing import Any

import pytest

from tests.engine.helpers import called, text_and_warnings
from toolshim.engine import Engine
from toolshim.testing import FunctionUpstream
from toolshim.testing.tools import function_tool

TOOLS = [
    function_tool("get_capital", "The capital city of a country", country="string"),
    function_tool("get_weather", "The current weather in a city", city="string"),
]
WITHOUT = "The capital of Norway is Oslo, and its weather is snowing."
WITH = "The capital of Norway is Oslo: -3°C and snowing."


def conversation(
    *steps: tuple[str, str, str],
    question: str = "Find the capital of Norway, then tell me its weather.",
) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": question}]
    for i, (name, arguments, result) in enumerate(steps):
        messages += called(name, arguments, result, f"c{i}")
    return messages


CHAIN = conversation(
    ("get_capital", '{"country": "Norway"}', "The capital of Norway is Oslo."),
    (
        "get_weather",
        '{"city": "Oslo"}',
        '{"city": "Oslo", "temperature_c": -3, "conditions": "snow"}',
    ),
)


def model(first: str, seen: list[dict[str, Any]]) -> Any:
    def reply(body: dict[str, Any]) -> str:
        seen.append(body)
        return WITH if "leaves out" in body["messages"][-1]["content"] else first

    return reply


async def answer(engine: Engine, messages: list[dict[str, Any]], stream: bool) -> tuple[str, Any]:
    body = {"model": "m", "messages": messages, "tools": TOOLS, "tool_choice": "none"}
    return await text_and_warnings(engine, body, stream)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_an_answer_without_the_results_numbers_is_asked_again(stream: bool) -> None:
    seen: list[dict[str, Any]] = []
    engine = Engine(FunctionUpstream(model(WITHOUT, seen)), mode="force", registry=":memory:")
    text, warnings = await answer(engine, CHAIN, stream)
    assert text == WITH  # the first answer was never sent
    assert len(seen) == 2
    note = seen[-1]["messages"][-1]["content"]
    assert note.startswith("Your answer leaves out values the results give: -3.")
    assert seen[-1]["messages"][-2] == {"role": "assistant", "content": WITHOUT}
    assert any("gave none of the numbers" in w for w in warnings)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize(
    ("messages", "first"),
    [
        (CHAIN, WITH),  # it gave them
        (CHAIN[:3], "Oslo is the capital."),  # one tool: its answer stands
        # The number is the user's own (the question says 3 days): not a result's.
        (
            conversation(
                ("get_capital", '{"country": "Norway"}', "The capital of Norway is Oslo."),
                ("get_weather", '{"city": "Oslo"}', "3 days of snow"),
                question="Norway's capital, then 3 days of its weather.",
            ),
            "Snow.",
        ),
    ],
    ids=["given", "one-tool", "users-number"],
)
async def test_an_answer_that_can_stand_does(
    messages: list[dict[str, Any]], first: str, stream: bool
) -> None:
    seen: list[dict[str, Any]] = []
    engine = Engine(FunctionUpstream(model(first, seen)), mode="force", registry=":memory:")
    text, _ = await answer(engine, messages, stream)
    assert text == first and len(seen) == 1
