"""Native streams: relayed as they come, with the same judgement as a non-streamed native reply.

* :func:`relay` (``auto``/``off`` with tools): every upstream chunk is passed on with its own
  fields (other choices, ``logprobs``, ``reasoning_content`` …); only the first choice's
  ``content`` is run through the incremental parser, so that a call written as text (the
  llama-server habit) comes out as a tool call — prose streams as it arrives, held back only
  while it might be a call. Native tool-call deltas are held until the reply ends and then
  judged like a non-streamed reply (:func:`~toolshim.engine.native.settle_native`): kept,
  trimmed, or, outside ``off``, sent to emulation.
* :func:`held` (``fallback``, and a ``tool_choice`` that demands a call): the whole native
  reply is held, judged, and either relayed as it came, sent as the settled reply, or emulated.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace

from toolshim.accumulate import ChoiceAccumulator
from toolshim.dialects.extract import ReplyParser
from toolshim.dialects.interpret import ParsedCall
from toolshim.engine.emulate import check
from toolshim.engine.native import (
    QUOTED_WARNING,
    WROTE_A_CALL,
    emulates_text_calls,
    settle_native,
    unusable_text_call,
)
from toolshim.engine.nocalls import stripped_warning, writes_a_call
from toolshim.engine.quoted import QUOTING_ROLES, quotes_the_conversation
from toolshim.engine.stream_parts import (
    NeedsEmulation,
    TextGate,
    call_chunks,
    raise_rejected,
    texts,
    usage_chunks,
)
from toolshim.engine.turn import RESCUED_WARNING, Turn
from toolshim.errors import UpstreamError
from toolshim.types import ChatRequest, Choice, Completion, Message, StreamChunk, ToolCallDelta

__all__ = ["held", "relay"]

Learn = Callable[[UpstreamError], bool]


def new_call_id() -> str:
    """``call_`` and 24 hex digits: the id of a native call its upstream sent without one."""
    return f"call_{secrets.token_hex(12)}"


async def relay(
    turn: Turn, request: ChatRequest, *, rescue_text: bool = True, learn: Learn | None = None
) -> AsyncIterator[StreamChunk]:
    """Relay a native stream with tools (see the module docstring); ``rescue_text`` runs the
    first choice's text through the parser."""
    parser = ReplyParser(turn.request.function_tools, markup=turn.markup)
    gate = TextGate()
    calls: list[ParsedCall] = []
    native = ChoiceAccumulator()
    declined = False
    finish: str | None = None
    first = True
    try:
        async for chunk in turn.open_stream(request):
            first = False
            rest, content, deltas, choice_finish = _split_first_choice(chunk)
            finish = choice_finish or finish
            turn.add_usage(chunk.usage)
            if rest is not None:
                yield rest
            if deltas:
                if not native.has_calls:
                    # The upstream calls natively after all: what the parser holds is prose.
                    pending = gate.flush(gate.tail + parser.pending)
                    if pending:
                        yield StreamChunk(content=pending)
                native.add_calls(deltas)
            if content:
                if native.has_calls or not rescue_text:
                    gate.emitted += content
                    yield StreamChunk(content=content)
                else:
                    segments = parser.feed(content)
                    declined |= any(s.declined for s in segments)
                    for text in texts(segments, calls, gate):
                        yield StreamChunk(content=text)
    except UpstreamError as exc:
        raise_rejected(exc, first, learn)
        raise
    if native.has_calls:
        completion = _completion(gate.emitted, native, finish)
        settled = settle_native(turn, completion, rescue_text=False)
        if settled is None:
            raise NeedsEmulation
        for chunk in _calls_as_chunks(settled):
            yield chunk
        finish = settled.finish_reason or "tool_calls"
    else:
        segments = parser.finish()
        declined |= any(s.declined for s in segments)
        for text in texts(segments, calls, gate):
            yield StreamChunk(content=text)
        quoted = bool(calls) and quotes_the_conversation(turn, calls, QUOTING_ROLES)
        if quoted:
            turn.warn(QUOTED_WARNING)  # text the model was shown: it stays text
            calls = []
        verdict = check(turn, calls, finish, native=True)
        if quoted:
            if gate.tail:
                yield StreamChunk(content=gate.flush(gate.tail))
        elif turn.request.choice.kind == "none" and writes_a_call(turn, calls, declined):
            # A call written as text although none may be made: cut out of the answer.
            if not (gate.emitted + gate.after_call).strip():
                turn.warn(WROTE_A_CALL)
                raise NeedsEmulation
            turn.warn(stripped_warning(turn))
            prose = gate.flush(gate.after_call).rstrip()
            if prose:
                yield StreamChunk(content=prose)
        elif calls and verdict.ok:
            turn.warn(RESCUED_WARNING)
            for chunk in call_chunks(verdict.calls):
                yield chunk
            finish = "tool_calls"
        elif emulates_text_calls(turn, calls, gate.emitted + gate.after_call):
            # Nothing but a call written as text, unusable: emulated, as settle_native does.
            turn.warn(unusable_text_call(verdict.problems))
            raise NeedsEmulation
        elif gate.tail:
            yield StreamChunk(content=gate.flush(gate.tail))
    yield StreamChunk(finish_reason=finish or "stop")
    async for chunk in usage_chunks(turn):
        yield chunk


async def held(
    turn: Turn, request: ChatRequest, *, rescue_text: bool, learn: Learn | None = None
) -> AsyncIterator[StreamChunk]:
    """Hold the whole native reply, judge it, then relay it, send it settled, or emulate."""
    kept: list[StreamChunk] = []
    try:
        async for chunk in turn.open_stream(request):
            turn.add_usage(chunk.usage)
            kept.append(chunk)
    except UpstreamError as exc:
        raise_rejected(exc, not kept, learn)
        raise
    completion = _reassemble(kept)
    settled = settle_native(turn, completion, rescue_text=rescue_text)
    if settled is None:
        raise NeedsEmulation
    if settled is completion:
        for chunk in kept:
            yield chunk
        return
    # The reply changed (calls rescued or trimmed): what the upstream sent besides the first
    # choice's text and calls (reasoning, logprobs, other choices) still goes out as it came.
    for chunk in kept:
        rest = _split_first_choice(chunk)[0]
        if rest is not None:
            yield rest
    yield StreamChunk(role="assistant")
    if settled.message.text and not settled.tool_calls:
        yield StreamChunk(content=settled.message.text)
    for chunk in _calls_as_chunks(settled):
        yield chunk
    yield StreamChunk(finish_reason=settled.finish_reason or "stop")
    async for chunk in usage_chunks(turn):
        yield chunk


def _split_first_choice(
    chunk: StreamChunk,
) -> tuple[StreamChunk | None, str, tuple[ToolCallDelta, ...], str | None]:
    """Take the first choice's ``content``, tool-call deltas and ``finish_reason`` out of an
    upstream chunk.

    Returns what is left of the chunk (None when nothing is), the content, the tool-call
    deltas and the finish reason. Everything else stays in the chunk as the upstream sent it.
    """
    choices = () if chunk.choiceless else (chunk, *chunk.other_choices)
    first = next((c for c in choices if c.choice_index == 0), None)
    if first is None:
        return chunk if choices else None, "", (), None
    content, deltas, finish = first.content or "", first.tool_calls, first.finish_reason
    if first.role is not None or first.extra or first.choice_extra.get("logprobs") is not None:
        stripped = replace(first, content=None, tool_calls=(), finish_reason=None)
        if first is chunk:  # (the common case: one choice, or the first listed)
            return stripped, content, deltas, finish
        left = [stripped if c is first else c for c in choices]
    else:
        left = [c for c in choices if c is not first]
    if not left:  # (a usage chunk is sent once, at the end, by the engine)
        return None, content, deltas, finish
    rest = replace(  # the chunk's own fields ride on the first choice left
        left[0],
        usage=chunk.usage,
        meta=chunk.meta,
        model=chunk.model,
        event_extra=chunk.event_extra,
        other_choices=tuple(left[1:]),
    )
    return rest, content, deltas, finish


def _completion(text: str, native: ChoiceAccumulator, finish: str | None) -> Completion:
    """A native reply as a completion: ``text`` and the calls put together (a call sent
    without an id gets one)."""
    message = Message(
        "assistant", text or None, tool_calls=native.tool_calls(lambda _: new_call_id())
    )
    choice = Choice(0, message, finish_reason=finish)
    return Completion(id="", model="", created=int(time.time()), choices=(choice,))


def _reassemble(kept: Sequence[StreamChunk]) -> Completion:
    """Held native chunks put back together as one completion (the first choice)."""
    text: list[str] = []
    native = ChoiceAccumulator()
    finish = None
    for chunk in kept:
        _, content, tool_deltas, choice_finish = _split_first_choice(chunk)
        text.append(content)
        if tool_deltas:
            native.add_calls(tool_deltas)
        finish = choice_finish or finish
    return _completion("".join(text), native, finish)


def _calls_as_chunks(completion: Completion) -> list[StreamChunk]:
    """A settled reply's tool calls as deltas: id, type and name first, then the arguments."""
    out = []
    for i, call in enumerate(completion.tool_calls):
        out.append(
            StreamChunk(
                tool_calls=(
                    ToolCallDelta(i, id=call.id, name=call.name, arguments="", extra=call.extra),
                )
            )
        )
        if call.arguments:
            out.append(StreamChunk(tool_calls=(ToolCallDelta(i, arguments=call.arguments),)))
    return out
