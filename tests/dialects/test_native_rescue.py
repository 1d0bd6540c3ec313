"""Every family's markup, leaked into a native reply's content, comes out as tool calls through
the engine (auto, fallback and off; whole and streamed), and none of it reaches streamed text."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from toolshim.dialects import get_dialect
from toolshim.engine import Engine
from toolshim.testing import FakeUpstream
from toolshim.types import ToolSpec

from .conftest import Fixture, load_corpus
from .test_families import CALL, FAMILIES, TOOLS

CORPUS = load_corpus()
POSITIVE = [
    f
    for f in CORPUS
    if "calls" in f.expect and not any(c.get("unknown") for c in f.expect["calls"])
]
NEGATIVE = [f for f in CORPUS if f.expect.get("answer")]


def wire(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "parameters": t.parameters or {"type": "object", "properties": {}},
            },
        }
        for t in tools
    ]


async def run(
    tools: Sequence[ToolSpec], content: str, mode: str, piece: int | None
) -> tuple[list[tuple[str, Any]], str, int]:
    """The calls and text the engine returns for a native reply whose content is ``content``
    (``piece``: streamed in deltas of that many characters; None: not streamed)."""
    upstream = FakeUpstream([content], tools="native", piece=piece or 7)
    engine = Engine(upstream, mode=mode, registry=":memory:")
    body = {"model": "m", "messages": [{"role": "user", "content": "go"}], "tools": wire(tools)}
    if piece is None:
        completion = await engine.acomplete(body)
        message = completion.message
        calls = [(c.name, json.loads(c.arguments)) for c in message.tool_calls]
        return calls, message.text, upstream.calls
    text = ""
    parts: dict[int, list[str]] = {}
    async for chunk in engine.astream({**body, "stream": True}):
        text += chunk.content or ""
        for delta in chunk.tool_calls or ():
            name, arguments = parts.setdefault(delta.index, ["", ""])
            parts[delta.index] = [name + (delta.name or ""), arguments + (delta.arguments or "")]
    return [(n, json.loads(a)) for n, a in parts.values()], text, upstream.calls


def squeeze(text: str) -> str:
    return "".join(text.split())


@pytest.mark.parametrize("piece", [None, 1, 4])
@pytest.mark.parametrize("mode", ["auto", "fallback", "off"])
@pytest.mark.parametrize("family", list(FAMILIES))
async def test_a_leaked_family_call_is_rescued_and_its_markup_never_streams(
    family: str, mode: str, piece: int | None
) -> None:
    reply = f"Let me check.\n{FAMILIES[family]}\nDone."
    calls, text, asked = await run(TOOLS, reply, mode, piece)
    assert calls == [CALL]
    assert asked == 1  # read from the reply itself: no re-ask, no emulation
    if piece is not None:  # streamed: prose only (held in fallback, cut after a rescued call)
        assert "Letmecheck.Done.".startswith(squeeze(text))


def _expected(fixture: Fixture) -> list[tuple[str, Any]]:
    """The fixture's calls, a call repeated word for word kept once (the engine's rule)."""
    seen: dict[str, tuple[str, Any]] = {}
    for c in fixture.expect["calls"]:
        seen.setdefault(
            json.dumps([c["name"], c["arguments"]], sort_keys=True), (c["name"], c["arguments"])
        )
    return list(seen.values())


@pytest.mark.parametrize("piece", [None, 3])
@pytest.mark.parametrize("mode", ["auto", "off"])
@pytest.mark.parametrize("fixture", POSITIVE, ids=[f.id for f in POSITIVE])
async def test_every_real_leak_is_rescued_from_native_content(
    fixture: Fixture, mode: str, piece: int | None
) -> None:
    calls, text, asked = await run(fixture.tools, fixture.output, mode, piece)
    assert calls == _expected(fixture)
    assert asked == 1
    if piece is not None:  # streamed text is the reply's prose only, as the parser reads it
        prose = get_dialect("json").parse(fixture.output, fixture.tools).text
        assert squeeze(prose).startswith(squeeze(text))


@pytest.mark.parametrize("piece", [None, 3])
@pytest.mark.parametrize("mode", ["auto", "off"])
@pytest.mark.parametrize("fixture", NEGATIVE, ids=[f.id for f in NEGATIVE])
async def test_a_negative_reply_stays_the_answer_unchanged(
    fixture: Fixture, mode: str, piece: int | None
) -> None:
    calls, text, asked = await run(fixture.tools, fixture.output, mode, piece)
    assert (calls, text, asked) == ([], fixture.output, 1)
