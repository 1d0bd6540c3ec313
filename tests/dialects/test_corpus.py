"""The corpus of real model outputs: every dialect parses each one as intended, whole and streamed."""

from __future__ import annotations

import pytest

from toolshim.dialects import available_dialects, get_dialect

from .conftest import Fixture, load_corpus, streamed, whole

CORPUS = load_corpus()
IDS = [f.id for f in CORPUS]


def test_the_corpus_is_big_and_sourced() -> None:
    assert len(CORPUS) >= 40
    for fixture in CORPUS:
        assert fixture.source.startswith("https://"), fixture.id
        assert fixture.tools, fixture.id
        assert ("calls" in fixture.expect) != ("answer" in fixture.expect), fixture.id
    malformed = [f for f in CORPUS if f.output.lstrip()[:1] not in ("{", "[", "<")]
    assert len(malformed) >= 10  # most fixtures are not a clean object on their own
    negatives = [f for f in CORPUS if f.id.startswith("negative-")]
    assert len(negatives) >= 15 and all(f.expect.get("answer") for f in negatives)


@pytest.mark.parametrize("dialect", available_dialects())
@pytest.mark.parametrize("fixture", CORPUS, ids=IDS)
def test_parsed_as_intended(fixture: Fixture, dialect: str) -> None:
    parsed = get_dialect(dialect).parse(fixture.output, fixture.tools)
    if fixture.expect.get("answer"):
        assert parsed.calls == ()
        assert parsed.text == fixture.output
        return
    offered = {t.name for t in fixture.tools}
    assert [(c.name, c.arguments) for c in parsed.calls] == [
        (c["name"], c["arguments"]) for c in fixture.expect["calls"]
    ]
    for call, expected in zip(parsed.calls, fixture.expect["calls"], strict=True):
        assert call.problem is None
        assert (call.name not in offered) == bool(expected.get("unknown"))


@pytest.mark.parametrize("dialect", ["json", "pythonic", "compact"])
@pytest.mark.parametrize("fixture", CORPUS, ids=IDS)
def test_streamed_equals_whole(fixture: Fixture, dialect: str) -> None:
    d = get_dialect(dialect)
    expected = whole(d, fixture.output, fixture.tools)
    chars = list(fixture.output)
    assert streamed(d.parser(fixture.tools), chars) == expected
    if fixture.chunks is not None:  # the deltas as the real server sent them
        assert streamed(d.parser(fixture.tools), fixture.chunks) == expected
    for cut in range(0, len(fixture.output) + 1, 3):
        pieces = [fixture.output[:cut], fixture.output[cut:]]
        assert streamed(d.parser(fixture.tools), pieces) == expected, cut


@pytest.mark.parametrize("dialect", available_dialects())
def test_every_dialect_streams_the_corpus_like_whole(dialect: str) -> None:
    d = get_dialect(dialect)
    for fixture in CORPUS:
        expected = whole(d, fixture.output, fixture.tools)
        assert streamed(d.parser(fixture.tools), list(fixture.output)) == expected, fixture.id


def test_unknown_tools_are_reported_not_dropped() -> None:
    fixture = next(f for f in CORPUS if f.id == "ollama-11381-qwen3-hallucinated-tool")
    parsed = get_dialect("hermes").parse(fixture.output, fixture.tools)
    assert [c.name for c in parsed.calls] == ["create"]
    assert parsed.text.strip() == ""
