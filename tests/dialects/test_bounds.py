"""The parser's bounds: linear work on looping replies, no exception on any text, deep is data."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolshim.dialects import _scan as scan
from toolshim.dialects import _tags as tags
from toolshim.dialects import available_dialects, extract, get_dialect, interpret, parse_reply
from toolshim.dialects._scan import MAX_DEPTH, REPAIR_BUDGET_CHARS, REPAIR_MAX_CHARS, decode_value
from toolshim.dialects.calls import ToolIndex
from toolshim.dialects.interpret import interpret_value
from toolshim.testing.looping import LOOPING_REPLIES, LOOPING_TOOLS, looping_reply

from .conftest import streamed, whole

TOOLS = LOOPING_TOOLS


@dataclass
class Work:
    """What one parse cost, counted where the work happens."""

    scan_steps: int = 0
    trigger_chars: int = 0
    decoded_chars: int = 0
    repair_calls: int = 0
    repair_chars: int = 0
    size: int = 0  # of the reply: the work allowed is linear in it (0: no limit)

    def check(self) -> None:
        """Fail as soon as the work exceeds the linear bounds (a quadratic parse of 64 KB
        would otherwise take many minutes to fail)."""
        if not self.size:
            return
        if (
            max(self.scan_steps, self.trigger_chars) > 2 * 12 * self.size
            or self.decoded_chars > 2 * 8 * self.size
            or self.repair_chars > 2 * REPAIR_BUDGET_CHARS
        ):
            raise AssertionError(f"more than linear work: {self}")


class _CountingPattern:
    """A compiled pattern whose searches are counted (one per scanner step)."""

    def __init__(self, pattern: re.Pattern[str], count: Callable[[str, int, Any], None]) -> None:
        self.pattern = pattern
        self.count = count

    def search(self, text: str, pos: int = 0, *rest: int) -> re.Match[str] | None:
        found = self.pattern.search(text, pos, *rest)
        self.count(text, pos, found)
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(self.pattern, name)


@pytest.fixture
def work(monkeypatch: pytest.MonkeyPatch) -> Work:
    counted = Work()

    def step(text: str, pos: int, found: Any) -> None:
        counted.scan_steps += 1
        counted.check()

    def searched(text: str, pos: int, found: re.Match[str] | None) -> None:
        counted.trigger_chars += (found.start() if found else len(text)) - pos
        counted.check()

    for name in ("_SPECIAL", "_IN_DOUBLE", "_IN_SINGLE"):
        monkeypatch.setattr(scan, name, _CountingPattern(getattr(scan, name), step))
    monkeypatch.setattr(extract, "_TRIGGER", _CountingPattern(extract._TRIGGER, searched))
    real_decode, real_repair = scan.decode_value, scan.json_repair.loads

    def decode(text: str, *args: Any, **kwargs: Any) -> Any:
        counted.decoded_chars += len(text)
        counted.check()
        return real_decode(text, *args, **kwargs)

    def repair(text: str, *args: Any, **kwargs: Any) -> Any:
        counted.repair_calls += 1
        counted.repair_chars += len(text)
        counted.check()
        return real_repair(text, *args, **kwargs)

    for module in (extract, tags, interpret):
        monkeypatch.setattr(module, "decode_value", decode)
    monkeypatch.setattr(scan.json_repair, "loads", repair)
    return counted


@pytest.mark.parametrize("label", list(LOOPING_REPLIES))
def test_a_looping_reply_costs_linear_work(label: str, work: Work) -> None:
    unit, dialect = LOOPING_REPLIES[label]
    d = get_dialect(dialect)
    size = work.size = 64_000
    text = looping_reply(unit, size)
    d.parse(text, TOOLS)
    parser = d.parser(TOOLS)
    for i in range(0, size, 8):
        parser.feed(text[i : i + 8])
    parser.finish()
    # Two parses (whole, then streamed in 8-character deltas), each linear:
    assert work.scan_steps <= 2 * 12 * size and work.trigger_chars <= 2 * 12 * size, work
    assert work.decoded_chars <= 2 * 8 * size, work
    # json-repair grows faster than its input: bounded per attempt and per reply.
    assert work.repair_chars <= 2 * REPAIR_BUDGET_CHARS, work
    assert work.repair_calls <= 2 * REPAIR_BUDGET_CHARS // 16, work


def test_json_repair_sees_short_texts_only(monkeypatch: pytest.MonkeyPatch) -> None:
    sizes: list[int] = []
    real = scan.json_repair.loads

    def repair(text: str, *args: Any, **kwargs: Any) -> Any:
        sizes.append(len(text))
        return real(text, *args, **kwargs)

    monkeypatch.setattr(scan.json_repair, "loads", repair)
    # Broken (unquoted keys) and large: past the per-attempt bound, so not repaired.
    big = "{name: 'get_weather', arguments: {city: '" + "x" * (2 * REPAIR_MAX_CHARS) + "'}}"
    assert parse_reply(big, TOOLS).calls == ()
    small = "{name: 'get_weather', arguments: {city: 'Paris'}}"
    assert [c.arguments for c in parse_reply(small, TOOLS).calls] == [{"city": "Paris"}]
    assert sizes and max(sizes) <= REPAIR_MAX_CHARS


def test_a_cut_off_call_is_completed_without_json_repair(monkeypatch: pytest.MonkeyPatch) -> None:
    def repair(text: str, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"json-repair called on {text!r}")

    monkeypatch.setattr(scan.json_repair, "loads", repair)
    for cut, city in [
        ('{"name": "get_weather", "arguments": {"city": "Par', "Par"),
        ('{"name": "get_weather", "arguments": {"city": "Par\\', "Par"),
        ('Sure. [{"name": "get_weather", "arguments": {"city": "Oslo"}', "Oslo"),
        ("{'name': 'get_weather', 'arguments': {'city': 'Rome',", "Rome"),
    ]:
        (call,) = parse_reply(cut, TOOLS).calls
        assert (call.name, call.arguments, call.repaired) == ("get_weather", {"city": city}, True)


@pytest.mark.parametrize(
    "reply",
    [
        "[" * 5000 + '"name"' + "]" * 5000,
        '{"name":' * 3000 + "1" + "}" * 3000,
        '{"tool_calls": ' + "[" * 3000 + "]" * 3000 + "}",
        "[get_weather(city=" + "[" * 3000 + "]" * 3000 + ")]",
        '{"name": "get_weather", "arguments": ' + '{"a":' * 3000 + "1" + "}" * 3000 + "}",
        '{"tool_calls": [' + '{"a": [' * 2000,
        '{"city": {"name": ' * 900,
        '{"name": "get_weather", "arguments": "' + "[" * 3000 + "]" * 3000 + '"}',
        "[" + "a." * 20000 + "get_weather(city='x')]",
        "get_weather(city=" + "-" * 20000 + "1)",
        "<tool_call>" + "[" * 3000,
        "```json\n" + "{" * 3000,
        "<function>get_weather</function>" + '{"a":' * 3000,
        "[TOOL_CALLS]get_weather[ARGS]" + '{"a":' * 3000,
        "to=functions.get_weather<|message|>" + '{"a":' * 3000,
        "<function=get_weather>" + "[" * 3000,
    ],
)
def test_deep_nesting_is_data_and_never_raises(reply: str) -> None:
    for name in available_dialects():
        d = get_dialect(name)
        pieces = [reply[i : i + 97] for i in range(0, len(reply), 97)]
        assert streamed(d.parser(TOOLS), pieces) == whole(d, reply, TOOLS)
        # Nothing that deep comes back as a usable call of an offered tool.
        calls = d.parse(reply, TOOLS).calls
        assert all(c.problem or not c.arguments or c.name != "get_weather" for c in calls)


def test_a_call_just_inside_the_depth_bound_is_read_and_one_past_it_is_data() -> None:
    call = '{"name": "get_weather", "arguments": {"city": "Paris"}}'  # two levels
    inside = "[" * (MAX_DEPTH - 2) + call + "]" * (MAX_DEPTH - 2)
    parsed = parse_reply(inside, TOOLS)
    assert [c.arguments for c in parsed.calls] == [{"city": "Paris"}]
    assert parsed.text == ""
    # One level more: the outermost bracket is data; the call inside it is still one.
    outside = "[" * (MAX_DEPTH - 1) + call + "]" * (MAX_DEPTH - 1)
    parsed = parse_reply(outside, TOOLS)
    assert [c.arguments for c in parsed.calls] == [{"city": "Paris"}]
    assert parsed.text == "[]"


def test_decoding_deep_values_returns_nothing_instead_of_raising() -> None:
    assert decode_value("[" * 5000 + "]" * 5000) is None
    assert decode_value("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)) is None
    assert decode_value("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None
    deep: Any = [{"name": "get_weather", "arguments": {}}]
    for _ in range(5000):
        deep = [deep]
    assert not interpret_value({"tool_calls": deep}, ToolIndex(TOOLS)).is_call


def test_an_over_long_function_tag_name_is_not_a_tool_name() -> None:
    # Bounded so that ``<function=<function=…`` is not scanned to its end from every tag.
    reply = "<function=" + "a" * 200 + ">{}</function>"
    assert parse_reply(reply, TOOLS).calls == ()
    assert [c.name for c in parse_reply("<function=get_weather>{}</function>", TOOLS).calls] == [
        "get_weather"
    ]


# -- adversarial text: parsing never raises, and streams like the whole ---------------------------

ODD = [
    "\ud800",
    "\udfff",
    "\x00",
    "\x85",
    "\u2028",
    "\u202e",
    "\ufeff",
    "\U0001f600",
    "\\",
    "\\u",
    "\\ud83d",
    "\\ude00",
    '\\"',
    "'",
    '"',
    "\n",
]
SHAPES = [
    "{",
    "}",
    "[",
    "]",
    "(",
    ")",
    '{"name": "get_weather", "arguments": {"city": ',
    '{"tool_calls": [',
    '{"answer": "',
    "[get_weather(city=",
    "get_weather(",
    "<tool_call>",
    "</tool_call>",
    "<function=get_weather>",
    "<parameter=city>",
    "```json\n",
    "```",
    "[TOOL_CALLS]",
    "to=functions.get_weather",
    "<think>",
    "NaN",
    "1e999",
    "...",
    'b"x"',
    "1j",
]
piece = st.sampled_from(ODD + SHAPES) | st.text(max_size=6)
adversarial = (
    st.lists(piece, max_size=30).map("".join)
    | st.tuples(st.sampled_from(SHAPES + ODD), st.integers(50, 3000)).map(lambda t: t[0] * t[1])
    | st.tuples(st.lists(piece, min_size=1, max_size=6).map("".join), st.integers(2, 400)).map(
        lambda t: t[0] * t[1]
    )
)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(reply=adversarial, dialect=st.sampled_from(available_dialects()), data=st.data())
def test_adversarial_text_never_raises_and_streams_like_whole(
    reply: str, dialect: str, data: st.DataObject
) -> None:
    d = get_dialect(dialect)
    expected = whole(d, reply, TOOLS)
    step = data.draw(st.integers(1, 50))
    assert streamed(d.parser(TOOLS), [reply[i : i + step] for i in range(0, len(reply), step)]) == (
        expected
    )
    for call in d.parse(reply, TOOLS).calls:
        if call.problem is None:
            call.arguments_json  # noqa: B018 - a call without a problem always serialises


@pytest.mark.parametrize("dialect", available_dialects())
def test_a_bracket_closing_where_a_streamed_piece_ends_is_not_cut_off(dialect: str) -> None:
    """Found by the property test above: fed a character at a time, every call whose closing
    brace ended a piece was decoded as cut off, spending the reply's few cut-off repairs, so
    the truly cut-off tail came out as text streamed and as a call whole."""
    d = get_dialect(dialect)
    reply = '}}{"name": "get_weather", "arguments": {"city": ' * 5
    assert streamed(d.parser(TOOLS), list(reply)) == whole(d, reply, TOOLS)
