"""Arguments that are not JSON values make a call with a problem (re-asked), never a crash."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolshim.dialects import parse_reply
from toolshim.dialects.calls import ParsedCall, json_problem
from toolshim.engine import Engine
from toolshim.testing import FakeUpstream
from toolshim.types import ToolSpec

NOTE = ToolSpec(
    "save_note", "", {"type": "object", "properties": {"text": {}, "score": {"type": "number"}}}
)
WEATHER = ToolSpec(
    "get_weather", "", {"type": "object", "properties": {"city": {"type": "string"}}}
)
TOOLS = [NOTE, WEATHER]


def _strict(text: str) -> Any:
    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize(
    ("reply", "where", "what"),
    [
        ('[get_weather(city="Paris", units=...)]', "'units'", "Ellipsis"),
        ('[save_note(text=b"hello")]', "'text'", "bytes"),
        ("[save_note(text=1j)]", "'text'", "complex"),
        ('[save_note(text={"a", "b"})]', "'text'", "a set"),
        ("[save_note(score=1e999)]", "'score'", "Infinity"),
        ("[save_note(score=-1e999)]", "'score'", "-Infinity"),
        ('[save_note(text=["ok", [2j]])]', "'text'[1][0]", "complex"),
        ('{"name": "save_note", "arguments": {"score": NaN}}', "'score'", "NaN"),
        ('{"name": "save_note", "arguments": {"score": -Infinity}}', "'score'", "-Infinity"),
        ('{"name": "save_note", "arguments": {"score": 1e999}}', "'score'", "Infinity"),
        ('{"name": "save_note", "arguments": "{\\"score\\": NaN}"}', "'score'", "NaN"),
        (
            "<tool_call>{'name': 'save_note', 'arguments': {'text': {1, 2}}}</tool_call>",
            "'text'",
            "set",
        ),
        ('<function=save_note>{"score": Infinity}</function>', "'score'", "Infinity"),
        ('[TOOL_CALLS]save_note[ARGS]{"score": NaN}', "'score'", "NaN"),
    ],
)
def test_a_value_that_is_not_json_is_a_problem_naming_the_argument(
    reply: str, where: str, what: str
) -> None:
    (call,) = parse_reply(reply, TOOLS, python_unknown=True).calls
    assert call.problem is not None
    assert f"the argument {where} is" in call.problem and what in call.problem, call.problem
    assert "not a JSON value" in call.problem
    with pytest.raises(ValueError, match="are not JSON values"):
        call.arguments_json  # noqa: B018


def test_a_call_without_a_problem_always_serialises_as_strict_json() -> None:
    for reply in [
        '[save_note(text=("a", 1), score=1.5)]',
        "{'name': 'save_note', 'arguments': {'text': None, 'score': -0.0}}",
        '{"name": "save_note", "arguments": {"text": "NaN", "score": 1e308}}',
    ]:
        (call,) = parse_reply(reply, TOOLS).calls
        assert call.problem is None
        assert _strict(call.arguments_json) == call.arguments


def test_every_parsed_call_checks_its_arguments() -> None:
    assert ParsedCall("f", {"x": float("nan")}).problem == (
        "the argument 'x' is NaN, which is not a JSON value "
        "(use a string, number, true, false, null, list or object)"
    )
    assert (
        ParsedCall("f", {1: "a"}).problem == "the arguments have the key 1, which is not a string"
    )
    assert ParsedCall("f", {"x": 1}, problem="other").problem == "other"
    assert ParsedCall("f", None).problem is None
    assert json_problem({"a": [1, "b", None, True, {"c": 2.5}]}) is None
    # A bare call on its own line is only read when nothing is wrong with it.
    assert parse_reply("save_note(text=...)", TOOLS).calls == ()


def test_arguments_nested_too_deep_are_a_problem() -> None:
    deep: Any = 1
    for _ in range(200):
        deep = [deep]
    assert "levels deep" in (ParsedCall("f", {"x": deep}).problem or "")


@pytest.mark.parametrize("stream", [False, True])
async def test_the_engine_reasks_instead_of_failing(stream: bool) -> None:
    upstream = FakeUpstream(
        ['[get_weather(city="Paris", units=...)]', '[get_weather(city="Paris")]']
    )
    engine = Engine(upstream, mode="force", dialect="pythonic", registry=":memory:")
    request = {
        "model": "m",
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": [WEATHER.to_openai()],
        "stream": stream,
    }
    if stream:
        chunks = [c async for c in engine.astream(request)]
        arguments = "".join(d.arguments or "" for c in chunks for d in c.tool_calls)
    else:
        completion = await engine.acomplete(request)
        arguments = completion.message.tool_calls[0].arguments
    assert _strict(arguments) == {"city": "Paris"}
    correction = upstream.history[1]["messages"][-1]["content"]
    assert "the argument 'units' is ... (Python's Ellipsis)" in correction
