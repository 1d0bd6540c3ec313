"""A step the model planned and toolshim held back is asked for once its inputs are in
(toolshim.engine.plans): the 1.5B wrote find_user and list_orders(user_id="12345") together,
then, given the id, answered with it instead of listing the orders."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolshim.capabilities.facts import Source
from toolshim.capabilities.registry import Registry
from toolshim.engine import Engine
from toolshim.engine.plans import PlanMemory, failed_steps
from toolshim.testing import FunctionUpstream, prefilling
from toolshim.testing.tools import function_tool
from toolshim.types import Message, ToolCall

QUESTION = "Which orders does alice have?"
TOOLS = [
    function_tool("find_user", "Find a customer's user id by username", username="string"),
    function_tool("list_orders", "List the order ids of a user id", user_id="string"),
    function_tool("get_weather", "The weather in a city", city="string"),
]
PLAN = '[find_user(username="alice"), list_orders(user_id="12345")]'
ANSWER = "alice has the user id u-17."


def model(first: str, answer: str, continued: str, seen: list[dict[str, Any]]) -> Any:
    """A llama.cpp-like model: ``first`` to the question, ``answer`` once a result is in, and
    ``continued`` after an assistant message it is handed to continue."""

    def reply(body: dict[str, Any]) -> str:
        seen.append(body)
        last = body["messages"][-1]
        if last["role"] == "assistant":
            return last["content"] + continued
        text = json.dumps(body["messages"])
        return answer if "u-17" in text or "unknown" in text else first

    return reply


def engine_for(upstream: FunctionUpstream, *, prefill: bool = True) -> Engine:
    engine = Engine(upstream, mode="force", dialect="pythonic", registry=Registry())
    if prefill:
        engine.registry.learn(upstream.key, "small", "prefill", "yes", Source.UPSTREAM)
    return engine


async def first_step(engine: Engine, stream: bool) -> tuple[dict[str, Any], list[ToolCall]]:
    body: dict[str, Any] = {
        "model": "small",
        "messages": [{"role": "user", "content": QUESTION}],
        "tools": TOOLS,
    }
    if stream:
        parts: dict[int, list[str]] = {}
        async for chunk in engine.astream({**body, "stream": True}):
            for d in chunk.tool_calls:
                part = parts.setdefault(d.index, ["", "", ""])
                part[0] += d.id or ""
                part[1] += d.name or ""
                part[2] += d.arguments or ""
        calls = [ToolCall(*parts[i]) for i in sorted(parts)]
    else:
        calls = list((await engine.acomplete(body)).message.tool_calls)
    return body, calls


def after(body: dict[str, Any], calls: list[ToolCall], result: str) -> dict[str, Any]:
    assistant = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"client_{i}",  # a client may rename the ids
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            }
            for i, c in enumerate(calls)
        ],
    }
    tool = {"role": "tool", "tool_call_id": "client_0", "content": result}
    return {**body, "messages": [*body["messages"], assistant, tool]}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_the_held_back_step_is_asked_for_once_its_input_is_in(stream: bool) -> None:
    seen: list[dict[str, Any]] = []
    upstream = FunctionUpstream(model(PLAN, ANSWER, 'u-17")]', seen))
    engine = engine_for(upstream)
    body, calls = await first_step(engine, stream)
    assert [c.name for c in calls] == ["find_user"]  # list_orders held back: "12345" is nobody's
    second = after(body, calls, '{"user_id": "u-17"}')
    completion = await engine.acomplete(second)
    made = completion.message.tool_calls
    assert [(c.name, json.loads(c.arguments)) for c in made] == [
        ("list_orders", {"user_id": "u-17"})
    ]
    # Opened as the planned tool's call, up to the value of its first required string.
    assert seen[-1]["messages"][-1] == {"role": "assistant", "content": '[list_orders(user_id="'}
    assert any("held back from its plan" in w for w in completion.meta.warnings)
    # Taken: the third request (its result in) is answered as the model answers.
    third = after(second, list(made), '["1001", "1003"]')
    third["messages"] = [*second["messages"], *third["messages"][len(second["messages"]) :]]
    final = await engine.acomplete(third)
    assert final.message.text == ANSWER and not final.message.tool_calls


async def test_a_streamed_answer_is_held_until_the_step_is_known() -> None:
    seen: list[dict[str, Any]] = []
    upstream = FunctionUpstream(model(PLAN, ANSWER, 'u-17")]', seen))
    engine = engine_for(upstream)
    body, calls = await first_step(engine, False)
    chunks = [c async for c in engine.astream({**after(body, calls, "u-17"), "stream": True})]
    assert "u-17." not in "".join(c.content or "" for c in chunks)
    assert [d.name for c in chunks for d in c.tool_calls if d.name] == ["list_orders"]


@pytest.mark.parametrize(
    ("result", "continued", "prefill"),
    [
        ("error: unknown user alice", 'u-17")]', True),  # a step failed
        ('{"user_id": "u-17"}', 'carol")]', True),  # a value nobody gave
        ('{"user_id": "u-17"}', 'u-17")]', False),  # no assistant continuation
    ],
    ids=["after-an-error", "made-up-value", "no-prefill"],
)
async def test_the_answer_stands_where_the_step_cannot_be_taken(
    result: str, continued: str, prefill: bool
) -> None:
    seen: list[dict[str, Any]] = []
    upstream = FunctionUpstream(model(PLAN, ANSWER, continued, seen))
    engine = engine_for(upstream, prefill=prefill)
    body, calls = await first_step(engine, False)
    completion = await engine.acomplete(after(body, calls, result))
    assert completion.message.text == ANSWER and not completion.message.tool_calls


async def test_another_engine_did_not_see_the_plan() -> None:
    """The memory is the engine's: a replica that did not hold the step back answers as the
    model does (nothing is asked for that the conversation does not show)."""
    seen: list[dict[str, Any]] = []
    upstream = FunctionUpstream(model(PLAN, ANSWER, 'u-17")]', seen))
    body, calls = await first_step(engine_for(upstream), False)
    completion = await engine_for(upstream).acomplete(after(body, calls, "u-17"))
    assert completion.message.text == ANSWER


def conversation(*calls: tuple[str, str], result: str = "ok") -> list[Message]:
    messages = [Message("system", "be brief"), Message("user", QUESTION)]
    for i, (name, arguments) in enumerate(calls):
        messages.append(Message("assistant", "", tool_calls=(ToolCall(f"c{i}", name, arguments),)))
        messages.append(Message("tool", result, tool_call_id=f"c{i}"))
    return messages


def test_pending_steps_follow_the_conversation() -> None:
    memory = PlanMemory()
    start = conversation()
    memory.remember(start, [("find_user", '{"username": "alice"}')], ["list_orders", "lookup"])
    # The reply that held them back, answered (arguments compared as JSON, not as text).
    step1 = conversation(("find_user", '{"username":"alice"}'))
    assert memory.pending(step1) == ("list_orders", "lookup")
    step2 = conversation(("find_user", '{"username":"alice"}'), ("list_orders", '{"user_id":"u"}'))
    assert memory.pending(step2) == ("lookup",)
    # Another question, other calls, or a failed step: nothing is pending.
    other = [Message("user", "Which orders does bob have?"), *step1[2:]]
    assert memory.pending(other) == ()
    assert memory.pending(conversation(("find_user", '{"username": "bob"}'))) == ()
    failed = conversation(("find_user", '{"username": "alice"}'), result="error: no such user")
    assert memory.pending(failed) == ()
    # A new user message after the plan starts a new request.
    assert memory.pending([*step1, Message("user", "thanks")]) == ()
    # Nothing is remembered for a name that was returned, or without a returned call.
    memory.remember(start, [], ["list_orders"])
    memory.remember(start, [("x", "{}")], ["x"])
    assert len(memory) == 1


def test_the_memory_is_bounded() -> None:
    memory = PlanMemory(size=2)
    for i in range(5):
        memory.remember([Message("user", f"q{i}")], [("a", "{}")], ["b"])
    assert len(memory) == 2
    assert memory.pending([Message("user", "q4"), conversation(("a", "{}"))[2]]) == ("b",)
    assert memory.pending([Message("user", "q0"), conversation(("a", "{}"))[2]]) == ()


def calls_and_results(*steps: tuple[tuple[str, str], ...], results: list[str]) -> list[Message]:
    """The question, then each step's calls and their results (``results`` in call order)."""
    messages = [Message("user", QUESTION)]
    made = 0
    for calls in steps:
        tool_calls = tuple(
            ToolCall(f"c{made + i}", name, arguments) for i, (name, arguments) in enumerate(calls)
        )
        messages.append(Message("assistant", "", tool_calls=tool_calls))
        for call in tool_calls:
            messages.append(Message("tool", results[made], tool_call_id=call.id))
            made += 1
    return messages


CAPITAL = ("get_capital", '{"country": "Egypt"}')
WEATHER = ("get_weather", '{"city": "Egypt"}')


@pytest.mark.parametrize(
    ("steps", "results", "left"),
    [
        # Written together: the capital came back, the weather of "Egypt" failed.
        (((CAPITAL, WEATHER),), ["Cairo", "error: unknown city"], ("get_weather",)),
        # The lookup made after the failed call.
        (((WEATHER,), (CAPITAL,)), ["error: unknown city", "Cairo"], ("get_weather",)),
        # Nothing came back after it: the error is the answer.
        (((WEATHER,),), ["error: unknown city"], ()),
        (((CAPITAL,), (WEATHER,)), ["Cairo", "error: unknown city"], ()),
        # Called again and it worked.
        (((WEATHER,), (CAPITAL,), (WEATHER,)), ["error: no", "Cairo", "35 C"], ()),
    ],
    ids=["together", "lookup-after", "nothing-after", "failed-last", "worked-later"],
)
def test_a_failed_step_is_left_when_a_later_result_may_give_its_input(
    steps: tuple[tuple[tuple[str, str], ...], ...], results: list[str], left: tuple[str, ...]
) -> None:
    assert failed_steps(calls_and_results(*steps, results=results)) == left


def weather_model(continued: str, seen: list[dict[str, Any]]) -> Any:
    return prefilling("The capital of Egypt is Cairo.", continued, seen)


WEATHER_TOOLS = [
    function_tool("get_capital", country="string"),
    function_tool("get_weather", city="string"),
]


@pytest.mark.parametrize(
    ("continued", "expected"),
    [('Cairo")]', [("get_weather", {"city": "Cairo"})]), ('Egypt")]', [])],
    ids=["with-the-result", "the-failed-call-again"],
)
async def test_a_step_that_failed_before_its_input_is_asked_for_again(
    continued: str, expected: list[tuple[str, Any]]
) -> None:
    seen: list[dict[str, Any]] = []
    engine = engine_for(FunctionUpstream(weather_model(continued, seen)))
    messages = calls_and_results((CAPITAL, WEATHER), results=["Cairo", "error: unknown city"])
    body = {
        "model": "small",
        "messages": [message_dict(m) for m in messages],
        "tools": WEATHER_TOOLS,
    }
    completion = await engine.acomplete(body)
    made = [(c.name, json.loads(c.arguments)) for c in completion.message.tool_calls]
    assert made == expected
    # Opened at once, before the model is asked anything (toolshim.engine.next_step.planned_first).
    assert seen[0]["messages"][-1]["content"] == '[get_weather(city="'
    if not expected:
        # Opened in vain: the model's reply is asked for, and not opened again; it says nothing
        # of the failed call, so it is asked for again (toolshim.engine.unreported).
        assert [m["messages"][-1]["role"] for m in seen] == ["assistant", "user", "user"]
        assert completion.message.text == "The capital of Egypt is Cairo."


def message_dict(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.text}
    if message.tool_calls:
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in message.tool_calls
            ],
        }
    return {"role": message.role, "content": message.text}


STOCK_TOOLS = [
    function_tool("get_stock_price", symbol="string"),
    function_tool(
        "convert_currency", amount="number", from_currency="string", to_currency="string"
    ),
]


async def test_a_call_written_as_an_argument_goes_first_and_the_other_waits() -> None:
    """The 1.5B's two steps in one: convert_currency(amount=get_stock_price("TSLA"), …)."""
    nested = (
        '[convert_currency(amount=get_stock_price("TSLA"), from_currency="USD", to_currency="BTC")]'
    )
    seen: list[dict[str, Any]] = []

    def reply(body: dict[str, Any]) -> str:
        seen.append(body)
        last = body["messages"][-1]
        if last["role"] == "assistant":
            return last["content"] + '251.4, from_currency="USD", to_currency="BTC")]'
        return "One TSLA share costs 251.4 USD." if "251.4" in json.dumps(body) else nested

    engine = engine_for(FunctionUpstream(reply))
    body: dict[str, Any] = {
        "model": "small",
        "messages": [{"role": "user", "content": "What does one TSLA share cost in BTC?"}],
        "tools": STOCK_TOOLS,
    }
    first = await engine.acomplete(body)
    made = first.message.tool_calls
    assert [(c.name, json.loads(c.arguments)) for c in made] == [
        ("get_stock_price", {"symbol": "TSLA"})
    ]
    assert any("waits for that result" in w for w in first.meta.warnings)
    second = await engine.acomplete(after(body, list(made), "TSLA: 251.4 USD"))
    assert [(c.name, json.loads(c.arguments)) for c in second.message.tool_calls] == [
        ("convert_currency", {"amount": 251.4, "from_currency": "USD", "to_currency": "BTC"})
    ]
    # Its first required parameter is a number: opened up to the call's arguments.
    assert seen[-1]["messages"][-1]["content"] == "[convert_currency("


@pytest.mark.parametrize(
    ("answer", "continued", "expected"),
    [
        (
            'To get the weather for Tokyo, you can call the `get_weather` function with the city name "Tokyo".',
            'Tokyo")]',
            [("get_weather", {"city": "Tokyo"})],
        ),
        # Its values must have been said: Lima was not.
        ("You can use get_weather(city) for that.", 'Lima")]', []),
        # An answer that names no tool as a call stands, without another request.
        ("Have a great trip!", 'Tokyo")]', []),
    ],
    ids=["named", "made-up", "not-named"],
)
async def test_an_answer_that_tells_the_user_to_call_a_tool_is_opened_as_that_call(
    answer: str, continued: str, expected: list[tuple[str, Any]]
) -> None:
    turns = ("I'm flying to Tokyo tomorrow.", "Have a great trip to Tokyo!")
    question = "What's the weather like where I'm going?"
    seen = await answered_later(TOOLS, turns, question, answer, continued, expected)
    assert len(seen) == (1 if answer == "Have a great trip!" else 2)


async def answered_later(
    tools: list[dict[str, Any]],
    turns: tuple[str, str],
    question: str,
    answer: str,
    continued: str,
    expected: list[tuple[str, Any]],
) -> list[dict[str, Any]]:
    """A later ``question`` (after ``turns``: a request and its answer) that the model answers
    with ``answer``, continuing an opened call with ``continued``: the calls made must be
    ``expected``, and without any the answer stands. The upstream's bodies, in order."""
    seen: list[dict[str, Any]] = []
    engine = engine_for(FunctionUpstream(prefilling(answer, continued, seen)))
    body = {
        "model": "small",
        "tools": tools,
        "messages": [
            {"role": "user", "content": turns[0]},
            {"role": "assistant", "content": turns[1]},
            {"role": "user", "content": question},
        ],
    }
    completion = await engine.acomplete(body)
    made = [(c.name, json.loads(c.arguments)) for c in completion.message.tool_calls]
    assert made == expected
    if not expected:
        assert completion.message.text == answer
    return seen


@pytest.mark.parametrize(
    ("lookup", "opening"),
    [
        ('{"country": "Egypt", "capital": "Cairo"}', '[get_weather(city="Cairo'),
        # Two new strings: which one is meant is the model's to say.
        ('{"country": "Egypt", "capital": "Cairo", "largest": "Giza"}', '[get_weather(city="'),
        ("The capital of Egypt is Cairo", '[get_weather(city="'),  # not JSON
    ],
    ids=["one-new-value", "two-new-values", "text"],
)
async def test_the_value_a_failed_step_lacked_is_written_for_the_model(
    lookup: str, opening: str
) -> None:
    """The 0.5B, handed {"city": " after get_capital("Egypt") gave Cairo, wrote Egypt again."""
    seen: list[dict[str, Any]] = []
    engine = engine_for(FunctionUpstream(weather_model('")]', seen)))
    messages = calls_and_results((CAPITAL, WEATHER), results=[lookup, "error: unknown city"])
    body = {
        "model": "small",
        "messages": [message_dict(m) for m in messages],
        "tools": WEATHER_TOOLS,
    }
    completion = await engine.acomplete(body)
    assert seen[0]["messages"][-1]["content"] == opening
    made = [(c.name, json.loads(c.arguments)) for c in completion.message.tool_calls]
    if opening.endswith("Cairo"):
        assert made == [("get_weather", {"city": "Cairo"})]
    else:
        assert made == []  # it wrote `")]`: a call with an empty city, not a new call


SHELL_TOOLS = [
    function_tool("ls", "List the current directory's files", a="boolean"),
    function_tool("cd", "Change the current directory", folder="string"),
]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        # The 1.5B, asked in BFCL's multi-turn to list a folder "using the terminal interface".
        (
            "To display all the files, hidden ones too, you can use the `ls` command in the "
            "terminal: `ls -a`.",
            [("ls", {"a": True})],
        ),
        # A name of two letters is named only as code: "use cd" is not a call of cd.
        ("You could use cd to go there, and ls to look around.", []),
        ("Calls and lists are fine.", []),
    ],
    ids=["code", "prose", "letters"],
)
async def test_a_short_tool_name_counts_only_as_code(
    answer: str, expected: list[tuple[str, Any]]
) -> None:
    turns = ("Make a folder named notes.", "Done.")
    question = "Show every file in this folder, hidden ones too."
    seen = await answered_later(SHELL_TOOLS, turns, question, answer, "a=True)]", expected)
    assert len(seen) == (2 if expected else 1)
