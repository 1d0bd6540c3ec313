"""The constrained json dialect's text answer, ``{"answer": "…"}``, streams as it is generated."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolshim.dialects import ReplyParser, get_dialect, parse_reply
from toolshim.engine import Engine
from toolshim.testing import FakeUpstream
from toolshim.types import ToolSpec

from .conftest import outcome, streamed, whole

TOOLS = [
    ToolSpec("get_weather", "", {"type": "object", "properties": {"city": {"type": "string"}}})
]
JSON = get_dialect("json")


def texts(parser: ReplyParser, piece: str) -> str:
    return "".join(s.text for s in parser.feed(piece) if s.kind == "text")


def test_the_answer_streams_before_the_object_closes() -> None:
    parser = ReplyParser(TOOLS)
    assert texts(parser, '{"answer": "Par') == "Par"
    assert texts(parser, "is is sunny") == "is is sunny"
    assert texts(parser, ".\\nTomorrow") == ".\nTomorrow"
    assert texts(parser, ' too."') == " too."
    assert parser.feed("}") == [] or all(s.kind == "marker" for s in parser.feed(""))
    assert [s.kind for s in parser.finish("\n")] == ["text"]


@pytest.mark.parametrize(
    "escaped",
    [
        "a\\nb",
        '\\"quoted\\"',
        "back\\\\slash",
        "\\u00e9t\\u00C9",
        "emoji \\ud83d\\ude00!",
        "tab\\tand\\/slash\\b\\f\\r",
    ],
)
def test_escapes_cut_anywhere_decode_like_json(escaped: str) -> None:
    reply = '{"answer": "' + escaped + '"}'
    expected = json.loads('"' + escaped + '"')
    assert parse_reply(reply, TOOLS).text == expected
    for cut in range(len(reply) + 1):
        for second in range(cut, len(reply) + 1):
            pieces = [reply[:cut], reply[cut:second], reply[second:]]
            assert streamed(ReplyParser(TOOLS), pieces) == (expected, [], False), pieces


def test_sloppy_strings_are_read_leniently() -> None:
    cases = {
        '{"answer": "lone \\ud83d high"}': "lone \ufffd high",
        '{"answer": "lone \\ude00 low"}': "lone \ufffd low",
        '{"answer": "bad \\q escape"}': "bad q escape",
        '{"answer": "not \\uZZ hex"}': "not \\uZZ hex",
        '{"answer": "raw\nnewline\tand tab"}': "raw\nnewline\tand tab",
        '{"answer": "cut off by max_tokens': "cut off by max_tokens",
        '{"answer": "cut in an escape \\': "cut in an escape ",
        '{"answer": "cut in a pair \\ud83d': "cut in a pair \ufffd",
    }
    for reply, text in cases.items():
        assert parse_reply(reply, TOOLS).text == text, reply
        assert streamed(ReplyParser(TOOLS), list(reply)) == (text, [], False), reply


def test_what_follows_the_answer() -> None:
    parsed = parse_reply('  {"answer": "Hi."}\nAnd more.', TOOLS)
    assert parsed.text == "  Hi.\nAnd more."
    call = '{"name": "get_weather", "arguments": {"city": "Oslo"}}'
    parsed = parse_reply('{"answer": "Checking.", "tool_calls": [' + call + "]}", TOOLS)
    assert parsed.text == "Checking."
    assert [(c.name, c.arguments) for c in parsed.calls] == [("get_weather", {"city": "Oslo"})]
    parsed = parse_reply('{"answer": "Hi."}' + call, TOOLS)
    assert parsed.text == "Hi." and [c.name for c in parsed.calls] == ["get_weather"]


@pytest.mark.parametrize(
    "reply",
    [
        'Here: {"answer": "x"}',
        '{"Answer": "x"}',
        '{"answer": 42}',
        '{"answer": ["x"]}',
        "{'answer': 'x'}",
    ],
)
def test_other_shapes_keep_todays_reading(reply: str) -> None:
    parsed = parse_reply(reply, TOOLS)
    assert parsed.calls == () and parsed.text == reply


fragments = st.sampled_from(
    ["\\", "\\n", '\\"', "\\u", "\\u00e9", "\\ud83d", "\\ude00", "\\ud83d\\ude00", '"', "}"]
)
answer_bodies = st.lists(fragments | st.text(max_size=5), max_size=12).map("".join)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=answer_bodies, tail=st.sampled_from(["", '"}', '"} ok', '", "x": 1}']), data=st.data())
def test_answers_stream_like_whole_at_random_splits(
    body: str, tail: str, data: st.DataObject
) -> None:
    reply = '{"answer": "' + body + tail
    expected = whole(JSON, reply, TOOLS)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(reply)), max_size=6)))
    pieces = [reply[a:b] for a, b in zip([0, *cuts], [*cuts, len(reply)], strict=True)]
    assert streamed(JSON.parser(TOOLS), pieces) == expected


@settings(max_examples=100, deadline=None)
@given(text=st.text(st.characters(exclude_categories=[])), ascii_only=st.booleans(), data=st.data())
def test_a_json_encoded_answer_streams_back_exactly(
    text: str, ascii_only: bool, data: st.DataObject
) -> None:
    reply = json.dumps({"answer": text}, ensure_ascii=ascii_only)
    expected = text
    if ascii_only:  # an escaped lone surrogate could not be sent as UTF-8: U+FFFD instead
        pairs = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
        expected = "".join("\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in pairs)
    step = data.draw(st.integers(1, 9))
    pieces = [reply[i : i + step] for i in range(0, len(reply), step)]
    assert outcome(JSON.parse(reply, TOOLS).segments) == (expected, [], False)
    assert streamed(JSON.parser(TOOLS), pieces) == (expected, [], False)


async def test_a_constrained_answer_reaches_the_caller_in_pieces() -> None:
    answer = "Paris is sunny today and the forecast says more sun tomorrow. " * 4
    upstream = FakeUpstream([json.dumps({"answer": answer})])
    engine = Engine(upstream, mode="force", constrain=True, registry=":memory:")
    request = {
        "model": "m",
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": [TOOLS[0].to_openai()],
        "stream": True,
    }
    chunks = [c async for c in engine.astream(request)]
    contents = [c.content for c in chunks if c.content]
    assert "".join(contents).strip() == answer.strip()
    assert len(contents) > 10  # streamed as generated, not once at the end
    assert upstream.history[0]["response_format"]["type"] == "json_schema"
