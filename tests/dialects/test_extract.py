"""The tolerant extraction layer, one shape at a time: what is a call, what stays prose."""

from __future__ import annotations

from typing import Any

import pytest

from toolshim.dialects import ReplyParser, parse_reply
from toolshim.dialects._scan import BracketScan, find_close
from toolshim.types import ToolSpec

WEATHER = ToolSpec(
    "get_weather",
    "Weather for a city.",
    {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"],
    },
)
TIME = ToolSpec("get_time")
SEARCH = ToolSpec(
    "search",
    "",
    {"type": "object", "properties": {"query": {"type": "array", "items": {"type": "string"}}}},
)
TOOLS = [WEATHER, TIME, SEARCH]
PARIS = [("get_weather", {"city": "Paris"})]


def calls(text: str, **options: Any) -> list[tuple[str, Any]]:
    parsed = parse_reply(text, TOOLS, **options)
    assert all(c.problem is None for c in parsed.calls), [c.problem for c in parsed.calls]
    return [(c.name, c.arguments) for c in parsed.calls]


def prose(text: str, **options: Any) -> None:
    parsed = parse_reply(text, TOOLS, **options)
    assert parsed.calls == ()
    assert parsed.text == text


@pytest.mark.parametrize(
    "reply",
    [
        '{"name": "get_weather", "arguments": {"city": "Paris"}}',
        '[{"name": "get_weather", "arguments": {"city": "Paris"}}]',
        '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}',
        '{"type": "function", "function": {"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}}',
        '{"function_call": {"name": "get_weather", "arguments": {"city": "Paris"}}}',
        '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```',
        '```\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```',
        '```json {"name": "get_weather", "arguments": {"city": "Paris"}} ```',
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}',
        '<function=get_weather>{"city": "Paris"}</function>',
        "<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>",
        '<function>get_weather</function>\n{"city": "Paris"}',
        '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}',
        '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}}]',
        '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}',
        'functools[{"name": "get_weather", "arguments": {"city": "Paris"}}]',
        '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>',
        '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Paris"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
        '[get_weather(city="Paris")]',
        "get_weather(city='Paris')",
        'functions.get_weather(city="Paris")',
        '```tool_code\nprint(get_weather(city="Paris"))\n```',
        '{"name": "functions.get_weather", "arguments": {"city": "Paris"}}',
        '{"name": "GET_WEATHER", "arguments": {"city": "Paris"}}',
        '{"tool": "get_weather", "city": "Paris"}',
        '{"Tool": "get_weather", "City": "Paris"}',
        '{"tool_name": "get_weather", "input": {"city": "Paris"}}',
        '{"function": "get_weather", "args": {"city": "Paris"}}',
        '{"name": "get_weather", "parameters": {"city": "Paris"}}',
        "{'name': 'get_weather', 'arguments': {'city': 'Paris'}}",
        '{"name": "get_weather", "arguments": {"city": "Paris",},}',
        '{"name": "get_weather", "arguments": {"city": "Paris"}',
        '{"name": "get_weather", "arguments": {"city": "Paris"}}}}',
        '{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}',
        "{name: 'get_weather', arguments: {city: 'Paris'}}",
        # Qwen2.5-Coder-1.5B under the pythonic prompt, now and then (BFCL live_simple_7-3-3)
        "[\"get_weather(city='Paris')\"]",
        "```json\n[\"get_weather(city='Paris')\"]\n```",
    ],
)
def test_every_shape_yields_the_call(reply: str) -> None:
    assert calls(reply) == PARIS


def test_calls_inside_prose_and_several_concatenated() -> None:
    reply = (
        "Sure, checking both.\n"
        '{"name": "get_weather", "arguments": {"city": "Paris"}}'
        '{"name": "get_time", "arguments": {}}\nOne moment.'
    )
    parsed = parse_reply(reply, TOOLS)
    assert [(c.name, c.arguments) for c in parsed.calls] == [*PARIS, ("get_time", {})]
    assert parsed.text == "Sure, checking both.\n\nOne moment."


def test_think_blocks_are_skipped() -> None:
    reply = (
        '<think>I could call {"name": "get_time", "arguments": {}} but '
        "<tool_call>no</tool_call></think>\n"
        '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    )
    parsed = parse_reply(reply, TOOLS)
    assert [(c.name, c.arguments) for c in parsed.calls] == PARIS
    assert parsed.text.startswith("<think>I could call")


def test_decline_then_answer() -> None:
    parsed = parse_reply('{"tool":"none"}\nParis is in France.', TOOLS)
    assert parsed.calls == ()
    assert parsed.declined
    assert parsed.text.strip() == "Paris is in France."
    assert parse_reply('{"tool_calls": []}', TOOLS).declined


def test_a_tool_named_like_a_decline_word_is_a_call() -> None:
    parsed = parse_reply('{"tool": "none"}', [ToolSpec("none")])
    assert [c.name for c in parsed.calls] == ["none"]
    assert not parsed.declined


def test_unknown_tools_come_back_for_the_reask() -> None:
    parsed = parse_reply('{"name": "get_location", "arguments": {}}', TOOLS)
    assert [c.name for c in parsed.calls] == ["get_location"]
    assert parse_reply('{"tool": "lookup"}', TOOLS).calls[0].name == "lookup"
    assert [c.name for c in parse_reply("[lookup(x=1)]", TOOLS, python_unknown=True).calls] == [
        "lookup"
    ]


def test_broken_calls_carry_a_problem() -> None:
    (call,) = parse_reply("<tool_call>\nget the weather please\n</tool_call>", TOOLS).calls
    assert call.problem is not None and "not a call" in call.problem
    (call,) = parse_reply('{"name": "get_weather", "arguments": "Paris"}', TOOLS).calls
    assert call.problem == "the arguments are not a JSON object"
    (call,) = parse_reply("[get_weather(city=town + suffix)]", TOOLS).calls
    assert call.problem is not None and "literal" in call.problem
    # A bare name where a string is taken is that string (the checks judge whether it was said).
    (call,) = parse_reply("[get_weather(city=town)]", TOOLS).calls
    assert call.problem is None and call.arguments == {"city": "town"}
    (call,) = parse_reply(
        '{"name": "get_weather", "description": "d", "parameters": '
        '{"type": "object", "properties": {"city": {"type": "string"}}}}',
        TOOLS,
    ).calls
    assert call.problem is not None and "definition" in call.problem


def test_parameter_values_follow_the_schema() -> None:
    reply = (
        "<function=search>\n<parameter=query>['a', 'b']</parameter>\n</function>\n"
        "<function=get_weather>\n<parameter=city>\n 42 \n</parameter>\n"
        "<parameter=days>3</parameter>\n</function>"
    )
    assert calls(reply) == [
        ("search", {"query": ["a", "b"]}),
        ("get_weather", {"city": " 42 ", "days": 3}),
    ]


@pytest.mark.parametrize(
    "reply",
    [
        "The weather in Paris is sunny, about 21°C.",
        'Here is the data: {"city": "Paris", "temp": 21}',
        '```json\n{"name": "my-app", "version": "1.0.0"}\n```',
        '```json\n[{"name": "alice", "age": 30}]\n```',
        "You can call get_weather(city) to look it up yourself.",
        "Use get_time() whenever you need the clock.",
        '```bash\ncurl -d \'{"name": "get_weather", "arguments": {}}\' localhost\n```',
        '```python\nresult = get_weather(city="Paris")\nprint(result)\n```',
        "The list is [1, 2, 3] and the set {a, b}.",
        "Compare a < b and b > c; use `x` inline.",
        "Markdown [link](https://example.com) and {placeholder}.",
        "{tool}",
        "In Python: [print(x) for x in y]",
        'Seen: ["red logo", "yellow rectangle (left)", "white text"]',
        'Code: ["print(get_weather)", "get_weather(city=\'Paris\')"]',
        "Try [\"lookup(city='Paris')\"] later.",
        '["red logo", "white text"] are the items.',
        "[1.5, 2.5]",
        '["Paris", 3, true]',
    ],
)
def test_prose_and_code_stay_prose(reply: str) -> None:
    prose(reply)


@pytest.mark.parametrize(
    ("reply", "meant"),
    [
        ('["Paris"]', 'get_weather\' with city="Paris"'),
        ("['Paris', 3]", "'get_weather' with city=\"Paris\", days=3"),
        ("[Paris]", 'get_weather\' with city="Paris"'),
        ('  ["red logo", "white text"]\n', 'search\' with query=["red logo", "white text"]'),
        ('<tool_call>["Paris"]</tool_call>', 'get_weather\' with city="Paris"'),
    ],
)
def test_a_reply_of_values_alone_is_a_call_without_its_name(reply: str, meant: str) -> None:
    """Values that fit an offered tool, the whole reply: re-asked, naming what they fit."""
    parsed = parse_reply(reply, TOOLS)
    assert parsed.text.strip() == ""
    [call] = parsed.calls
    assert call.name == "" and call.arguments is None
    assert call.problem is not None and meant in call.problem
    assert "names no tool" in call.problem


@pytest.mark.parametrize(
    "reply",
    ["[1.5]", "[Paris](https://example.com)", '[3, "Paris"] ', "[true]", "[]"],
)
def test_a_reply_of_values_no_tool_takes_is_the_answer(reply: str) -> None:
    prose(reply)


def test_a_reply_of_quoted_calls_is_those_calls_offered_or_not() -> None:
    parsed = parse_reply("[\"get_color(color='blue')\", \"get_weather(city='Oslo')\"]", TOOLS)
    assert parsed.text == ""
    assert [(c.name, c.arguments, c.problem) for c in parsed.calls] == [
        ("get_color", {"color": "blue"}, None),
        ("get_weather", {"city": "Oslo"}, None),
    ]
    unknown = parse_reply('["get_color(blue)"]', TOOLS).calls
    assert [(c.name, c.problem) for c in unknown] == [("get_color", None)]


def test_a_lone_list_is_held_while_the_reply_may_go_on() -> None:
    """Streamed, the list is held until the reply ends: prose after it makes it data."""
    parser = ReplyParser(TOOLS)
    assert parser.feed('["Paris"]') == []
    assert [s.text for s in parser.feed(" is the city.")] == ['["Paris"] is the city.']
    assert parser.finish("") == []
    held = ReplyParser(TOOLS)
    assert held.feed('["Paris"]\n') == []
    segments = held.finish("")
    assert [(s.kind, s.text) for s in segments] == [("calls", '["Paris"]'), ("text", "\n")]
    assert segments[0].calls[0].name == ""


def test_markers_are_dropped_from_the_text() -> None:
    reply = '<|python_start|>{"name": "get_time", "parameters": {}}<|python_end|><|eot_id|>'
    parsed = parse_reply(reply, TOOLS)
    assert [c.name for c in parsed.calls] == ["get_time"]
    assert parsed.text == ""
    parsed = parse_reply("Hi</tool_call><|im_end|>", TOOLS)
    assert parsed.text == "Hi"


def test_empty_list_declines_only_when_asked_and_only_at_the_start() -> None:
    assert parse_reply("[]", TOOLS, empty_list_declines=True).declined
    assert not parse_reply("[]", TOOLS).declined
    parsed = parse_reply("The list [] is empty.", TOOLS, empty_list_declines=True)
    assert not parsed.declined and parsed.text == "The list [] is empty."


def test_feed_holds_back_only_what_may_become_a_call() -> None:
    parser = ReplyParser(TOOLS)
    assert [s.text for s in parser.feed("The answer is ")] == ["The answer is "]
    assert parser.feed("<tool") == []
    assert parser.pending == "<tool"
    assert parser.feed('_call>{"name": "get_time"') == []
    segments = parser.feed(', "arguments": {}}</tool_call> done')
    assert [s.kind for s in segments] == ["calls", "text"]
    assert segments[1].text == " done"
    assert parser.finish() == []
    assert parser.received.startswith("The answer is <tool_call>")


def test_a_tool_name_at_the_end_of_a_chunk_waits_for_the_next() -> None:
    parser = ReplyParser(TOOLS)
    assert [s.text for s in parser.feed("ok\nget_wea")] == ["ok\n"]
    assert parser.feed('ther(city="Paris")') == []  # the line may still go on
    segments = parser.feed("\n")
    assert [s.kind for s in segments] == ["calls", "text"]


def test_bracket_scan_resumes_across_chunks() -> None:
    text = '{"a": "x}", "b": [1, {"c": "\\"}"}]} tail'
    end = find_close(text, 0)
    assert text[:end].endswith("]}")
    scan = BracketScan(0)
    results = [scan.run(text[:i]) for i in range(1, len(text) + 1)]
    assert results[-1] == end
    assert all(r == -1 for r in results[: end - 1])
    assert find_close("{don't}", 0) == 7
    assert find_close("{'it''s'", 0) == -1


@pytest.mark.parametrize(
    "reply", ["[\"get_weather(city='Paris')\"]", '["get_weather(city=\'Paris\')", "get_time()"]']
)
def test_quoted_python_calls_stream_as_they_parse_whole(reply: str) -> None:
    whole = calls(reply)
    assert whole[0] == PARIS[0]
    for size in (1, 3, 7):
        parser = ReplyParser(TOOLS)
        segments = [s for i in range(0, len(reply), size) for s in parser.feed(reply[i : i + size])]
        segments += parser.finish()
        streamed = [(c.name, c.arguments) for s in segments if s.kind == "calls" for c in s.calls]
        assert streamed == whole


def test_arguments_after_the_calls_are_every_call_s() -> None:
    """Qwen2.5-Coder-1.5B, BFCL parallel_5: ``[f(…), f(…), sort_by_rating=True]``."""
    reply = '[get_weather(city="Paris"), get_weather(city="Oslo", days=1), days=3]'
    assert calls(reply) == [
        ("get_weather", {"city": "Paris", "days": 3}),
        ("get_weather", {"city": "Oslo", "days": 1}),
    ]
    mixed = '[get_weather(city="Paris"), search(query=["x"]), days=3]'
    assert calls(mixed) == [
        ("get_weather", {"city": "Paris", "days": 3}),
        ("search", {"query": ["x"]}),
    ]
    # streamed, at every split, the same calls
    for size in (1, 3, 7):
        parser = ReplyParser(TOOLS)
        pieces = [reply[i : i + size] for i in range(0, len(reply), size)]
        segments = [s for piece in pieces for s in parser.feed(piece)] + parser.finish()
        found = [(c.name, c.arguments) for s in segments if s.kind == "calls" for c in s.calls]
        assert found == calls(reply)


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        # a keyword argument outside the calls that no called tool declares
        ('[get_weather(city="Paris"), get_weather(city="Oslo"), units="C"]', "invalid syntax"),
        # BFCL live_simple_107-64-0: an apostrophe inside single quotes
        ("[get_weather(city='Paris'), search(query=['I'm here'])]", "line 1"),
        # Qwen2.5-Coder-0.5B, BFCL multiple_3 and simple_python_192: a stray value in the list
        ('[get_weather(city="Paris"), True]', "also holds True, which is not a call"),
        ('[get_weather("Paris"), "celsius"]', 'also holds "celsius", which is not a call'),
    ],
)
def test_a_broken_python_call_list_is_a_broken_call_not_an_answer(reply: str, why: str) -> None:
    parsed = parse_reply(reply, TOOLS, python_unknown=True)
    (call,) = parsed.calls
    assert call.name == "get_weather" and call.arguments is None
    assert call.problem is not None
    assert why in call.problem
    assert parsed.text == ""


@pytest.mark.parametrize(
    "reply",
    [
        "Try [get_weather(city: Paris)] later.",  # not the start of the reply
        "[lookup(x=1), y=2]",  # not an offered tool
        '[get_weather(city="Par',  # cut off (max_tokens): the engine's cut-off rules apply
    ],
)
def test_other_broken_python_lists_stay_text(reply: str) -> None:
    assert parse_reply(reply, TOOLS, python_unknown=True).calls == ()
