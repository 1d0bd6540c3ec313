"""Shared helpers for the dialect tests: the corpus loader and a streamed-vs-whole comparison."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolshim.dialects import Dialect, ReplyParser, Segment
from toolshim.dialects.segments import merge_segments
from toolshim.types import ToolSpec

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "corpus"


@dataclass(frozen=True)
class Fixture:
    id: str
    source: str
    tools: tuple[ToolSpec, ...]
    output: str
    expect: dict[str, Any]
    chunks: tuple[str, ...] | None


def load_corpus() -> list[Fixture]:
    out = []
    for path in sorted(CORPUS.glob("*.json")):
        data = json.loads(path.read_text("utf-8"))
        tools = tuple(
            ToolSpec(t["name"], t.get("description", ""), t["parameters"]) for t in data["tools"]
        )
        chunks = tuple(data["chunks"]) if "chunks" in data else None
        out.append(
            Fixture(data["id"], data["source"], tools, data["output"], data["expect"], chunks)
        )
    return out


Outcome = tuple[str, list[tuple[str, Any, str | None]], bool]


def outcome(segments: Iterable[Segment]) -> Outcome:
    """What a parse means: the prose, the calls (name, arguments, problem), and a decline."""
    merged = merge_segments(segments)
    text = "".join(s.text for s in merged if s.kind == "text")
    calls = [(c.name, c.arguments, c.problem) for s in merged for c in s.calls]
    return text, calls, any(s.declined for s in merged) and not calls


def streamed(parser: ReplyParser, pieces: Sequence[str]) -> Outcome:
    segments: list[Segment] = []
    for piece in pieces:
        segments += parser.feed(piece)
    segments += parser.finish()
    return outcome(segments)


def whole(dialect: Dialect, text: str, tools: Sequence[ToolSpec]) -> Outcome:
    return outcome(dialect.parse(text, tools).segments)
