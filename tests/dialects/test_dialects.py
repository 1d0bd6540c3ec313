"""What each dialect tells the model, how it writes history, and how the engine uses it."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from toolshim.dialects import (
    CompactDialect,
    Dialect,
    HermesDialect,
    PromptOptions,
    PythonicDialect,
    WindlassDialect,
    available_dialects,
    get_dialect,
)
from toolshim.engine import Engine
from toolshim.errors import ConfigError
from toolshim.testing import FakeUpstream
from toolshim.types import ToolCall, ToolChoice, ToolSpec

RUN_CODE = ToolSpec(
    "run_code",
    "Executes code in a sandbox.",
    {
        "type": "object",
        "properties": {
            "code": {"type": "string", "description": "The program."},
            "language": {"type": "string", "default": "python"},
        },
        "required": ["code"],
    },
)
WEATHER = ToolSpec(
    "get_weather",
    "Current weather for a city.",
    {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city"],
    },
)
TOOLS = [RUN_CODE, WEATHER]
AUTO = PromptOptions()


def render(dialect: str, options: PromptOptions = AUTO) -> str:
    return get_dialect(dialect).render_tools(TOOLS, options)


def test_registry_knows_every_dialect_and_names_them_on_error() -> None:
    assert available_dialects() == ["compact", "hermes", "json", "pythonic", "windlass"]
    assert isinstance(get_dialect(" Hermes "), HermesDialect)
    with pytest.raises(ConfigError, match="available: compact, hermes, json, pythonic, windlass"):
        get_dialect("yaml")


@pytest.mark.parametrize("dialect", available_dialects())
def test_prompt_lists_tools_and_says_plainly_how_to_decline(dialect: str) -> None:
    text = render(dialect)
    assert "run_code" in text and "get_weather" in text
    assert "Executes code in a sandbox." in text
    assert "no listed tool fits" in text or "no tool fits" in text
    assert "Never" in text  # never invent tools or results


@pytest.mark.parametrize("dialect", available_dialects())
def test_prompt_carries_tool_choice_and_parallel_rules(dialect: str) -> None:
    required = render(dialect, PromptOptions(ToolChoice.REQUIRED))
    assert "must" in required and "no tool fits" not in required
    forced = render(dialect, PromptOptions(ToolChoice.function("get_weather")))
    assert "get_weather" in forced and "run_code" not in forced
    single = render(dialect, PromptOptions(parallel=False))
    assert "one" in single.lower()
    decision = render(dialect, PromptOptions(decision=True))
    assert decision != render(dialect)


def test_hermes_follows_the_qwen_template() -> None:
    text = render("hermes")
    assert "You are provided with function signatures within <tools></tools> XML tags:" in text
    assert (
        "For each function call, return a json object with function name and arguments "
        "within <tool_call></tool_call> XML tags:" in text
    )
    inside = text.split("<tools>\n", 1)[1].split("\n</tools>", 1)[0].splitlines()
    signatures = [json.loads(line) for line in inside]
    assert signatures[0] == {
        "type": "function",
        "function": {
            "name": "run_code",
            "description": "Executes code in a sandbox.",
            "parameters": dict(RUN_CODE.parameters),
        },
    }
    dialect = HermesDialect()
    assert (
        dialect.render_result("run_code", "c1", "42")
        == "<tool_response>\nrun_code (call id c1):\n42\n</tool_response>"
    )
    rendered = dialect.render_calls([ToolCall.from_arguments("c1", "run_code", {"code": "1"})])
    assert rendered == '<tool_call>\n{"name": "run_code", "arguments": {"code": "1"}}\n</tool_call>'


def test_windlass_describes_tools_the_windlass_way() -> None:
    text = render("windlass")
    assert "**run_code**\nExecutes code in a sandbox.\nParameters:\n" in text
    assert "  - code (str) (required): The program." in text
    assert "  - language (str) (optional, default: python)" in text
    assert (
        'To use: Output JSON in this format:\n{"tool": "run_code", "arguments": {"code": "..."}}'
        in text
    )
    assert '  - unit (Literal["celsius", "fahrenheit"]) (optional)' in text
    assert (
        WindlassDialect().render_result("run_code", "c1", "hi")
        == "Tool Result (run_code, call id c1):\nhi"
    )


def test_compact_is_flat_single_and_shows_examples() -> None:
    text = render("compact")
    assert '{"tool":"run_code","code":"..."}' in text
    assert 'reply {"tool":"none"} and then your answer' in text
    assert "Examples:" in text and 'You: {"tool":"none"}\nHello!' in text
    dialect = CompactDialect()
    assert dialect.max_calls == 1
    flat = dialect.render_calls([ToolCall.from_arguments("c", "get_weather", {"city": "Oslo"})])
    assert flat == '{"tool":"get_weather","city":"Oslo"}'
    clash = dialect.render_calls([ToolCall.from_arguments("c", "label", {"name": "x"})])
    assert clash == '{"tool":"label","arguments":{"name":"x"}}'
    required = render("compact", PromptOptions(ToolChoice.REQUIRED))
    assert '{"tool":"none"}' not in required


def test_pythonic_shows_signatures_and_writes_python() -> None:
    text = render("pythonic")
    assert 'def get_weather(city: str, unit: Literal["celsius", "fahrenheit"] = None):' in text
    assert 'def run_code(code: str, language: str = "python"):' in text
    assert "code: The program." in text
    dialect = PythonicDialect()
    rendered = dialect.render_calls(
        [
            ToolCall.from_arguments("a", "get_weather", {"city": "Paris", "class": 1, "ok": True}),
            ToolCall.from_arguments("b", "get-time", {}),
        ]
    )
    assert rendered == '[get_weather(city="Paris", ok=True, **{"class": 1}), get-time()]'
    decision = render("pythonic", PromptOptions(decision=True))
    assert "reply exactly: []" in decision
    assert dialect.parse("[]", TOOLS).declined


@pytest.mark.parametrize(
    ("reply", "city"),
    [
        ("[get_weather(“Paris”)]", "Paris"),  # the 1.5B, handed "[list_orders(" to continue
        ("[get_weather(city=‘Oslo’)]", "Oslo"),
        ('[get_weather(city="Rock ’n’ Roll town")]', "Rock ’n’ Roll town"),  # valid as it is
    ],
)
def test_pythonic_reads_strings_between_typographic_quotes(reply: str, city: str) -> None:
    parsed = PythonicDialect().parse(reply, TOOLS)
    assert [(c.name, c.arguments) for c in parsed.calls] == [("get_weather", {"city": city})]
    # Prose with typographic quotes stays prose.
    assert not PythonicDialect().parse("He said “get_weather” twice.", TOOLS).calls


FILES = [
    ToolSpec(
        "mv",
        "",
        {
            "type": "object",
            "properties": {"source": {"type": "string"}, "destination": {"type": "string"}},
        },
    ),
    ToolSpec(
        "tail",
        "",
        {
            "type": "object",
            "properties": {"file_name": {"type": "string"}, "lines": {"type": "integer"}},
        },
    ),
]


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("[mv(log.txt, archive)]", ("mv", {"source": "log.txt", "destination": "archive"})),
        ("[mv(source=notes, destination='a')]", ("mv", {"source": "notes", "destination": "a"})),
        (
            "[tail(file_name=report.txt, lines=20)]",
            ("tail", {"file_name": "report.txt", "lines": 20}),
        ),
    ],
)
def test_pythonic_reads_a_bare_name_as_the_string_a_string_parameter_takes(
    reply: str, expected: tuple[str, dict[str, object]]
) -> None:
    """The 1.5B on BFCL's file system, re-asked "'workspace' is a name, not a value", wrote
    ``cd(folder=workspace)`` and ``mv(log.txt, archive)`` again."""
    (call,) = PythonicDialect().parse(reply, FILES).calls
    assert (call.name, call.arguments) == expected and call.problem is None


@pytest.mark.parametrize(
    "reply", ["[tail(file_name='a', lines=twenty)]", "[mv(source=f(x), destination='a')]"]
)
def test_pythonic_still_refuses_a_name_where_no_string_is_taken(reply: str) -> None:
    (call,) = PythonicDialect().parse(reply, FILES).calls
    assert call.problem is not None and "literal" in call.problem


def test_history_with_broken_arguments_still_renders() -> None:
    broken = ToolCall("c1", "run_code", arguments="{not json")
    for name in available_dialects():
        dialect = get_dialect(name)
        assert "run_code" in dialect.render_calls([broken])


@pytest.mark.parametrize("dialect", ["json", "compact"])
def test_decision_response_format_admits_exactly_the_valid_replies(dialect: str) -> None:
    d = get_dialect(dialect)
    if (
        dialect != "json"
    ):  # json also constrains the single strategy (tests/engine/test_constrained.py)
        assert d.response_format(TOOLS, AUTO) is None
    fmt = d.response_format(TOOLS, PromptOptions(decision=True))
    assert fmt is not None
    schema = fmt["json_schema"]["schema"]
    good = d.render_calls([ToolCall.from_arguments("c", "get_weather", {"city": "Oslo"})])
    jsonschema.validate(json.loads(good), schema)
    bad = d.render_calls([ToolCall.from_arguments("c", "get_weather", {"town": 1})])
    assert not jsonschema.Draft202012Validator(schema).is_valid(json.loads(bad))


def test_the_constrained_schema_puts_an_array_enum_on_its_items() -> None:
    # enum beside "type": "array" (BFCL live_simple_71-35-0): taken literally no array could
    # match, and a grammar built from it would force a string where an array is wanted.
    metrics = ToolSpec(
        "extract",
        "",
        {
            "type": "object",
            "properties": {
                "metrics": {"type": "array", "items": {"type": "string"}, "enum": ["trust", "view"]}
            },
            "required": ["metrics"],
        },
    )
    fmt = get_dialect("json").response_format([metrics], AUTO)
    assert fmt is not None
    validator = jsonschema.Draft202012Validator(fmt["json_schema"]["schema"])
    call = {"tool_calls": [{"name": "extract", "arguments": {"metrics": ["view", "trust"]}}]}
    assert validator.is_valid(call)
    call["tool_calls"][0]["arguments"]["metrics"] = ["buzz"]
    assert not validator.is_valid(call)
    assert metrics.parameters["properties"]["metrics"]["enum"] == ["trust", "view"]  # untouched


REPLIES: dict[str, str] = {
    "json": '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]}',
    "hermes": '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>',
    "pythonic": '[get_weather(city="Oslo")]',
    "compact": '{"tool":"get_weather","city":"Oslo"}',
    "windlass": 'Checking.\n{"tool": "get_weather", "arguments": {"city": "Oslo"}}',
}


def _request(**extra: Any) -> dict[str, Any]:
    return {
        "model": "fake-model",
        "messages": [{"role": "user", "content": "Weather in Oslo?"}],
        "tools": [t.to_openai() for t in TOOLS],
        **extra,
    }


@pytest.mark.parametrize("dialect", available_dialects())
async def test_engine_emulates_with_each_dialect(dialect: str) -> None:
    upstream = FakeUpstream([REPLIES[dialect]])
    engine = Engine(upstream, mode="force", dialect=dialect, registry=":memory:")
    completion = await engine.acomplete(_request())
    (call,) = completion.tool_calls
    assert (call.name, json.loads(call.arguments)) == ("get_weather", {"city": "Oslo"})
    assert completion.meta is not None and completion.meta.dialect == dialect
    system = upstream.history[0]["messages"][0]
    assert system["role"] == "system"
    assert system["content"] == get_dialect(dialect).render_tools(TOOLS, AUTO)


@pytest.mark.parametrize("dialect", available_dialects())
async def test_engine_streams_with_each_dialect(dialect: str) -> None:
    upstream = FakeUpstream([REPLIES[dialect]], piece=3)
    engine = Engine(upstream, mode="force", dialect=dialect, registry=":memory:")
    names = []
    arguments = ""
    async for chunk in engine.astream(_request(stream=True)):
        for delta in chunk.tool_calls:
            names += [delta.name] if delta.name else []
            arguments += delta.arguments or ""
    assert names == ["get_weather"]
    assert json.loads(arguments) == {"city": "Oslo"}


@pytest.mark.parametrize("dialect", available_dialects())
async def test_history_round_trips_through_the_engine(dialect: str) -> None:
    upstream = FakeUpstream(["It is 3 degrees in Oslo."])
    engine = Engine(upstream, mode="force", dialect=dialect, registry=":memory:")
    request = _request()
    request["messages"] += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "3 degrees"},
        {"role": "assistant", "content": "It is 3 degrees in Oslo."},
        {"role": "user", "content": "And in Paris?"},
    ]
    completion = await engine.acomplete(request)
    assert completion.message.text == "It is 3 degrees in Oslo."
    sent = upstream.history[0]["messages"]
    d: Dialect = get_dialect(dialect)
    assistant = next(m for m in sent if m["role"] == "assistant")
    parsed = d.parse(assistant["content"], TOOLS)
    assert [(c.name, c.arguments) for c in parsed.calls] == [("get_weather", {"city": "Oslo"})]
    # An earlier turn's result stays in the dialect's own shape (only the results that end
    # the conversation are folded into the question: see the next test).
    assert any(d.render_result("get_weather", "call_1", "3 degrees") in m["content"] for m in sent)


@pytest.mark.parametrize("dialect", available_dialects())
async def test_parallel_results_are_told_apart_by_the_call_they_answer(dialect: str) -> None:
    upstream = FakeUpstream(["Sunny, and it is 14:05."])
    engine = Engine(upstream, mode="force", dialect=dialect, registry=":memory:")
    request = _request()
    calls = [("c1", "get_weather", '{"city": "Paris"}'), ("c2", "run_code", '{"code": "now()"}')]
    request["messages"] += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                for i, n, a in calls
            ],
        },
        # Answered in the other order: only the name and id tell which result is which.
        {"role": "tool", "tool_call_id": "c2", "content": "14:05"},
        {"role": "tool", "tool_call_id": "c1", "content": "18 degrees"},
    ]
    await engine.acomplete(request)
    sent = upstream.history[0]["messages"][-1]["content"]
    # Results that end the conversation are folded into the question's turn, each under the
    # call it answers (name and arguments), in the order they came.
    time = 'You called run_code(code="now()"); it returned:\n14:05'
    weather = 'You called get_weather(city="Paris"); it returned:\n18 degrees'
    assert sent.index(time) < sent.index(weather)


@pytest.mark.parametrize(
    ("dialect", "decision", "held"),
    [
        ("json", False, True),
        ("json", True, True),
        ("compact", False, False),
        ("compact", True, True),
        ("hermes", False, False),
        ("hermes", True, False),
        ("pythonic", False, False),
        ("pythonic", True, False),
    ],
)
def test_holds_to_schema_says_whether_constrain_takes_effect(
    dialect: str, decision: bool, held: bool
) -> None:
    """The one answer the engine (per request) and the eval's pick (per model) both use."""
    options = PromptOptions(decision=decision)
    assert get_dialect(dialect).holds_to_schema(TOOLS, options) is held
    assert options.constrained is False  # the caller's options are not changed


def test_pythonic_reads_a_call_written_as_an_argument_as_the_step_before() -> None:
    tools = [
        ToolSpec(
            name,
            "",
            {"type": "object", "properties": {p: {"type": "string"} for p in params}},
        )
        for name, params in (("price", ["symbol"]), ("convert", ["amount", "to"]))
    ]
    parsed = PythonicDialect().parse('[convert(amount=price("TSLA"), to="BTC")]', tools)
    assert [(c.name, c.arguments, c.waits_for) for c in parsed.calls] == [
        ("price", {"symbol": "TSLA"}, ()),
        ("convert", {"to": "BTC"}, ("price",)),
    ]
    # A call of something not offered stays a problem of the call.
    other = PythonicDialect().parse('[convert(amount=float("1"), to="BTC")]', tools)
    assert other.calls[0].problem is not None and not other.calls[0].waits_for
