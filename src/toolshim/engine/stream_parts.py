"""Pieces every stream of the engine uses: opening an upstream stream, gating text, call deltas."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace

from toolshim.dialects.extract import ReplyParser, Segment
from toolshim.dialects.interpret import ParsedCall
from toolshim.engine.turn import Turn, emulated_id
from toolshim.engine.unoffered import unoffered_warning
from toolshim.errors import UpstreamError
from toolshim.types import ChatRequest, StreamChunk, ToolCallDelta

__all__ = [
    "ARGUMENT_FRAGMENT",
    "NeedsEmulation",
    "Rejected",
    "StreamedReply",
    "TextGate",
    "call_chunks",
    "first_choice",
    "raise_rejected",
    "texts",
    "usage_chunks",
]

ARGUMENT_FRAGMENT = 48
"""Characters of arguments per streamed fragment."""


class Rejected(Exception):
    """The upstream rejected ``tools`` before streaming anything (the fact was learned)."""


class NeedsEmulation(Exception):
    """A native reply could not be used as it was; the turn goes on emulated."""


def raise_rejected(
    exc: UpstreamError, first: bool, learn: Callable[[UpstreamError], bool] | None
) -> None:
    """Raise :class:`Rejected` for ``exc``, an upstream error read from a stream, if it came
    before the stream's ``first`` chunk and ``learn`` takes it for a tools rejection; else
    nothing (the caller re-raises ``exc``). Each native stream reads its upstream stream itself,
    inside ``try``/``except UpstreamError``: a generator in between would cost CPU on every
    chunk of every stream."""
    if first and learn is not None and learn(exc):
        raise Rejected from exc


async def first_choice(turn: Turn, request: ChatRequest) -> AsyncIterator[StreamChunk]:
    """The first choice's chunks of an emulated request's stream, with usage counted; native
    calls in it (the upstream was sent no tools) are dropped, with a warning."""
    dropped: dict[int, str] = {}
    async for chunk in turn.open_stream(request):
        if chunk.choice_index == 0:
            turn.add_usage(chunk.usage)
            for delta in chunk.tool_calls:
                if delta.name and delta.index not in dropped:
                    dropped[delta.index] = delta.name
            if chunk.tool_calls:
                chunk = replace(chunk, tool_calls=())
            yield chunk
    if dropped:
        turn.warn(unoffered_warning(list(dropped.values())))


def include_usage(turn: Turn) -> bool:
    options = turn.request.params.get("stream_options")
    return isinstance(options, dict) and bool(options.get("include_usage"))


async def usage_chunks(turn: Turn) -> AsyncIterator[StreamChunk]:
    """The usage chunk, when the caller asked for one (``stream_options.include_usage``)."""
    if include_usage(turn) and turn.usage is not None:
        yield StreamChunk(usage=turn.usage)


class TextGate:
    """Streams prose, but holds whitespace-only text and everything after the first call;
    with ``hold`` it streams no text at all (the caller decides at the end)."""

    def __init__(self, *, hold: bool = False) -> None:
        self.pending = ""
        self.emitted = ""
        self.after_call = ""
        """Prose that came after the first call."""
        self.tail = ""
        """Everything from the first call on, as written (calls included)."""
        self.held = ""
        """Prose held back because of ``hold``."""
        self.hold = hold

    def text(self, text: str, *, call_seen: bool) -> str:
        if call_seen:
            self.after_call += self.pending + text
            self.pending = ""
            return ""
        if self.hold:
            self.held += text
            return ""
        self.pending += text
        if not self.pending.strip():
            return ""
        out, self.pending = self.pending, ""
        if not self.emitted:
            out = out.lstrip()
        self.emitted += out
        return out

    def flush(self, text: str) -> str:
        out = (self.pending + text).strip() if not self.emitted else self.pending + text
        self.pending = ""
        self.emitted += out
        return out


def texts(segments: Sequence[Segment], calls: list[ParsedCall], gate: TextGate) -> list[str]:
    """Feed parsed segments through the gate; collect calls; return the text to send now."""
    out = []
    for seg in segments:
        if seg.kind == "calls" or calls:
            gate.tail += seg.text
        if seg.kind == "calls":
            calls.extend(seg.calls)
        elif seg.kind == "text":
            text = gate.text(seg.text, call_seen=bool(calls))
            if text:
                out.append(text)
    return out


class StreamedReply:
    """One emulated reply read as it streams (sans-IO): the dialect's parser, the prose through
    a :class:`TextGate`, the calls and an explicit "no tool" collected."""

    __slots__ = ("calls", "declined", "gate", "marked", "parser")

    def __init__(self, parser: ReplyParser, gate: TextGate) -> None:
        self.parser = parser
        self.gate = gate
        self.calls: list[ParsedCall] = []
        self.declined = False
        self.marked = False
        """A marker token was read (``<|python_tag|>``, dropped from the prose)."""

    def feed(self, content: str) -> Sequence[str]:
        """The prose to send now, for the next piece of the reply."""
        segments = self.parser.feed(content)
        return self._read(segments) if segments else ()

    def finish(self) -> Sequence[str]:
        """The prose to send now that the reply has ended."""
        return self._read(self.parser.finish())

    def _read(self, segments: Sequence[Segment]) -> list[str]:
        for seg in segments:
            if seg.declined:
                self.declined = True
            if seg.kind == "marker":
                self.marked = True
        return texts(segments, self.calls, self.gate)


def call_chunks(calls: Sequence[ParsedCall]) -> list[StreamChunk]:
    """Tool-call deltas: id, type and name first, then the arguments in fragments."""
    out = []
    for i, call in enumerate(calls):
        out.append(
            StreamChunk(
                tool_calls=(ToolCallDelta(i, id=emulated_id(i), name=call.name, arguments=""),)
            )
        )
        arguments = call.arguments_json
        for start in range(0, len(arguments), ARGUMENT_FRAGMENT):
            piece = arguments[start : start + ARGUMENT_FRAGMENT]
            out.append(StreamChunk(tool_calls=(ToolCallDelta(i, arguments=piece),)))
    return out
