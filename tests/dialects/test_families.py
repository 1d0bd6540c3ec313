"""Model families' own call markup: read whole and streamed alike, typed by the schema, bounded."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolshim.dialects import available_dialects, get_dialect, parse_reply
from toolshim.dialects._values import parameter_value, repair_quotes
from toolshim.errors import ConfigError
from toolshim.types import ToolSpec

from .conftest import streamed, whole
from .test_bounds import Work, work  # noqa: F401  (the fixture that counts the parser's work)

TOOLS = [
    ToolSpec(
        "get_weather",
        "",
        {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer"},
                "metric": {"type": "boolean"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "where": {"type": "object"},
            },
        },
    ),
    ToolSpec("list_mailboxes"),
]

CALL = ("get_weather", {"city": "Paris", "days": 3})
FAMILIES = {
    "glm": "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>"
    "<arg_key>days</arg_key><arg_value>3</arg_value></tool_call>",
    "glm-newlines": "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
    "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>",
    "glm-open-tag-missing": "get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>"
    "<arg_key>days</arg_key><arg_value>3</arg_value></tool_call>",
    "kimi": "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
    '<|tool_call_argument_begin|>{"city": "Paris", "days": 3}<|tool_call_end|>'
    "<|tool_calls_section_end|>",
    "kimi-section-missing": 'functions.get_weather:0<|tool_call_argument_begin|>{"city": "Paris", '
    '"days": 3}<|tool_call_end|>',
    "kimi-tokens-stripped": ' functions.get_weather:0 {"city": "Paris", "days": 3} ',
    "kimi-name-only": 'get_weather:0<|tool_call_argument_begin|>{"city": "Paris", "days": 3}',
    "dsml": '<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n'
    '<｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>\n'
    '<｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>\n'
    "</｜DSML｜invoke>\n</｜DSML｜function_calls>",
    "invoke": '<function_calls><invoke name="get_weather"><parameter name="city">Paris</parameter>'
    '<parameter name="days">3</parameter></invoke></function_calls>',
    "minimax": '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Paris'
    '</parameter>\n<parameter name="days">3</parameter>\n</invoke>\n</minimax:tool_call>',
    "harmony": "<|start|>assistant<|channel|>commentary to=functions.get_weather "
    '<|constrain|>json<|message|>{"city": "Paris", "days": 3}<|call|>',
    "harmony-recipient-first": "<|start|>assistant to=functions.get_weather<|channel|>commentary json"
    '<|message|>{"city": "Paris", "days": 3}<|call|>',
    "harmony-glued-json": "<|channel|>commentary to=functions.get_weatherjson<|message|>"
    '{"city": "Paris", "days": 3}',
    "gemma": '<|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:3}<tool_call|>',
    "gemma-bare": "call:get_weather{city:Paris,days:3}",
    "gemma-parentheses": 'call:get_weather(city: "Paris", days: 3)',
    "function-glued": '<function=get_weather{"city": "Paris", "days": 3}>',
    "function-equals": '<function=get_weather={"city": "Paris", "days": 3}</function>',
    "function-parentheses": '<function=get_weather({"city": "Paris", "days": 3})</function>',
    "parameter-as-function": "<parameter=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
    "<parameter=days>\n3\n</parameter>\n</function>",
    "mistral-call-id": '[TOOL_CALLS]get_weather[CALL_ID]a1B2c3D4e[ARGS]{"city": "Paris", "days": 3}',
    "openai-misplaced": '{"type": "function", "function": {"name": "get_weather"}, '
    '"parameters": {"city": "Paris", "days": 3}}',
    "granite-type-name": '<|tool_call|>[{"arguments": {"city": "Paris", "days": 3}, '
    '"type": "get_weather"}]',
    "functiongemma": "<start_function_call>call:get_weather{city:<escape>Paris<escape>,days:3}"
    "<end_function_call>",
    "functiongemma-no-call-keyword": "<start_function_call>get_weather{city:<escape>Paris<escape>,"
    "days:3}</end_function_call>",
    "tool-named-tag": '<toolcall><get_weather>{"city": "Paris", "days": 3}</get_weather></toolcall>',
    "name-tag-then-parameters": "<name>get_weather\n</parameter>\n<parameter=city>\nParis\n"
    "</parameter>\n<parameter=days>\n3\n</parameter>\n</function>",
    "olmo3-pythonic-in-function-calls": '<function_calls>get_weather(city="Paris", days=3)'
    "</function_calls>",
    "invoke-name": "<function_call>\n<invoke_name>get_weather</invoke_name>\n<parameters>\n"
    "<city>Paris</city>\n<days>3</days>\n</parameters>\n</function_call>",
    "arrow": '[TOOL_CALL]\n{tool => "get_weather", args => {\n  --city "Paris"\n  --days 3\n}}\n'
    "[/TOOL_CALL]",
    "name-then-json": 'get_weather\n{"city": "Paris", "days": 3}',
    "tool-use-tag": '<tool_use>{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}'
    "</tool_use>",
}


@pytest.mark.parametrize("dialect", available_dialects())
@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_dialect_reads_every_family(family: str, dialect: str) -> None:
    reply = f"Let me check.\n{FAMILIES[family]}\nDone."
    parsed = get_dialect(dialect).parse(reply, TOOLS)
    assert [(c.name, c.arguments, c.problem) for c in parsed.calls] == [(*CALL, None)]
    assert "".join(parsed.text.split()) == "Letmecheck.Done."


@pytest.mark.parametrize("family", list(FAMILIES))
def test_a_family_streams_like_whole_at_every_split(family: str) -> None:
    d = get_dialect("json")
    reply = f"Sure.\n{FAMILIES[family]}\nThat is all."
    expected = whole(d, reply, TOOLS)
    assert expected[1], family
    assert streamed(d.parser(TOOLS), list(reply)) == expected
    for cut in range(len(reply) + 1):
        assert streamed(d.parser(TOOLS), [reply[:cut], reply[cut:]]) == expected, cut


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    family=st.sampled_from(sorted(FAMILIES)),
    before=st.sampled_from(["", "Checking. ", "get_weather is the tool.\n", "call: me\n"]),
    after=st.sampled_from(["", "\nDone.", " functions.x:1", "<arg_k"]),
    dialect=st.sampled_from(available_dialects()),
    data=st.data(),
)
def test_families_in_any_text_stream_like_whole(
    family: str, before: str, after: str, dialect: str, data: st.DataObject
) -> None:
    d = get_dialect(dialect)
    reply = before + FAMILIES[family] + after
    expected = whole(d, reply, TOOLS)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(reply)), max_size=8)))
    pieces = [reply[a:b] for a, b in zip([0, *cuts], [*cuts, len(reply)], strict=True)]
    assert streamed(d.parser(TOOLS), pieces) == expected


def test_no_markup_reaches_the_text_while_streaming() -> None:
    for family, markup in FAMILIES.items():
        parser = get_dialect("json").parser(TOOLS)
        shown = ""
        for ch in markup:
            shown += "".join(s.text for s in parser.feed(ch) if s.kind == "text")
        assert shown.strip() == "", (family, shown)


@pytest.mark.parametrize(
    ("text", "kind", "value"),
    [
        ("['a', 'b']", "array", ["a", "b"]),
        ('["a", "b"]', "array", ["a", "b"]),
        ("{'k': 1}", "object", {"k": 1}),
        ("14", "integer", 14),
        ("14.0", "integer", 14),
        ("2.5", "number", 2.5),
        ("True", "boolean", True),
        ("false", "boolean", False),
        ("\n  keep 'quotes' and  spaces  \n", "string", "  keep 'quotes' and  spaces  "),
        (" test.txt\n", "string", "test.txt"),
        ("\n42\n", "string", "42"),
        ("null", None, None),
        ("plain words", None, "plain words"),
    ],
)
def test_markup_values_are_typed_by_the_schema(text: str, kind: str | None, value: Any) -> None:
    got = parameter_value(text, kind)
    assert got == value and type(got) is type(value)


def test_glm_values_are_typed_by_the_schema() -> None:
    reply = (
        "<tool_call>get_weather<arg_key>city</arg_key><arg_value>'Rome',  Italy</arg_value>"
        "<arg_key>days</arg_key><arg_value>7</arg_value><arg_key>metric</arg_key>"
        "<arg_value>True</arg_value><arg_key>tags</arg_key><arg_value>['sun', 'rain']"
        "</arg_value><arg_key>where</arg_key><arg_value>{'lat': 41.9}</arg_value></tool_call>"
    )
    (call,) = parse_reply(reply, TOOLS).calls
    assert call.arguments == {
        "city": "'Rome',  Italy",
        "days": 7,
        "metric": True,
        "tags": ["sun", "rain"],
        "where": {"lat": 41.9},
    }


def test_unescaped_quotes_are_repaired_when_the_schema_names_the_keys() -> None:
    tools = [
        ToolSpec(
            "bash",
            "",
            {
                "type": "object",
                "properties": {"command": {"type": "string"}, "n": {"type": "integer"}},
            },
        )
    ]
    reply = '{"name": "bash", "arguments": {"command": "echo "hi" > f.txt", "n": 2}}'
    (call,) = parse_reply(reply, tools).calls
    assert (call.name, call.arguments, call.problem) == (
        "bash",
        {"command": 'echo "hi" > f.txt', "n": 2},
        None,
    )
    assert repair_quotes('{"other": "a "b""}', {"command": "string"}) is None


def test_a_special_token_cut_off_at_the_end_is_dropped() -> None:
    reply = '<|tool_call_begin|>functions.get_weather:0 {"city": "Paris"} <|tool_calls_section_end|'
    parsed = parse_reply(reply, TOOLS)
    assert [c.name for c in parsed.calls] == ["get_weather"]
    assert parsed.text.strip() == ""


def test_a_family_hint_reads_that_family_first() -> None:
    reply = "<tool_call>list_mailboxes</tool_call>"
    assert [c.name for c in parse_reply(reply, TOOLS, markup="glm").calls] == ["list_mailboxes"]
    with pytest.raises(ConfigError, match="unknown call markup 'glm5'"):
        parse_reply(reply, TOOLS, markup="glm5")


LOOPING = [
    "<arg_key>",
    "get_weather<arg_key>",
    "<tool_call>get_weather<arg_key>a</arg_key><arg_value>",
    "<|tool_call_begin|>",
    "functions.get_weather:0 ",
    "get_weather:0<|tool_call_argument_begin|>{",
    '<invoke name="get_weather"><parameter name="city">',
    "<｜DSML｜invoke ",
    "call:get_weather{city:",
    "call:get_weather(",
    "<parameter=get_weather>",
    "<function=get_weather{",
    "`<tool_call>",
    "<|channel|>commentary",
    "[TOOL_CALL]{tool => ",
    "<invoke_name>get_weather</invoke_name><parameters><city>",
    "get_weather\n{",
    "<start_function_call>call:get_weather{city:<escape>",
    "<start_function_call>get_weather{",
    "<get_weather>",
    "<get_weather>{",
    "<name>get_weather</parameter>",
    "<toolcall><get_wea",
    "<function_calls>get_weather()</function_calls",
    'get_weather{"city": "x"}',
    'get_weather{"city": 1}</function>',
    "</function>",
    'get_weather{"city": 1}</function>\n</function> ',
    "to=functions.get_weather 天天 ",
    "to=functions.get_weather天",
    "to=functions.get_weather json{",
    '<｜｜DSML｜｜invoke name="get_weather">\n...\n',
]


@pytest.mark.parametrize("unit", LOOPING)
def test_a_family_unit_repeated_costs_linear_work(unit: str, work: Work) -> None:  # noqa: F811
    size = work.size = 32_000
    text = (unit * (size // len(unit) + 1))[:size]
    d = get_dialect("json")
    d.parse(text, TOOLS)
    parser = d.parser(TOOLS)
    for i in range(0, size, 8):
        parser.feed(text[i : i + 8])
    parser.finish()
    work.check()


def test_the_shipped_profile_names_the_family_markup() -> None:
    from toolshim.capabilities.facts import Source
    from toolshim.capabilities.profiles import FAMILY_MARKUPS, shipped_profiles
    from toolshim.dialects import MARKUPS

    assert set(FAMILY_MARKUPS.values()) <= MARKUPS
    table = shipped_profiles()
    for model, markup in [
        ("qwen3-coder:30b", "qwen3-coder"),
        ("gpt-oss:20b", "harmony"),
        ("llama3.2:3b", "pythonic"),
        ("mistral-small3.2:24b", "mistral"),
        ("deepseek-ai/DeepSeek-V3.1", "deepseek"),
        ("deepseek-v3:671b", "deepseek"),
        ("deepseek-v3.2", "deepseek-dsml"),
        ("Salesforce/Llama-xLAM-2-8b-fc-r", "json"),
        ("LiquidAI/LFM2-1.2B", "pythonic"),
        ("ByteDance-Seed/Seed-OSS-36B-Instruct", "qwen3-coder"),
        ("glm-4.6", "glm"),
        ("moonshotai/Kimi-K2-Instruct", "kimi-k2"),
        ("MiniMaxAI/MiniMax-M2", "invoke-xml"),
        ("google/functiongemma-270m-it", "gemma"),
    ]:
        fact = table.match(model).markup
        assert fact is not None and (fact.value, fact.source) == (markup, Source.PROFILE), model
        parse_reply("", TOOLS, markup=fact.value)  # a markup the parser knows
    assert table.match("some-unknown-model-7b").markup is None
