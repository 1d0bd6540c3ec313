"""The pieces a reply is cut into (Segment) and a whole parsed reply (ParsedReply)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from toolshim.dialects.calls import Interpretation, ParsedCall

__all__ = ["ParsedReply", "Segment", "calls_segment", "merge_segments"]


@dataclass(frozen=True, slots=True)
class Segment:
    """A piece of a reply: prose, tool calls (or an explicit decline), or a dropped marker."""

    kind: Literal["text", "calls", "marker"]
    text: str
    calls: tuple[ParsedCall, ...] = ()
    declined: bool = False


@dataclass(frozen=True, slots=True)
class ParsedReply:
    """A whole reply, parsed."""

    segments: tuple[Segment, ...]

    @property
    def calls(self) -> tuple[ParsedCall, ...]:
        return tuple(c for s in self.segments for c in s.calls)

    @property
    def declined(self) -> bool:
        """True when the model explicitly said that no tool is needed (and called none)."""
        return not self.calls and any(s.declined for s in self.segments)

    @property
    def text(self) -> str:
        """All prose, exactly as written (calls and markers left out)."""
        return "".join(s.text for s in self.segments if s.kind == "text")


def calls_segment(raw: str, meaning: Interpretation) -> Segment:
    """The segment for an interpreted piece of text: its calls, or a (declining) marker."""
    if meaning.calls:
        return Segment("calls", raw, meaning.calls)
    return Segment("marker", raw, declined=meaning.declined)


def merge_segments(segments: Iterable[Segment]) -> list[Segment]:
    """Join adjacent text segments (and drop empty ones)."""
    out: list[Segment] = []
    for s in segments:
        if s.kind == "text":
            if not s.text:
                continue
            if out and out[-1].kind == "text":
                out[-1] = Segment("text", out[-1].text + s.text)
                continue
        out.append(s)
    return out
