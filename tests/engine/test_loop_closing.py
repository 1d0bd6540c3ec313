"""What makes an emulated tool loop close: results folded, repeats and placeholders re-asked,
loops of identical calls read as one call, a default max_tokens, stop sequences."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolshim.engine import Engine
from toolshim.engine.checks.placeholders import is_placeholder
from toolshim.errors import ToolCallError
from toolshim.testing import FakeUpstream, Reply

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def body(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": list(messages), "tools": [WEATHER], **extra}


USER = {"role": "user", "content": "What's the weather in Paris?"}
STEP_LEFT = {"role": "user", "content": "What's the weather in Paris? And in Rome?"}
"""A question its result leaves a step of (Rome's weather): the tools are offered again after
Paris's result (:mod:`toolshim.engine.answer_first`)."""
CALLED = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "c1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
        }
    ],
}
RESULT = {"role": "tool", "tool_call_id": "c1", "content": "18°C and sunny in Paris"}


async def answer(engine: Engine, request: dict[str, Any], stream: bool) -> tuple[str, list[Any]]:
    if not stream:
        completion = await engine.acomplete(request)
        return completion.text, [(c.name, c.arguments) for c in completion.tool_calls]
    text, calls = "", {}
    async for chunk in engine.astream({**request, "stream": True}):
        text += chunk.content or ""
        for delta in chunk.tool_calls:
            entry = calls.setdefault(delta.index, ["", ""])
            entry[0] += delta.name or ""
            entry[1] += delta.arguments or ""
    return text, [tuple(v) for v in calls.values()]


async def calls_and_warnings(
    engine: Engine, request: dict[str, Any], stream: bool
) -> tuple[list[Any], list[str] | None]:
    """The calls of the answer, and its warnings when it came whole (None when streamed)."""
    if stream:
        return (await answer(engine, request, stream))[1], None
    completion = await engine.acomplete(request)
    assert completion.meta is not None
    return [(c.name, c.arguments) for c in completion.tool_calls], completion.meta.warnings


@pytest.mark.parametrize("dialect", ["json", "hermes", "pythonic", "compact", "windlass"])
async def test_results_are_folded_into_the_question_with_what_to_do_now(dialect: str) -> None:
    upstream = FakeUpstream(["It is 18°C and sunny in Paris."])
    engine = Engine(upstream, mode="force", dialect=dialect, registry=":memory:")
    text, calls = await answer(engine, body(STEP_LEFT, CALLED, RESULT), stream=False)
    assert text == "It is 18°C and sunny in Paris." and calls == []
    sent = upstream.history[0]["messages"]
    assert [m["role"] for m in sent] == ["system", "user"]
    last = sent[-1]["content"]
    assert last.startswith("What's the weather in Paris?")
    assert 'You called get_weather(city="Paris"); it returned:\n18°C and sunny in Paris' in last
    assert "never repeat a call whose result you already have" in last


async def test_an_emulated_request_gets_a_default_cap_and_the_dialects_stop_sequence() -> None:
    upstream = FakeUpstream(
        ['<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'] * 3
    )
    engine = Engine(upstream, mode="force", dialect="hermes", registry=":memory:")
    await engine.acomplete(body(USER))
    assert upstream.history[0]["max_tokens"] == 1024
    assert upstream.history[0]["stop"] == ["<tool_response>"]
    await engine.acomplete(body(USER, max_tokens=50, stop="END"))
    assert upstream.history[1]["max_tokens"] == 50
    assert upstream.history[1]["stop"] == ["END", "<tool_response>"]
    capless = Engine(
        upstream, mode="force", dialect="hermes", registry=":memory:", default_max_tokens=None
    )
    await capless.acomplete(body(USER))
    assert "max_tokens" not in upstream.history[2]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_loop_of_one_call_cut_by_max_tokens_is_that_call(stream: bool) -> None:
    one = '{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
    looped = one * 6 + '{"name": "get_weather", "'
    upstream = FakeUpstream([Reply(looped, finish_reason="length")])
    engine = Engine(upstream, mode="force", dialect="hermes", registry=":memory:")
    _, calls = await answer(engine, body(USER), stream)
    assert calls == [("get_weather", '{"city": "Paris"}')]
    assert upstream.calls == 1


@pytest.mark.parametrize("stream", [False, True])
async def test_placeholder_arguments_are_reasked(stream: bool) -> None:
    placeholder = '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "..."}}]}'
    real = '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Lima"}}]}'
    upstream = FakeUpstream([placeholder, real])
    engine = Engine(upstream, mode="force", registry=":memory:")
    _, calls = await answer(engine, body(USER, tool_choice="required"), stream)
    assert calls == [("get_weather", '{"city": "Lima"}')]
    reask = upstream.history[1]["messages"][-1]["content"]
    assert "placeholders, not values: city='...'" in reask


async def test_placeholders_to_the_end_fail_a_required_choice() -> None:
    placeholder = '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "<city>"}}]}'
    engine = Engine(FakeUpstream([placeholder] * 3), mode="force", registry=":memory:")
    with pytest.raises(ToolCallError, match="placeholders"):
        await engine.acomplete(
            body({"role": "user", "content": "Tell me a joke"}, tool_choice="required")
        )


@pytest.mark.parametrize("stream", [False, True])
async def test_an_argument_the_schema_does_not_declare_is_dropped_with_a_warning(
    stream: bool,
) -> None:
    made_up = (
        '{"tool_calls": [{"name": "get_weather", "arguments": '
        '{"city": "Paris", "required": ["city"], "forecast": "sunny"}}]}'
    )
    upstream = FakeUpstream([made_up])
    engine = Engine(upstream, mode="force", registry=":memory:")
    calls, warnings = await calls_and_warnings(engine, body(USER), stream)
    if warnings is not None:
        assert any(
            "dropped argument(s) 'required', 'forecast' of 'get_weather'" in w for w in warnings
        )
    assert calls == [("get_weather", '{"city": "Paris"}')]
    assert upstream.calls == 1


@pytest.mark.parametrize("stream", [False, True])
async def test_a_misspelt_required_argument_is_still_reasked(stream: bool) -> None:
    misspelt = '{"tool_calls": [{"name": "get_weather", "arguments": {"town": "Paris"}}]}'
    real = '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}'
    upstream = FakeUpstream([misspelt, real])
    engine = Engine(upstream, mode="force", registry=":memory:")
    _, calls = await answer(engine, body(USER), stream)
    assert calls == [("get_weather", '{"city": "Paris"}')]
    assert "city" in upstream.history[1]["messages"][-1]["content"]


RATIO = {
    "type": "function",
    "function": {
        "name": "financial_ratios_interest_coverage",
        "parameters": {
            "type": "object",
            "properties": {
                "company_name": {"type": "string"},
                "years": {"type": "integer"},
                "first_name": {"type": "string"},
                "last_name": {"type": "string"},
            },
            "required": ["company_name", "years"],
        },
    },
}
XYZ = {"role": "user", "content": "Interest coverage of XYZ over 3 years?"}


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    ("written", "expected", "warning"),
    [
        # The 1.5B on BFCL's parallel_multiple_22: `company` for `company_name`, twice.
        ({"company": "XYZ", "years": 3}, {"company_name": "XYZ", "years": 3}, "'company' to"),
        ({"companyName": "XYZ", "years": 3}, {"company_name": "XYZ", "years": 3}, "'companyName'"),
        (
            {"company_name": "XYZ", "num_years": 3},
            {"company_name": "XYZ", "years": 3},
            "'num_years'",
        ),
        # `name` fits first_name, last_name and company_name: not guessed, dropped.
        (
            {"name": "XYZ", "company_name": "XYZ", "years": 3},
            {"company_name": "XYZ", "years": 3},
            "dropped",
        ),
    ],
)
async def test_an_undeclared_argument_that_names_one_missing_parameter_is_renamed(
    stream: bool, written: dict[str, Any], expected: dict[str, Any], warning: str
) -> None:
    reply = json.dumps(
        {"tool_calls": [{"name": "financial_ratios.interest_coverage", "arguments": written}]}
    )
    upstream = FakeUpstream([reply])
    engine = Engine(upstream, mode="force", registry=":memory:")
    request = {"model": "m", "messages": [XYZ], "tools": [RATIO]}
    calls, warnings = await calls_and_warnings(engine, request, stream)
    if warnings is not None:
        assert any(warning in w for w in warnings), warnings
    # The name as BFCL's original, dotted: the offered tool it folds to.
    assert calls == [("financial_ratios_interest_coverage", json.dumps(expected))]
    assert upstream.calls == 1


async def test_a_misspelling_that_fits_no_parameter_is_not_renamed() -> None:
    """`town` is not `city` by its words: the call lacks `city` and is re-asked."""
    misspelt = '{"tool_calls": [{"name": "get_weather", "arguments": {"town": "Paris"}}]}'
    upstream = FakeUpstream([misspelt, misspelt, misspelt])
    engine = Engine(upstream, mode="force", registry=":memory:")
    with pytest.raises(ToolCallError, match="city"):
        await engine.acomplete(body(USER, tool_choice="required"))


async def test_extra_arguments_pass_where_the_schema_allows_them() -> None:
    open_tool = {
        "type": "function",
        "function": {
            "name": "log",
            "parameters": {
                "type": "object",
                "properties": {"msg": {"type": "string"}},
                "additionalProperties": True,
            },
        },
    }
    reply = '{"tool_calls": [{"name": "log", "arguments": {"msg": "hi", "level": 3}}]}'
    upstream = FakeUpstream([reply])
    engine = Engine(upstream, mode="force", registry=":memory:")
    say_hi = {"role": "user", "content": "Log hi at level 3."}
    completion = await engine.acomplete({"model": "m", "messages": [say_hi], "tools": [open_tool]})
    assert [c.name for c in completion.tool_calls] == ["log"] and upstream.calls == 1


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("...", True),
        ("…", True),
        ("", True),
        ("<city>", True),
        ("{city}", True),
        ("string", True),
        ("city", True),
        ("your_city", True),
        ("Paris", False),
        ("São Paulo", False),
        ("...and more", False),
        (3, False),
    ],
)
def test_placeholders(value: Any, expected: bool) -> None:
    assert is_placeholder(value, "city") is expected


async def test_a_tool_that_declares_no_parameters_takes_what_it_is_given() -> None:
    bare = {"type": "function", "function": {"name": "get_weather"}}
    reply = '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}'
    upstream = FakeUpstream([reply])
    engine = Engine(upstream, mode="force", registry=":memory:")
    completion = await engine.acomplete({"model": "m", "messages": [USER], "tools": [bare]})
    assert [c.arguments for c in completion.tool_calls] == ['{"city": "Paris"}']
    assert upstream.calls == 1


async def test_a_request_after_results_stops_where_an_answered_call_is_written_again() -> None:
    upstream = FakeUpstream(["It is 18°C in Paris."])
    engine = Engine(upstream, mode="force", dialect="hermes", registry=":memory:")
    await engine.acomplete(body(STEP_LEFT, CALLED, RESULT))
    assert upstream.history[0]["stop"] == [
        "<tool_response>",
        '}\n{"name": "get_weather", "arguments": {"city": "Paris"}}',
        '}\n\n{"name": "get_weather", "arguments": {"city": "Paris"}}',
    ]


async def test_a_reply_cut_by_the_repeat_stop_keeps_its_call() -> None:
    cut = '{"name": "get_weather", "arguments": {"city": "Paris"}'  # the stop took the last brace
    upstream = FakeUpstream([cut, cut, "It is 18°C and sunny in Paris."])
    engine = Engine(upstream, mode="force", dialect="hermes", registry=":memory:")
    completion = await engine.acomplete(body(STEP_LEFT, CALLED, RESULT))
    assert completion.text == "It is 18°C and sunny in Paris."
    assert upstream.calls == 3  # the repeat, its re-ask, the answer from the results


@pytest.mark.parametrize("stream", [False, True])
async def test_a_call_shaped_reply_with_a_name_no_tool_has_is_reasked_not_shown(
    stream: bool,
) -> None:
    """Asked something no tool fits, the 0.5B wrote ``{"name": "thank you", "arguments": …}``:
    the shape of a call, with a name no tool could have. It is re-asked as an unknown tool,
    never sent to the user as text."""
    spoken = '{"name": "thank you", "arguments": {"message": "..."}}'
    upstream = FakeUpstream([spoken, "Gracias."])
    engine = Engine(upstream, mode="force", dialect="hermes", registry=":memory:")
    question = {"role": "user", "content": "How do you say 'thank you' in Spanish?"}
    text, calls = await answer(engine, body(question), stream)
    assert (text, calls) == ("Gracias.", [])
    reask = upstream.history[1]["messages"][-1]["content"]
    assert "'thank you'" in reask and "get_weather" in reask


@pytest.mark.parametrize(
    ("result", "closing"),
    [
        ("18°C and sunny in Paris", "giving the values they hold (numbers with their units"),
        ("Error: unknown city 'Pariss'", "The tool reported an error. Tell the user"),
        ('{"error": "unknown city"}', "The tool reported an error. Tell the user"),
    ],
)
async def test_the_answer_from_results_asks_for_their_values_or_what_failed(
    result: str, closing: str
) -> None:
    """Asked for the answer without tools, the 0.5B left the temperature out ("cloudy"); asked
    for values after an error, it made one up ("ZZZZ is 100"): the closing fits the results."""
    repeat = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    # A repeat of a call that worked is answered at once; one that failed is re-asked first.
    asked = 3 if "rror" in result else 2
    upstream = FakeUpstream([*[repeat] * (asked - 1), "Done."])
    engine = Engine(upstream, mode="force", dialect="hermes", registry=":memory:")
    errored = {**RESULT, "content": result}
    completion = await engine.acomplete(body(STEP_LEFT, CALLED, errored))
    assert completion.text == "Done." and upstream.calls == asked
    last = upstream.history[asked - 1]["messages"][-1]["content"]
    assert closing in last and result in last


@pytest.mark.parametrize("stream", [False, True])
async def test_an_empty_reply_after_results_is_asked_again_without_tools(stream: bool) -> None:
    """Qwen2.5-Coder-1.5B under pythonic began its answer with a made-up ``Tool result:``; the
    stop sequence leaves nothing, and an empty answer is no answer to an agent."""
    upstream = FakeUpstream(["", "It is 18°C and sunny in Paris."])
    engine = Engine(upstream, mode="force", dialect="pythonic", registry=":memory:")
    text, calls = await answer(engine, body(STEP_LEFT, CALLED, RESULT), stream)
    assert (text, calls) == ("It is 18°C and sunny in Paris.", [])
    assert "Tool result:" in upstream.history[0]["stop"]
    assert "Do not call a tool" in upstream.history[1]["messages"][-1]["content"]


LOOKUP = {
    "type": "function",
    "function": {
        "name": "lookup",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "country": {"type": "string", "default": None},
                "unit": {"type": ["string", "null"]},
                "day": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                "tag": {"enum": ["a", "b"]},
            },
            "required": ["city"],
        },
    },
}


def lookup(arguments: dict[str, object]) -> str:
    return json.dumps({"tool_calls": [{"name": "lookup", "arguments": arguments}]})


@pytest.mark.parametrize("stream", [False, True])
async def test_an_optional_argument_given_as_null_is_left_to_its_default(stream: bool) -> None:
    """``country: null`` is "not said": left out (the tool's default), not re-asked; a null
    the schema admits stays."""
    written = {"city": "Paris", "country": None, "unit": None, "day": None, "tag": None}
    upstream = FakeUpstream([lookup(written)])
    engine = Engine(upstream, mode="force", registry=":memory:")
    request = {**body(USER), "tools": [LOOKUP]}
    calls, warnings = await calls_and_warnings(engine, request, stream)
    if warnings is not None:
        assert any(
            "left out optional argument(s) 'country', 'tag' of 'lookup', given as null" in w
            for w in warnings
        )
    assert calls == [("lookup", json.dumps({"city": "Paris", "unit": None, "day": None}))]
    assert upstream.calls == 1


async def test_a_required_argument_given_as_null_is_still_reasked() -> None:
    upstream = FakeUpstream([lookup({"city": None}), lookup({"city": "Paris"})])
    engine = Engine(upstream, mode="force", registry=":memory:")
    completion = await engine.acomplete({**body(USER), "tools": [LOOKUP]})
    assert [(c.name, c.arguments) for c in completion.tool_calls] == [
        ("lookup", '{"city": "Paris"}')
    ]
    assert "city" in upstream.history[1]["messages"][-1]["content"]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_reply_of_values_alone_is_re_asked_with_the_call_they_fit(stream: bool) -> None:
    """The 1.5B's ``[netsh wlan disconnect]``: the arguments of the call it meant, no name."""
    upstream = FakeUpstream(["[Paris]", '[get_weather(city="Paris")]'])
    engine = Engine(upstream, mode="force", dialect="pythonic", registry=":memory:")
    text, calls = await answer(engine, body(USER), stream)
    assert (text, calls) == ("", [("get_weather", '{"city": "Paris"}')])
    correction = upstream.history[1]["messages"][-1]["content"]
    assert "your reply [Paris] gives values but names no tool" in correction
    assert "'get_weather' with city=\"Paris\"" in correction


@pytest.mark.parametrize("stream", [False, True])
async def test_values_no_tool_takes_are_the_answer(stream: bool) -> None:
    upstream = FakeUpstream(["[0.45359237]"])
    engine = Engine(upstream, mode="force", dialect="pythonic", registry=":memory:")
    ask = {"role": "user", "content": "How many kilograms are in a pound?"}
    assert await answer(engine, body(ask), stream) == ("[0.45359237]", [])
    assert len(upstream.history) == 1


@pytest.mark.parametrize("stream", [False, True])
async def test_quoted_calls_to_a_tool_not_offered_are_re_asked(stream: bool) -> None:
    """Seen on the served 1.5B: colours asked for with only get_weather offered."""
    upstream = FakeUpstream(['["get_color(blue)", "get_color(yellow)"]', "Green."])
    engine = Engine(upstream, mode="force", dialect="pythonic", registry=":memory:")
    ask = {"role": "user", "content": "What colour do blue and yellow make?"}
    assert await answer(engine, body(ask), stream) == ("Green.", [])
    correction = upstream.history[1]["messages"][-1]["content"]
    assert "there is no tool named 'get_color'; the available tools are 'get_weather'" in correction
