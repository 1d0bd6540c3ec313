"""Streaming through the engine: native streams relayed, emulated streams built from model text.

* Native, no tools: upstream chunks pass through untouched.
* Native with tools (``auto``/``off``): content is run through the incremental parser, so a
  call written as text (```json fenced, the llama-server habit) comes out as a tool call; prose
  streams as it arrives, held back only while it might still be a call.
* ``fallback`` (and a required ``tool_choice``): the native reply is held until it is known to
  contain tool calls; if it does not, the turn is emulated.
* Emulated: text streams as it arrives; calls are validated when the reply ends (re-asking if
  needed) and sent as ``tool_calls`` deltas, id/type/name first, then argument fragments.

The last chunk always carries the ``toolshim`` metadata.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from toolshim.dialects.extract import ReplyParser, Segment
from toolshim.dialects.interpret import ParsedCall
from toolshim.engine.emulate import (
    check,
    cut_off,
    emulation_body,
    give_up_error,
    judge,
    native_problems,
    rescue,
)
from toolshim.engine.turn import RESCUED_WARNING, Turn, emulated_id
from toolshim.engine.validate import reask_message
from toolshim.errors import UpstreamError
from toolshim.types import Completion, Message, Mode, StreamChunk, ToolCallDelta
from toolshim.wire.openai import chunk_from_dict, completion_from_dict, request_to_body

if TYPE_CHECKING:
    from toolshim.engine.engine import Engine

__all__ = ["ARGUMENT_FRAGMENT", "call_chunks", "serve"]

ARGUMENT_FRAGMENT = 48
"""Characters of arguments per streamed fragment."""


async def serve(engine: Engine, turn: Turn) -> AsyncIterator[StreamChunk]:
    """The chunks of one streamed turn, the last one carrying the metadata."""
    async for chunk in _with_meta(turn, _route(engine, turn)):
        yield chunk


async def _route(engine: Engine, turn: Turn) -> AsyncIterator[StreamChunk]:
    from toolshim.engine.engine import strip_body

    route = engine.route(turn)
    rescue = engine.options.rescue and turn.mode is not Mode.FORCE
    if route == "native":
        async for chunk in _native(turn, request_to_body(turn.request), rescue=rescue):
            yield chunk
    elif route == "emulate":
        async for chunk in _emulated(turn):
            yield chunk
    elif route == "strip":
        turn.warn("tools dropped: the model has no known native tool support")
        async for chunk in _native(turn, strip_body(turn, stream=True), rescue=False):
            yield chunk
    elif route == "native-or-strip":
        try:
            async for chunk in _native(
                turn, request_to_body(turn.request), rescue=False, engine=engine
            ):
                yield chunk
        except _Rejected:
            turn.warn("tools dropped: the model has no known native tool support")
            async for chunk in _native(turn, strip_body(turn, stream=True), rescue=False):
                yield chunk
    else:
        held = turn.mode is Mode.FALLBACK or turn.request.choice.kind in ("required", "function")
        source = (
            _held_native(engine, turn)
            if held
            else _native(turn, request_to_body(turn.request), rescue=rescue, engine=engine)
        )
        try:
            async for chunk in source:
                yield chunk
        except (_Rejected, _NeedsEmulation):
            async for chunk in _emulated(turn):
                yield chunk


class _Rejected(Exception):
    """The upstream rejected ``tools`` before streaming anything (the fact was learned)."""


class _NeedsEmulation(Exception):
    """The held native reply had no usable tool calls."""


async def _open(
    turn: Turn, body: dict[str, Any], engine: Engine | None = None
) -> AsyncIterator[dict[str, Any]]:
    """Upstream chunks; a tools rejection before the first chunk becomes :class:`_Rejected`."""
    stream = turn.open_stream({**body, "stream": True})
    first = True
    try:
        async for data in stream:
            first = False
            yield data
    except UpstreamError as exc:
        if first and engine is not None and engine.learn_rejection(turn, exc):
            raise _Rejected from exc
        raise


def _include_usage(turn: Turn) -> bool:
    options = turn.request.params.get("stream_options")
    return isinstance(options, dict) and bool(options.get("include_usage"))


async def _native(
    turn: Turn, body: dict[str, Any], *, rescue: bool, engine: Engine | None = None
) -> AsyncIterator[StreamChunk]:
    if rescue and turn.request.wants_tools:
        async for chunk in _rescuing_relay(turn, body, engine):
            yield chunk
        return
    async for data in _open(turn, body, engine):
        yield _raw(turn, data)


async def _rescuing_relay(
    turn: Turn, body: dict[str, Any], engine: Engine | None
) -> AsyncIterator[StreamChunk]:
    """Relay a native stream, turning calls written in the content into tool calls.

    Text streams as it comes, held back only while it may be a call. When the calls found in
    the text are not valid, the text held from the first of them on is sent as it was written.
    """
    parser = ReplyParser(turn.request.function_tools)
    gate = _TextGate()
    calls: list[ParsedCall] = []
    native_calls = False
    finish: str | None = None
    started = False
    async for chunk in _first_choice(turn, body, engine):
        if not started:
            started = True
            yield StreamChunk(role="assistant", content="")
        finish = chunk.finish_reason or finish
        if chunk.tool_calls and not native_calls:
            native_calls = True  # the upstream calls natively after all: relay from here on
            text = gate.flush(gate.tail + parser.pending)
            if text:
                yield StreamChunk(content=text)
        if native_calls:
            if chunk.tool_calls or chunk.content:
                yield StreamChunk(content=chunk.content, tool_calls=chunk.tool_calls)
        elif chunk.content:
            for text in _texts(parser.feed(chunk.content), calls, gate):
                yield StreamChunk(content=text)
    if not native_calls:
        for text in _texts(parser.finish(), calls, gate):
            yield StreamChunk(content=text)
        verdict = check(turn, calls, finish, native=True)
        if calls and verdict.ok:
            turn.warn(RESCUED_WARNING)
            for call_chunk in call_chunks(verdict.calls):
                yield call_chunk
            finish = "tool_calls"
        elif gate.tail:
            yield StreamChunk(content=gate.flush(gate.tail))
    yield StreamChunk(finish_reason=finish or "stop")
    async for usage_chunk in _usage(turn):
        yield usage_chunk


async def _first_choice(
    turn: Turn, body: dict[str, Any], engine: Engine | None = None
) -> AsyncIterator[StreamChunk]:
    """The first choice's chunks of an upstream stream, with usage counted."""
    async for data in _open(turn, body, engine):
        for chunk in chunk_from_dict(data):
            if chunk.choice_index == 0:
                turn.add_usage(chunk.usage)
                yield chunk


async def _held_native(engine: Engine, turn: Turn) -> AsyncIterator[StreamChunk]:
    """Hold the native reply until it shows tool calls; without any, rescue or emulate."""
    held: list[dict[str, Any]] = []
    passing = False
    async for data in _open(turn, request_to_body(turn.request), engine):
        chunk = _raw(turn, data)
        if passing:
            yield chunk
            continue
        held.append(data)
        if any(c.tool_calls for c in chunk_from_dict(data)):
            passing = True  # native calls are arriving: relay everything as it came
            for item in held:
                yield chunk_from_dict(item)[0]
    if passing:
        return
    completion = _reassemble(held)
    rescued = rescue(turn, completion) if engine.options.rescue else None
    if rescued is None:
        problems = native_problems(turn, completion)
        if problems:
            turn.warn("native reply rejected: " + "; ".join(problems))
        raise _NeedsEmulation
    yield StreamChunk(role="assistant", content="")
    for i, call in enumerate(rescued.message.tool_calls):
        yield StreamChunk(tool_calls=(ToolCallDelta(i, id=call.id, name=call.name, arguments=""),))
        yield StreamChunk(tool_calls=(ToolCallDelta(i, arguments=call.arguments),))
    yield StreamChunk(finish_reason="tool_calls")
    async for chunk in _usage(turn):
        yield chunk


def _raw(turn: Turn, data: dict[str, Any]) -> StreamChunk:
    chunk = chunk_from_dict(data)[0]
    turn.add_usage(chunk.usage)
    return chunk


def _reassemble(held: Sequence[dict[str, Any]]) -> Completion:
    """Held native chunks put back together as one completion (choice 0)."""
    text: list[str] = []
    finish = None
    for data in held:
        for chunk in chunk_from_dict(data):
            if chunk.choice_index == 0:
                text.append(chunk.content or "")
                finish = chunk.finish_reason or finish
    message = {"role": "assistant", "content": "".join(text)}
    return completion_from_dict(
        {"choices": [{"index": 0, "message": message, "finish_reason": finish}]}
    )


async def _emulated(turn: Turn) -> AsyncIterator[StreamChunk]:
    turn.mark_emulated()
    yield StreamChunk(role="assistant", content="")
    request = turn.request
    if not request.wants_tools:
        async for chunk in _plain_text(turn, emulation_body(turn, stream=True)):
            yield chunk
        return
    if turn.strategy.value == "decision":
        async for chunk in _decision(turn):
            yield chunk
        return
    extra: list[Message] = []
    while True:
        parser = turn.dialect.parser(request.function_tools)
        gate = _TextGate(hold=request.choice.kind in ("required", "function"))
        calls: list[ParsedCall] = []
        declined = False
        finish: str | None = None
        async for chunk in _first_choice(turn, emulation_body(turn, extra, stream=True)):
            finish = chunk.finish_reason or finish
            if chunk.content:
                for seg in parser.feed(chunk.content):
                    declined |= seg.declined
                    for text in _texts([seg], calls, gate):
                        yield StreamChunk(content=text)
        for seg in parser.finish():
            declined |= seg.declined
            for text in _texts([seg], calls, gate):
                yield StreamChunk(content=text)
        verdict = check(turn, calls, finish)
        if verdict.ok and verdict.calls:
            for chunk in call_chunks(verdict.calls):
                yield chunk
            yield StreamChunk(finish_reason="tool_calls")
            break
        if verdict.ok:
            if declined and not gate.emitted.strip() and not gate.after_call.strip():
                async for chunk in _plain_text(
                    turn, emulation_body(turn, instructions=False, stream=True)
                ):
                    yield chunk
                return
            text = gate.flush(gate.after_call)
            if text:
                yield StreamChunk(content=text)
            yield StreamChunk(finish_reason=finish or "stop")
            break
        if finish == "length" or turn.reasks >= turn.max_reasks:
            summary = "; ".join(verdict.problems)
            if finish != "length" and request.choice.kind != "auto":
                raise give_up_error(turn, verdict.problems)
            prose = gate.flush(gate.after_call)
            if finish == "length":
                turn.warn(
                    "the reply was cut off by max_tokens before a valid tool call was "
                    f"complete: {summary}"
                )
            elif not (gate.emitted.strip() or prose.strip()):
                # The reply was nothing but a broken call: ask for the answer without tools.
                turn.warn(
                    f"no valid tool call after {turn.reasks} re-ask(s), answered without "
                    f"tools: {summary}"
                )
                async for chunk in _plain_text(
                    turn, emulation_body(turn, instructions=False, stream=True)
                ):
                    yield chunk
                return
            else:
                turn.warn(
                    f"no valid tool call after {turn.reasks} re-ask(s), "
                    f"returned the text answer: {summary}"
                )
            if prose:
                yield StreamChunk(content=prose)
            yield StreamChunk(finish_reason=finish or "stop")
            break
        turn.reasks += 1
        correction = reask_message(
            verdict.problems, request.function_tools, turn.dialect, turn.prompt_options
        )
        extra += [Message("assistant", parser.received), Message("user", correction)]
    async for chunk in _usage(turn):
        yield chunk


async def _decision(turn: Turn) -> AsyncIterator[StreamChunk]:
    """Seed 001's decision request (not streamed: it is JSON), then the streamed final answer."""
    extra: list[Message] = []
    while True:
        completion = await turn.call(emulation_body(turn, extra))
        _, verdict = judge(turn, completion.message.text, completion.finish_reason)
        if verdict.ok and verdict.calls:
            for chunk in call_chunks(verdict.calls):
                yield chunk
            yield StreamChunk(finish_reason="tool_calls")
            async for chunk in _usage(turn):
                yield chunk
            return
        if verdict.ok or (turn.reasks >= turn.max_reasks and turn.request.choice.kind == "auto"):
            if not verdict.ok:
                turn.warn(
                    f"no valid tool call after {turn.reasks} re-ask(s), answered without tools: "
                    + "; ".join(verdict.problems)
                )
            async for chunk in _plain_text(
                turn, emulation_body(turn, instructions=False, stream=True)
            ):
                yield chunk
            return
        if completion.finish_reason == "length":
            cut = cut_off(turn, completion, verdict.problems, None)
            if cut.message.text:
                yield StreamChunk(content=cut.message.text)
            yield StreamChunk(finish_reason="length")
            async for chunk in _usage(turn):
                yield chunk
            return
        if turn.reasks >= turn.max_reasks:
            raise give_up_error(turn, verdict.problems)
        turn.reasks += 1
        correction = reask_message(
            verdict.problems, turn.request.function_tools, turn.dialect, turn.prompt_options
        )
        extra += [Message("assistant", completion.message.text), Message("user", correction)]


async def _plain_text(turn: Turn, body: dict[str, Any]) -> AsyncIterator[StreamChunk]:
    finish = None
    async for chunk in _first_choice(turn, body):
        finish = chunk.finish_reason or finish
        if chunk.content:
            yield StreamChunk(content=chunk.content)
    yield StreamChunk(finish_reason=finish or "stop")
    async for chunk in _usage(turn):
        yield chunk


async def _usage(turn: Turn) -> AsyncIterator[StreamChunk]:
    if _include_usage(turn) and turn.usage is not None:
        yield StreamChunk(usage=turn.usage)


class _TextGate:
    """Streams prose, but holds whitespace-only text and everything after the first call;
    with ``hold`` (a tool_choice that demands a call) it streams no text at all."""

    def __init__(self, *, hold: bool = False) -> None:
        self.pending = ""
        self.emitted = ""
        self.after_call = ""
        """Prose that came after the first call."""
        self.tail = ""
        """Everything from the first call on, as written (calls included)."""
        self.hold = hold

    def text(self, text: str, *, call_seen: bool) -> str:
        if call_seen or self.hold:
            self.after_call += self.pending + text
            self.pending = ""
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


def _texts(segments: Sequence[Segment], calls: list[ParsedCall], gate: _TextGate) -> list[str]:
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


async def _with_meta(turn: Turn, chunks: AsyncIterator[StreamChunk]) -> AsyncIterator[StreamChunk]:
    """Hold one chunk back so that the metadata can ride on the last one."""
    previous: StreamChunk | None = None
    async for chunk in chunks:
        if previous is not None:
            yield previous
        previous = chunk
    from dataclasses import replace

    if previous is None:
        yield StreamChunk(meta=turn.meta())
    else:
        yield replace(previous, meta=turn.meta())
