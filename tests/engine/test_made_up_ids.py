"""Calls with values nobody said (Qwen2.5-Coder-1.5B on the agent suite): one written beside
others with a made-up identifier is held back (``list_orders(user_id="12345")`` next to the
``find_user`` call whose result holds the real id); a reply whose every call is made up is
re-asked once, and a different made-up call then gets the answer asked for without tools
(``get_weather("London")``, then ``lookup_order("12345")``, for the chemical symbol of gold)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.engine.helpers import called
from toolshim.engine import Engine
from toolshim.testing import FakeUpstream


def tool(name: str, **properties: Any) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": name,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": list(properties),
            },
        },
    }


TOOLS = [
    tool("find_user", username={"type": "string"}),
    tool("list_orders", user_id={"type": "string"}),
    tool("add", a={"type": "integer"}, b={"type": "integer"}),
    tool("get_weather", city={"type": "string"}),
    tool("get_stock_price", symbol={"type": "string"}),
    tool("lookup_order", order_id={"type": "string"}),
]


def reply(*calls: tuple[str, dict[str, Any]]) -> str:
    return json.dumps({"tool_calls": [{"name": n, "arguments": a} for n, a in calls]})


def ask(question: str, **extra: Any) -> dict[str, Any]:
    return {
        "model": "m",
        "messages": [{"role": "user", "content": question}],
        "tools": TOOLS,
        **extra,
    }


async def run(engine: Engine, request: dict[str, Any], stream: bool) -> tuple[list[str], list[str]]:
    """The names of the calls returned, and the turn's warnings."""
    if not stream:
        completion = await engine.acomplete(request)
        assert completion.meta is not None
        return [c.name for c in completion.tool_calls], list(completion.meta.warnings)
    names: dict[int, str] = {}
    warnings: list[str] = []
    async for chunk in engine.astream({**request, "stream": True}):
        for delta in chunk.tool_calls:
            names[delta.index] = names.get(delta.index, "") + (delta.name or "")
        if chunk.meta is not None:
            warnings = list(chunk.meta.warnings)
    return list(names.values()), warnings


DEPENDENT = reply(("find_user", {"username": "alice"}), ("list_orders", {"user_id": "12345"}))


@pytest.mark.parametrize("stream", [False, True])
async def test_a_made_up_id_beside_the_call_that_finds_it_is_held_back(stream: bool) -> None:
    upstream = FakeUpstream([DEPENDENT])
    engine = Engine(upstream, mode="force", registry=":memory:")
    names, warnings = await run(engine, ask("Which orders does user alice have?"), stream)
    assert names == ["find_user"]
    assert upstream.calls == 1
    assert any("held back list_orders(user_id='12345')" in w for w in warnings)


@pytest.mark.parametrize("stream", [False, True])
async def test_a_made_up_city_beside_the_lookup_that_gives_it_is_held_back(stream: bool) -> None:
    """The 0.5B asked for the weather where order 1001 is going: the lookup, and the weather
    of a city nobody said, in one reply."""
    both = reply(("lookup_order", {"order_id": "1001"}), ("get_weather", {"city": "London"}))
    upstream = FakeUpstream([both])
    engine = Engine(upstream, mode="force", registry=":memory:")
    question = ask("What's the weather where my order 1001 is being shipped to?")
    names, warnings = await run(engine, question, stream)
    assert names == ["lookup_order"]
    assert upstream.calls == 1
    assert any("held back get_weather(city='London')" in w for w in warnings)


@pytest.mark.parametrize("stream", [False, True])
async def test_calls_all_made_up_are_judged_together_not_cut_to_those_without_a_digit(
    stream: bool,
) -> None:
    # DeepSeek's two exec_command calls (opensquilla#985) for a question that names neither
    # command: nothing the second needs comes from the first, so it is not held back; the
    # reply is re-asked once as a whole and, written again, both calls come back.
    both = reply(("get_weather", {"city": "Oslo"}), ("get_stock_price", {"symbol": "SHA256"}))
    upstream = FakeUpstream([both, both])
    engine = Engine(upstream, mode="force", registry=":memory:")
    names, warnings = await run(engine, ask("What should I check today?"), stream)
    assert names == ["get_weather", "get_stock_price"]
    assert upstream.calls == 2
    assert not any("held back" in w for w in warnings)


@pytest.mark.parametrize("stream", [False, True])
async def test_both_leaked_dsml_calls_come_back_for_a_question_that_names_neither(
    stream: bool,
) -> None:
    fixture = Path(__file__).parents[1] / "fixtures/corpus"
    leaked = json.loads(
        (fixture / "opensquilla-985-deepseek-v4-dsml-calls-elided.json").read_text("utf-8")
    )
    upstream = FakeUpstream([leaked["output"]] * 2)
    engine = Engine(upstream, mode="force", registry=":memory:")
    request = {
        "model": "m",
        "messages": [{"role": "user", "content": "看看桌面上那个文件"}],
        "tools": [{"type": "function", "function": t} for t in leaked["tools"]],
    }
    names, warnings = await run(engine, request, stream)
    assert names == ["exec_command", "exec_command"]
    assert not any("held back" in w for w in warnings)


@pytest.mark.parametrize(
    "request_",
    [
        ask("Which orders do alice and the user with id 12345 have?"),  # the id was said
        ask("Orders of alice?", tool_choice="required"),  # a forced choice is not second-guessed
    ],
    ids=["said", "required"],
)
async def test_an_id_the_conversation_holds_or_a_forced_choice_keeps_every_call(
    request_: dict[str, Any],
) -> None:
    engine = Engine(FakeUpstream([DEPENDENT]), mode="force", registry=":memory:")
    names, warnings = await run(engine, request_, False)
    assert names == ["find_user", "list_orders"]
    assert not any("held back" in w for w in warnings)


async def test_a_lone_call_and_plain_numbers_are_not_held_back() -> None:
    lone = reply(("list_orders", {"user_id": "12345"}))
    alone = FakeUpstream([lone, lone])
    names, _ = await run(Engine(alone, mode="force", registry=":memory:"), ask("My orders?"), False)
    assert names == ["list_orders"]  # nothing to wait for: re-asked once, written again, meant
    sums = FakeUpstream([reply(("find_user", {"username": "bob"}), ("add", {"a": 1, "b": 2}))])
    names, _ = await run(Engine(sums, mode="force", registry=":memory:"), ask("Find bob."), False)
    assert names == ["find_user", "add"]


async def test_the_id_found_in_a_result_grounds_the_next_call() -> None:
    request = ask("Which orders does user alice have?")
    request["messages"] += called("find_user", '{"username": "alice"}', "User alice has id u-17")
    both = reply(("list_orders", {"user_id": "u-17"}), ("find_user", {"username": "carol"}))
    engine = Engine(FakeUpstream([both]), mode="force", registry=":memory:")
    names, warnings = await run(engine, request, False)
    # u-17 is in a result: list_orders goes out. Nobody said carol, and beside a lookup by id
    # that is a value to wait for, not one to send.
    assert names == ["list_orders"]
    assert any("held back find_user(username='carol')" in w for w in warnings)


GOLD = "What is the chemical symbol for gold?"
LONDON = reply(("get_weather", {"city": "London"}))


@pytest.mark.parametrize("stream", [False, True])
async def test_a_second_made_up_call_gets_an_answer_without_tools(stream: bool) -> None:
    upstream = FakeUpstream([LONDON, reply(("list_orders", {"user_id": "12345"})), "Au"])
    engine = Engine(upstream, mode="force", registry=":memory:")
    if stream:
        text = ""
        async for chunk in engine.astream({**ask(GOLD), "stream": True}):
            assert not chunk.tool_calls
            text += chunk.content or ""
    else:
        completion = await engine.acomplete(ask(GOLD))
        assert not completion.tool_calls
        text = completion.text
    assert text == "Au"
    assert upstream.calls == 3
    reask = upstream.history[1]["messages"][-1]["content"]
    assert "nothing in the conversation mentions city='London'" in reask
    assert "tools" not in upstream.history[2] and "London" not in str(upstream.history[2])


async def test_the_same_made_up_call_written_again_is_returned() -> None:
    upstream = FakeUpstream([LONDON, LONDON])
    engine = Engine(upstream, mode="force", registry=":memory:")
    completion = await engine.acomplete(ask(GOLD))
    assert [c.name for c in completion.tool_calls] == ["get_weather"]
    assert upstream.calls == 2
    assert completion.meta is not None
    assert any("written again" in w for w in completion.meta.warnings)


@pytest.mark.parametrize(
    ("question", "call"),
    [
        ("How is Apple's stock doing?", ("get_stock_price", {"symbol": "AAPL"})),
        ("And NVIDIA?", ("get_stock_price", {"symbol": "NVDA"})),
        ("Weather in paris please", ("get_weather", {"city": "Paris, France"})),
        ("What are the forecasts for Oslo?", ("get_weather", {"city": "oslo"})),
        ("What is ZZZZ trading at?", ("get_stock_price", {"symbol": "ZZZZZ"})),  # a slip
        ("Is it raining in New York?", ("get_weather", {"city": "NY"})),  # initials
        ("帮我查一下北京的天气", ("get_weather", {"city": "北京"})),  # no spaces between words
        ("Weather in California?", ("get_weather", {"city": "CA"})),  # short, and all there is
        ("Weather in San Diego?", ("get_weather", {"city": "San Diego, CA"})),
        ("Weather in Sacramento, CA?", ("get_weather", {"city": "Sacramento, CA"})),
    ],
)
async def test_values_said_in_other_words_are_not_made_up(
    question: str, call: tuple[str, dict[str, Any]]
) -> None:
    upstream = FakeUpstream([reply(call)])
    completion = await Engine(upstream, mode="force", registry=":memory:").acomplete(ask(question))
    assert [c.name for c in completion.tool_calls] == [call[0]]
    assert upstream.calls == 1


async def test_a_two_letter_word_does_not_ground_a_longer_value() -> None:
    """BFCL live_irrelevance_18-2-6 (Qwen2.5-Coder-1.5B): asked for a domain's CNAME records, it
    called the weather tool with its description's example, "San Francisco, CA". As an
    abbreviation, ``ca`` is in "can" and "cname"; the value's own words were never said."""
    question = "How can I obtain the CNAME records for the domain 'sample.com'? My key is 'k1'."
    example = reply(("get_weather", {"city": "San Francisco, CA"}))
    upstream = FakeUpstream([example, "I have no tool for DNS records."])
    completion = await Engine(upstream, mode="force", registry=":memory:").acomplete(ask(question))
    assert not completion.tool_calls
    assert completion.text == "I have no tool for DNS records."
    reask = upstream.history[1]["messages"][-1]["content"]
    assert "nothing in the conversation mentions city='San Francisco, CA'" in reask


async def test_a_forced_choice_is_not_second_guessed() -> None:
    upstream = FakeUpstream([LONDON])
    engine = Engine(upstream, mode="force", registry=":memory:")
    completion = await engine.acomplete(ask(GOLD, tool_choice="required"))
    assert [c.name for c in completion.tool_calls] == ["get_weather"]
    assert upstream.calls == 1


ROI = tool("calculate_roi", investment_amount={"type": "number"}, net_profit={"type": "number"})
EXAMPLE_COPY = reply(("calculate_roi", {"investment_amount": 1.5, "net_profit": 1.5}))


@pytest.mark.parametrize("stream", [False, True])
async def test_the_prompts_own_example_copied_is_reasked_then_answered(stream: bool) -> None:
    """BFCL irrelevance_71: asked for a profit margin with only an ROI tool, the model copies the
    example the prompt shows (1.5 for every number); re-asked, it answers in text."""
    upstream = FakeUpstream([EXAMPLE_COPY, "A 25% profit margin."])
    engine = Engine(upstream, mode="force", registry=":memory:")
    request = ask("Profit margin with revenue $200,000 and expenses $150,000?", tools=[ROI])
    names, _ = await run(engine, request, stream)
    assert names == []
    assert upstream.calls == 2
    reask = upstream.history[1]["messages"][-1]["content"]
    assert "calculate_roi(investment_amount=1.5, net_profit=1.5) is the example" in reask


@pytest.mark.parametrize("stream", [False, True])
async def test_the_example_copied_to_the_end_is_not_returned(stream: bool) -> None:
    upstream = FakeUpstream([EXAMPLE_COPY] * 3 + ["I can only compute ROI."])
    engine = Engine(upstream, mode="force", registry=":memory:")
    names, warnings = await run(engine, ask("Profit margin of ACME?", tools=[ROI]), stream)
    assert names == []
    assert any("is the example" in w for w in warnings)


async def test_example_values_the_user_gave_are_a_call() -> None:
    """add(a=1, b=1) is the add tool's example, and also what "1 + 1" means."""
    upstream = FakeUpstream([reply(("add", {"a": 1, "b": 1}))])
    engine = Engine(upstream, mode="force", registry=":memory:")
    names, _ = await run(engine, ask("What is 1 + 1?"), False)
    assert names == ["add"]
    assert upstream.calls == 1


async def test_a_forced_choice_takes_the_example_as_the_call() -> None:
    upstream = FakeUpstream([EXAMPLE_COPY])
    engine = Engine(upstream, mode="force", registry=":memory:")
    request = ask("Any ROI", tools=[ROI], tool_choice="required")
    names, _ = await run(engine, request, False)
    assert names == ["calculate_roi"]
    assert upstream.calls == 1


async def test_a_call_differing_from_the_example_is_not_a_copy() -> None:
    upstream = FakeUpstream([reply(("calculate_roi", {"investment_amount": 1.5, "net_profit": 2}))])
    engine = Engine(upstream, mode="force", registry=":memory:")
    names, _ = await run(engine, ask("ROI of 1.5 invested, 2 profit?", tools=[ROI]), False)
    assert names == ["calculate_roi"]
