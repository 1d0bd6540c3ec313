"""More calls by continuing the reply (:mod:`toolshim.engine.more_calls`): the model's calls
handed back as the start of its reply, then the opening of one more, kept only when it brings
a value the user said that no earlier call used. The scripted upstream answers as llama.cpp
does: the prefill first, then what the model wrote after it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.engine.helpers import called, emulating_engine
from toolshim.dialects import get_dialect
from toolshim.dialects.calls import ParsedCall
from toolshim.engine import Engine
from toolshim.engine.more_calls import MAX_CALLS, another_tool_asked_for, new_said_value
from toolshim.errors import UpstreamError
from toolshim.testing import FakeUpstream
from toolshim.types import ToolCall


def tool(name: str, **properties: Any) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": name,
            "parameters": {"type": "object", "properties": properties, "required": ["city"]}
            if "city" in properties
            else {"type": "object", "properties": properties},
        },
    }


TOOLS = [
    tool("get_weather", city={"type": "string"}, unit={"type": "string", "enum": ["c", "f"]}),
    tool("get_stock_price", symbol={"type": "string"}),
    tool("calculate_area", base={"type": "number"}, height={"type": "number"}),
]


def block(name: str, **arguments: Any) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


def continued(prefill_calls: list[str], name: str, **arguments: Any) -> str:
    """What llama.cpp answers to a continuation: the prefill, then the model's call."""
    head = "\n".join(prefill_calls) + '\n<tool_call>\n{"name": "'
    rest = json.dumps({"name": name, "arguments": arguments})[len('{"name": "') :]
    return head + rest + "\n</tool_call>"


def engine(upstream: FakeUpstream, *, prefill: bool = True, **options: Any) -> Engine:
    return emulating_engine(upstream, {"prefill": "yes"} if prefill else {}, **options)


def ask(question: str, **extra: Any) -> dict[str, Any]:
    return {
        "model": "m",
        "messages": [{"role": "user", "content": question}],
        "tools": TOOLS,
        **extra,
    }


async def calls_of(built: Engine, request: dict[str, Any], stream: bool) -> list[tuple[str, Any]]:
    if not stream:
        completion = await built.acomplete(request)
        assert completion.finish_reason == "tool_calls"
        return [(c.name, json.loads(c.arguments)) for c in completion.tool_calls]
    found: dict[int, list[str]] = {}
    finish = None
    async for chunk in built.astream({**request, "stream": True}):
        for delta in chunk.tool_calls:
            name_args = found.setdefault(delta.index, ["", ""])
            name_args[0] += delta.name or ""
            name_args[1] += delta.arguments or ""
        finish = chunk.finish_reason or finish
    assert finish == "tool_calls"
    return [(n, json.loads(a)) for n, a in found.values()]


PARIS = block("get_weather", city="Paris")
LONDON = block("get_weather", city="London")


@pytest.mark.parametrize("stream", [False, True])
async def test_one_call_where_the_user_asked_for_two_is_continued_to_two(stream: bool) -> None:
    upstream = FakeUpstream(
        [
            PARIS,
            continued([PARIS], "get_weather", city="London"),
        ]
    )
    calls = await calls_of(engine(upstream), ask("Weather in Paris and in London?"), stream)
    assert calls == [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "London"})]
    assert upstream.calls == 2  # both names taken: nothing more is asked for
    second = upstream.history[1]
    assert second["messages"][-1] == {
        "role": "assistant",
        "content": PARIS + '\n<tool_call>\n{"name": "',
    }
    assert second["max_tokens"] < 100 and not second.get("stream")  # bounded by the calls' size
    assert second["messages"][:-1] == upstream.history[0]["messages"]


@pytest.mark.parametrize(
    ("question", "continuation"),
    [
        ("Weather in Paris and Rome?", {"city": "Paris"}),  # the same call again
        ("Weather in Paris and Rome?", {"city": "London"}),  # a city nobody said
        ("Weather in Paris and Rome in celsius?", {"city": "Paris", "unit": "c"}),  # a key added
        ("Weather in Paris and Rome?", {"city": "..."}),  # a placeholder
        ("Weather in Paris and Rome?", {"town": "Rome"}),  # not the tool's schema
    ],
    ids=["repeat", "unsaid", "added-key", "placeholder", "invalid"],
)
async def test_a_continued_call_that_brings_nothing_the_user_said_is_dropped(
    question: str, continuation: dict[str, Any]
) -> None:
    upstream = FakeUpstream([PARIS, continued([PARIS], "get_weather", **continuation)])
    calls = await calls_of(engine(upstream), ask(question), False)
    assert calls == [("get_weather", {"city": "Paris"})]
    assert upstream.calls == 2


@pytest.mark.parametrize(
    "question",
    [
        "Weather in Paris?",
        "What's the weather like in Paris right now",
        "Weather at postcode 75001?",  # the number is the call's (a string)
    ],
)
async def test_a_question_that_asks_for_nothing_more_is_not_continued(question: str) -> None:
    """No list, no number and no tool named beyond the first call: no continued call could be
    kept, so none is asked for (it cost the 0.5B a request after each first call)."""
    first = block("get_weather", city="75001" if "75001" in question else "Paris")
    upstream = FakeUpstream([first, continued([first], "get_weather", city="London")])
    calls = await calls_of(engine(upstream), ask(question), False)
    assert [name for name, _ in calls] == ["get_weather"]
    assert upstream.calls == 1


@pytest.mark.parametrize(
    "question",
    ["Weather in Paris; Rome too", "Weather in Paris, Rome", "Weather in Paris or Rome?"],
)
async def test_a_question_that_lists_things_is_continued(question: str) -> None:
    first = block("get_weather", city="Paris")
    rome = continued([first], "get_weather", city="Rome")
    upstream = FakeUpstream([first, rome, ""])
    calls = await calls_of(engine(upstream), ask(question), False)
    assert calls == [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Rome"})]


async def test_another_tool_and_numbers_said_in_the_question_are_kept() -> None:
    area = block("calculate_area", base=12, height=15)
    upstream = FakeUpstream(
        [
            area,
            continued([area], "calculate_area", base=18, height=24),
            continued(
                [area, block("calculate_area", base=18, height=24)],
                "get_stock_price",
                symbol="NVDA",
            ),
            "",  # nothing more: the end
        ]
    )
    question = (
        "Areas of triangles with base 12, height 15 and base 18, height 24; and NVDA's price."
    )
    calls = await calls_of(engine(upstream), ask(question), False)
    assert calls == [
        ("calculate_area", {"base": 12, "height": 15}),
        ("calculate_area", {"base": 18, "height": 24}),
        ("get_stock_price", {"symbol": "NVDA"}),
    ]


@pytest.mark.parametrize(
    ("why", "built", "request_"),
    [
        ("the upstream does not continue", {"prefill": False}, ask("Paris and London?")),
        ("parallel calls off", {}, ask("Paris and London?", parallel_tool_calls=False)),
        (
            "a named tool is forced",
            {},
            ask(
                "Paris and London?",
                tool_choice={"type": "function", "function": {"name": "get_weather"}},
            ),
        ),
        ("the decision strategy", {"strategy": "decision"}, ask("Paris and London?")),
        ("a dialect that cannot", {"dialect": "pythonic"}, ask("Paris and London?")),
        (
            "a coding agent's focused turn, one step at a time",
            {"offer_tools": "get_weather"},
            ask("Paris and London?"),
        ),
    ],
    ids=lambda x: x if isinstance(x, str) else "",
)
async def test_not_tried_where_it_cannot_work(
    why: str, built: dict[str, Any], request_: dict[str, Any]
) -> None:
    reply = '[get_weather(city="Paris")]' if built.get("dialect") == "pythonic" else PARIS
    upstream = FakeUpstream([reply])
    calls = await calls_of(engine(upstream, **built), request_, False)
    assert calls == [("get_weather", {"city": "Paris"})], why
    assert upstream.calls == 1, why


async def test_not_tried_after_tool_results() -> None:
    """After results the model calls again on its own, a turn at a time."""
    upstream = FakeUpstream(["The weather in Paris is sunny. " + LONDON])
    request = ask("Weather in Paris and London?")
    request["messages"] += called("get_weather", '{"city": "Paris"}', "sunny")
    calls = await calls_of(engine(upstream), request, False)
    assert calls == [("get_weather", {"city": "London"})]
    assert upstream.calls == 1


async def test_the_callers_own_token_limit_is_the_one_bounded() -> None:
    upstream = FakeUpstream([PARIS, continued([PARIS], "get_weather", city="Paris")])
    request = ask("Weather in Paris and London?", max_completion_tokens=20)
    await calls_of(engine(upstream), request, False)
    continuation = upstream.history[1]
    assert continuation["max_completion_tokens"] == 20 and "max_tokens" not in continuation


async def test_a_failed_continuation_keeps_the_calls_in_hand() -> None:
    upstream = FakeUpstream([PARIS, UpstreamError("upstream hung up")])
    calls = await calls_of(engine(upstream), ask("Weather in Paris and London?"), False)
    assert calls == [("get_weather", {"city": "Paris"})]


async def test_a_reply_is_continued_to_at_most_max_calls() -> None:
    cities = [f"City{i}" for i in range(MAX_CALLS + 3)]
    blocks = [block("get_weather", city=c) for c in cities]
    script = [blocks[0]] + [
        continued(blocks[:i], "get_weather", city=cities[i]) for i in range(1, len(cities))
    ]
    upstream = FakeUpstream(script)
    calls = await calls_of(engine(upstream), ask("Weather in " + ", ".join(cities)), False)
    assert [a["city"] for _, a in calls] == cities[:MAX_CALLS]


def test_the_json_dialect_continues_its_tool_calls_list() -> None:
    dialect = get_dialect("json")
    paris = ToolCall("c0", "get_weather", '{"city": "Paris"}')
    prefill, opening = dialect.continuation([paris]) or ("", "")
    assert (
        prefill
        == '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "'
    )
    written = 'get_weather", "arguments": {"city": "London"}}]}'
    [call] = dialect.parse(opening + written, []).calls
    assert (call.name, call.arguments) == ("get_weather", {"city": "London"})


async def test_the_json_dialect_is_continued_too() -> None:
    first = json.dumps({"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]})
    prefill = '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "'
    upstream = FakeUpstream(
        [
            first,
            prefill + 'get_weather", "arguments": {"city": "London"}}]}',
            prefill + 'get_weather", "arguments": {"city": "Paris"}}]}',
        ]
    )
    calls = await calls_of(engine(upstream, dialect="json"), ask("Paris and London weather"), False)
    assert [a["city"] for _, a in calls] == ["Paris", "London"]


# -- the rule itself ------------------------------------------------------------------------


def parsed(name: str, **arguments: Any) -> ParsedCall:
    return ParsedCall(name, arguments)


@pytest.mark.parametrize(
    ("call", "earlier", "said", "kept"),
    [
        (parsed("f", city="London"), [parsed("f", city="Paris")], "paris and london", True),
        (parsed("f", city="london"), [parsed("f", city="London")], "paris and london", False),
        (parsed("f", city="Lon"), [parsed("f", city="Paris")], "paris and london", False),
        (parsed("f", n=1500), [parsed("f", n=10)], "10 and 1,500 units", True),
        (parsed("f", n=2), [parsed("f", n=1)], "1 or 1.2", False),
        (parsed("f", flag=True), [parsed("f", flag=False)], "true or false", False),
        (parsed("f", items=["b"]), [parsed("f", items=["a"])], "a then b", False),  # 1 letter
        (parsed("f", items=["bb"]), [parsed("f", items=["aa"])], "aa then bb", True),
        (parsed("g", city="Paris"), [parsed("f", city="Paris")], "paris", False),
        (parsed("f", city="Boston"), [parsed("f", city="Boston, MA")], "boston, ma", False),
        (parsed("g", a="talkative", b="talkative"), [parsed("f", x=1)], "i am talkative", False),
        (parsed("g", a="talkative"), [parsed("f", talkative=True)], "i am talkative", False),
        (parsed("g", a="lazy"), [parsed("f", talkative=True)], "talkative and lazy", True),
        (parsed("f", city="Boston, MA"), [parsed("f", city="Boston")], "boston, ma", False),
        (
            parsed("f", city="New Jersey"),
            [parsed("f", city="New York")],
            "new york, new jersey",
            True,
        ),
        (parsed("f", city="Paris", unit="c"), [parsed("f", city="Paris")], "paris in c", False),
    ],
)
def test_a_new_value_must_be_said_and_unused(
    call: ParsedCall, earlier: list[ParsedCall], said: str, kept: bool
) -> None:
    assert new_said_value(call, earlier, said) is kept


@given(st.dictionaries(st.sampled_from("abc"), st.text(max_size=8) | st.integers(), max_size=3))
def test_a_call_never_brings_something_new_to_itself(arguments: dict[str, Any]) -> None:
    call = parsed("f", **arguments)
    said = " ".join(str(v) for v in arguments.values()).lower()
    assert not new_said_value(call, [call], said)


GRADES = {"grades": {"Math": 85, "Art": 89}}


@pytest.mark.parametrize(
    ("call", "earlier", "said", "kept"),
    [
        # the same values, another tool the user named
        (
            parsed("calculate_standard_deviation", **GRADES),
            [parsed("calculate_average", **GRADES)],
            "the average and the standard deviation of math 85, art 89",
            True,
        ),
        (
            parsed("scienceFacts_getDiameter", particle="Proton"),
            [parsed("scienceFacts_getWeight", particle="Proton")],
            "the weights of a proton; also the diameter of a proton",
            True,
        ),
        # another tool nobody named (the 0.5B on BFCL multiple_60 and multiple_176)
        (
            parsed("movie_showtimes", location="New York City"),
            [parsed("humidity_forecast", location="New York City")],
            "find the humidity forecast for new york city",
            False,
        ),
        (
            parsed("find_card_in_deck", rank="Ace"),
            [parsed("sports_team_get_schedule", team="Man Utd")],
            "find the next games of man utd",
            False,
        ),
        # a tool already called, or one string in several parameters
        (
            parsed("calculate_average", grades={"Math": 1}),
            [parsed("calculate_average", **GRADES)],
            "the average",
            False,
        ),
        (
            parsed("mbti_analyse", a="talkative", b="talkative"),
            [parsed("five_factor", talkative=True)],
            "mbti analyse: i am talkative",
            False,
        ),
    ],
)
def test_another_tool_is_kept_when_the_user_named_it(
    call: ParsedCall, earlier: list[ParsedCall], said: str, kept: bool
) -> None:
    assert another_tool_asked_for(call, earlier, said) is kept


async def test_two_tools_on_the_same_values_are_both_called() -> None:
    average = '<tool_call>\n{"name": "calculate_area", "arguments": {"base": 3, "height": 4}}\n</tool_call>'
    upstream = FakeUpstream([average, continued([average], "get_stock_price", symbol="3"), ""])
    calls = await calls_of(
        engine(upstream), ask("Area for base 3, height 4, and the stock price of 3"), False
    )
    assert [name for name, _ in calls] == ["calculate_area", "get_stock_price"]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_continued_call_that_needs_the_first_result_waits(stream: bool) -> None:
    """ "Find the price, then the weather there": the continuation writes a call with a city
    nobody said; it is not added, and the reply ends (engine.checks.ordered_steps)."""
    aapl = block("get_stock_price", symbol="AAPL")
    upstream = FakeUpstream([aapl, continued([aapl], "get_weather", city="Cupertino")])
    question = "Get the AAPL price, then the weather where the company is based."
    calls = await calls_of(engine(upstream), ask(question), stream)
    assert calls == [("get_stock_price", {"symbol": "AAPL"})]
    assert upstream.calls == 2
