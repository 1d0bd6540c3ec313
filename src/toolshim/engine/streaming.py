"""Streaming through the engine: where each stream goes, and emulated streams.

* Native, no tools: upstream chunks pass through untouched.
* Native with tools: :mod:`toolshim.engine.relay` (calls written as text are rescued; native
  calls are judged like a non-streamed reply; ``fallback`` and a forced ``tool_choice`` hold
  the whole reply first).
* Emulated: text streams as it arrives (except where it may not be the answer: under a forced
  ``tool_choice``, in an attempt after a re-ask, or when the caller asked for a
  ``response_format``); calls are validated when the reply ends, re-asked if needed, and sent
  as ``tool_calls`` deltas, id/type/name first, then argument fragments.

The last chunk always carries the ``toolshim`` metadata; each stream opens with one role chunk.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from toolshim.dialects.interpret import ParsedCall
from toolshim.engine import relay
from toolshim.engine.emulate import (
    check,
    cut_off,
    emulation_body,
    give_up_error,
    judge,
)
from toolshim.engine.nocalls import stream_without_calls
from toolshim.engine.stream_parts import (
    NeedsEmulation,
    Rejected,
    TextGate,
    call_chunks,
    first_choice,
    open_stream,
    raw_chunk,
    texts,
    usage_chunks,
)
from toolshim.engine.turn import Turn, with_meta
from toolshim.engine.validate import reask_message
from toolshim.errors import ToolshimError
from toolshim.types import Message, Mode, StreamChunk
from toolshim.wire.legacy import dropped_calls_warning
from toolshim.wire.openai import request_to_body

if TYPE_CHECKING:
    from toolshim.engine.engine import Engine

__all__ = ["serve"]

STRIPPED_WARNING = "tools dropped: the model has no known native tool support"


async def serve(engine: Engine, turn: Turn) -> AsyncIterator[StreamChunk]:
    """The chunks of one streamed turn: one role chunk first, the metadata on the last (and,
    for a legacy ``functions`` request, each chunk marked to be written in that shape). An
    error raised on the way carries the turn's metadata.

    On the way it drops a second role-only chunk (a native attempt that ended in emulation
    opens twice), puts the first choice's calls together to warn at the end about a call
    that repeats one already answered and about calls a legacy answer cannot hold, and holds
    one chunk back so that the metadata can ride on the last one. (One generator does all of
    it: each layer of async generators costs CPU on every chunk of every stream.)
    """
    legacy = turn.request.legacy_functions
    calls: dict[int, list[str]] = {}
    role_sent = False
    previous: StreamChunk | None = None
    sent = False
    try:
        async for chunk in _route(engine, turn):
            if chunk.role is not None:
                role_only = (
                    chunk.raw is None
                    and not chunk.content
                    and not chunk.tool_calls
                    and chunk.finish_reason is None
                )
                if role_only and role_sent:
                    continue
                role_sent = True
            elif not role_sent and _raw_has_role(chunk):
                role_sent = True
            if chunk.tool_calls and chunk.choice_index == 0:
                for delta in chunk.tool_calls:
                    name_args = calls.setdefault(delta.index, ["", ""])
                    name_args[0] += delta.name or ""
                    name_args[1] += delta.arguments or ""
            if previous is not None:
                yield replace(previous, legacy=True) if legacy else previous
                sent = True
            previous = chunk
        if legacy and len(calls) > 1:
            turn.warn(dropped_calls_warning(len(calls)))
        turn.warn_repeats((name, arguments) for name, arguments in calls.values())
        turn.calls_returned = bool(calls)
        if previous is None:
            last = StreamChunk(meta=turn.meta())
        else:
            last = replace(previous, meta=turn.meta())
        yield replace(last, legacy=True) if legacy else last
    except ToolshimError as exc:
        with_meta(exc, turn)
        # What came before the error is the caller's too; but a stream that failed before
        # it said anything is left empty, so that the caller gets the error's own status.
        if previous is not None and (sent or previous.content or previous.tool_calls):
            held, previous = previous, None
            yield replace(held, legacy=True) if legacy else held
        raise


def _route(engine: Engine, turn: Turn) -> AsyncIterator[StreamChunk]:
    """The stream of the route the engine picks (the generator of that route itself, where
    no fallback has to be watched for)."""
    from toolshim.engine.engine import strip_body

    route = engine.route(turn)
    rescue = engine.options.rescue
    if route == "native":  # off, or no tools offered
        judged = turn.request.wants_tools and rescue and turn.mode is not Mode.FORCE
        return _native(turn, request_to_body(turn.request), judged=judged, rescue_text=judged)
    if route == "emulate":
        return _emulated(turn)
    if route == "strip":
        turn.warn(STRIPPED_WARNING)
        return _native(turn, strip_body(turn, stream=True))
    if route == "native-or-strip":
        return _native_or_strip(engine, turn)
    return _try_native(engine, turn)


async def _native_or_strip(engine: Engine, turn: Turn) -> AsyncIterator[StreamChunk]:
    from toolshim.engine.engine import strip_body

    learn = partial(engine.learn_rejection, turn)
    try:
        async for chunk in _native(turn, request_to_body(turn.request), learn=learn):
            yield chunk
    except Rejected:
        turn.warn(STRIPPED_WARNING)
        async for chunk in _native(turn, strip_body(turn, stream=True)):
            yield chunk


async def _try_native(engine: Engine, turn: Turn) -> AsyncIterator[StreamChunk]:
    learn = partial(engine.learn_rejection, turn)
    native_body = request_to_body(turn.request)
    rescue = engine.options.rescue
    hold = turn.mode is Mode.FALLBACK or turn.request.choice.kind in ("required", "function")
    source = (
        relay.held(turn, native_body, rescue_text=rescue, learn=learn)
        if hold
        else _native(turn, native_body, judged=True, rescue_text=rescue, learn=learn)
    )
    try:
        async for chunk in source:
            yield chunk
    except (Rejected, NeedsEmulation):
        async for chunk in _emulated(turn):
            yield chunk


def _native(
    turn: Turn,
    body: dict[str, Any],
    *,
    judged: bool = False,
    rescue_text: bool = False,
    learn: relay.Learn | None = None,
) -> AsyncIterator[StreamChunk]:
    """A native stream: judged by :func:`relay.relay`, or passed through untouched."""
    if judged:
        return relay.relay(turn, body, rescue_text=rescue_text, learn=learn)
    return _passed_through(turn, body, learn)


async def _passed_through(
    turn: Turn, body: dict[str, Any], learn: relay.Learn | None
) -> AsyncIterator[StreamChunk]:
    async for data in open_stream(turn, body, learn):
        chunk = raw_chunk(data)
        turn.add_usage(chunk.usage)
        yield chunk


async def _emulated(turn: Turn) -> AsyncIterator[StreamChunk]:
    turn.mark_emulated()
    yield StreamChunk(role="assistant")
    request = turn.request
    if not request.wants_tools:
        body = partial(emulation_body, turn, stream=True)
        async for chunk in stream_without_calls(turn, body):
            yield chunk
        return
    if turn.strategy.value == "decision":
        async for chunk in _decision(turn):
            yield chunk
        return
    formatted = turn.caller_format is not None
    forced = request.choice.kind in ("required", "function")
    extra: list[Message] = []
    streamed = ""  # prose already sent in earlier attempts
    while True:
        parser = turn.dialect.parser(request.function_tools, markup=turn.markup)
        gate = TextGate(hold=formatted or forced or turn.reasks > 0)
        calls: list[ParsedCall] = []
        declined = False
        finish: str | None = None
        async for chunk in first_choice(turn, emulation_body(turn, extra, stream=True)):
            finish = chunk.finish_reason or finish
            if chunk.content:
                for seg in parser.feed(chunk.content):
                    declined |= seg.declined
                    for text in texts([seg], calls, gate):
                        yield StreamChunk(content=text)
        for seg in parser.finish():
            declined |= seg.declined
            for text in texts([seg], calls, gate):
                yield StreamChunk(content=text)
        verdict = check(turn, calls, finish)
        if turn.trimmed_reply is not None:
            finish = None  # a loop of repeats cut by max_tokens: its calls are the reply
        if turn.answer_now:
            async for chunk in _answer_without_tools(turn):
                yield chunk
            return
        said = (gate.emitted + gate.held + gate.after_call).strip()
        if verdict.ok and verdict.calls:
            for chunk in call_chunks(verdict.calls):
                yield chunk
            yield StreamChunk(finish_reason="tool_calls")
            break
        if verdict.ok and (formatted or (declined and not said)):
            # Answer again without tools: in the caller's response_format, or because the
            # model only declined.
            if formatted:
                turn.warn(FORMAT_WARNING)
            async for chunk in _answer_without_tools(turn):
                yield chunk
            return
        if verdict.ok:
            text = gate.flush(gate.held + gate.after_call)
            if text:
                yield StreamChunk(content=text)
            yield StreamChunk(finish_reason=finish or "stop")
            break
        if finish == "length" or turn.reasks >= turn.max_reasks:
            summary = "; ".join(verdict.problems)
            if finish != "length" and not forced:
                # auto: degrade to a text answer; never the broken call's JSON as content.
                prose = (gate.held + gate.after_call).strip()
                if formatted or not (streamed.strip() or gate.emitted.strip() or prose):
                    turn.warn(
                        f"no valid tool call after {turn.reasks} re-ask(s), answered without "
                        f"tools: {summary}"
                    )
                    async for chunk in _answer_without_tools(turn):
                        yield chunk
                    return
                turn.warn(
                    f"no valid tool call after {turn.reasks} re-ask(s), "
                    f"returned the text answer: {summary}"
                )
            elif finish != "length":
                raise give_up_error(turn, verdict.problems)
            else:
                turn.warn(
                    "the reply was cut off by max_tokens before a valid tool call was "
                    f"complete: {summary}"
                )
            prose = gate.flush(gate.held + gate.after_call)
            if prose and not streamed and not (forced and finish != "length"):
                yield StreamChunk(content=prose)
            yield StreamChunk(finish_reason=finish or "stop")
            break
        turn.reasks += 1
        streamed += gate.emitted
        correction = reask_message(
            verdict.problems, request.function_tools, turn.dialect, turn.prompt_options
        )
        reply = turn.trimmed_reply or parser.received
        extra += [Message("assistant", reply), Message("user", correction)]
    async for chunk in usage_chunks(turn):
        yield chunk


FORMAT_WARNING = "answered again without tools, in the caller's response_format"


async def _decision(turn: Turn) -> AsyncIterator[StreamChunk]:
    """Seed 001's decision request (not streamed: it is JSON), then the streamed final answer."""
    extra: list[Message] = []
    while True:
        completion = await turn.call(emulation_body(turn, extra))
        _, verdict = judge(turn, completion.message.text, completion.finish_reason)
        if turn.answer_now:
            async for chunk in _answer_without_tools(turn):
                yield chunk
            return
        if verdict.ok and verdict.calls:
            for chunk in call_chunks(verdict.calls):
                yield chunk
            yield StreamChunk(finish_reason="tool_calls")
            async for chunk in usage_chunks(turn):
                yield chunk
            return
        if verdict.ok or (turn.reasks >= turn.max_reasks and turn.request.choice.kind == "auto"):
            if not verdict.ok:
                turn.warn(
                    f"no valid tool call after {turn.reasks} re-ask(s), answered without tools: "
                    + "; ".join(verdict.problems)
                )
            async for chunk in _answer_without_tools(turn):
                yield chunk
            return
        if completion.finish_reason == "length" and turn.trimmed_reply is None:
            cut = cut_off(turn, completion, verdict.problems, None)
            if cut.message.text:
                yield StreamChunk(content=cut.message.text)
            yield StreamChunk(finish_reason="length")
            async for chunk in usage_chunks(turn):
                yield chunk
            return
        if turn.reasks >= turn.max_reasks:
            raise give_up_error(turn, verdict.problems)
        turn.reasks += 1
        correction = reask_message(
            verdict.problems, turn.request.function_tools, turn.dialect, turn.prompt_options
        )
        reply = turn.trimmed_reply or completion.message.text
        extra += [Message("assistant", reply), Message("user", correction)]


def _answer_without_tools(turn: Turn) -> AsyncIterator[StreamChunk]:
    """The answer asked for without tool instructions (no call JSON is returned as it)."""
    body = partial(emulation_body, turn, instructions=False, stream=True)
    return stream_without_calls(turn, body)


def _raw_has_role(chunk: StreamChunk) -> bool:
    if chunk.raw is None:
        return False
    return any(
        isinstance(c, dict) and (c.get("delta") or {}).get("role")
        for c in chunk.raw.get("choices") or ()
    )
