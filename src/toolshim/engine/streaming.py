"""Streaming through the engine: where each stream goes, and emulated streams.

* Native, no tools: upstream chunks pass through untouched.
* Native with tools: :mod:`toolshim.engine.relay` (calls written as text are rescued; native
  calls are judged like a non-streamed reply; ``fallback`` and a forced ``tool_choice`` hold
  the whole reply first).
* Emulated: text streams as it arrives (except where it may not be the answer: under a forced
  ``tool_choice``, in an attempt after a re-ask, or when the caller asked for a
  ``response_format``); calls are validated when the reply ends and sent as ``tool_calls``
  deltas, id/type/name first, then argument fragments. What follows each reply (re-ask,
  return, degrade) is decided by :mod:`toolshim.engine.driver`, as for a whole reply.

The last chunk always carries the ``toolshim`` metadata; each stream opens with one role chunk.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from functools import partial
from typing import Any, assert_never

import toolshim.engine.confidence as confidence
import toolshim.engine.driver as steps
import toolshim.engine.relay as relay
from toolshim.accumulate import ChoiceAccumulator
from toolshim.dialects.calls import ParsedCall
from toolshim.engine.answer_first import STEP_WARNING as ANSWER_FIRST_STEP_WARNING
from toolshim.engine.answer_first import WARNING as ANSWER_FIRST_WARNING
from toolshim.engine.answer_first import answers_first, nothing_more_asked
from toolshim.engine.emulate import (
    check,
    emulation_request,
    finished_calls,
    refuse_several_choices,
    taken_calls,
    well_formed,
    whole_attempt,
)
from toolshim.engine.next_step import next_step, planned_first, step_before_giving_up
from toolshim.engine.nocalls import stream_without_calls
from toolshim.engine.routes import STRIPPED_WARNING, Route, Router, strip_request
from toolshim.engine.stream_parts import (
    NeedsEmulation,
    Rejected,
    StreamedReply,
    TextGate,
    call_chunks,
    first_choice,
    raise_rejected,
    usage_chunks,
)
from toolshim.engine.turn import Turn, dropped_calls_warning, with_meta
from toolshim.engine.unoffered import UnofferedFilter
from toolshim.errors import ToolshimError, UpstreamError
from toolshim.types import ChatRequest, Mode, StreamChunk

__all__ = ["serve"]

_OPENING_TOKENS = 8
"""Log-probability entries kept from a stream: the opening is judged at its first visible one."""


async def serve(turn: Turn, route: Route, router: Router) -> AsyncIterator[StreamChunk]:
    """The chunks of one streamed turn on ``route``: one role chunk first, the metadata on the last (and,
    for a legacy ``functions`` request, each chunk marked to be written in that shape). An
    error raised on the way carries the turn's metadata.

    On the way it drops a second role-only chunk (a native attempt that ended in emulation
    opens twice), puts the first choice's calls together to warn at the end about a call
    that repeats one already answered and about calls a legacy answer cannot hold, and holds
    one chunk back so that the metadata can ride on the last one. (One generator does all of
    it: each layer of async generators costs CPU on every chunk of every stream.)
    """
    legacy = turn.request.legacy_functions
    calls = ChoiceAccumulator()
    role_sent = False
    previous: StreamChunk | None = None
    sent = False
    try:
        async for chunk in _route(turn, route, router):
            if chunk.role is not None:
                role_only = _role_only(chunk)
                if role_only and role_sent:
                    continue
                role_sent = True
            elif not role_sent and any(c.role for c in chunk.other_choices):
                role_sent = True
            if chunk.tool_calls and chunk.choice_index == 0:
                calls.add_calls(chunk.tool_calls)
            if previous is not None:
                yield replace(previous, legacy=True) if legacy else previous
                sent = True
            previous = chunk
        made = calls.tool_calls()
        if legacy and len(made) > 1:
            turn.warn(dropped_calls_warning(len(made)))
        turn.returned(made)
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


def _route(turn: Turn, route: Route, router: Router) -> AsyncIterator[StreamChunk]:
    """The stream of ``route`` (the generator of that route itself, where no fallback has to
    be watched for)."""
    match route:
        case Route.NATIVE:  # off, or no tools offered
            judged = turn.request.wants_tools and router.rescue and turn.mode is not Mode.FORCE
            return _native(turn, turn.request, judged=judged, rescue_text=judged)
        case Route.EMULATE:
            return _emulated(turn)
        case Route.STRIP:
            turn.warn(STRIPPED_WARNING)
            return _native(turn, strip_request(turn, stream=True))
        case Route.NATIVE_OR_STRIP:
            return _native_or_strip(turn, router)
        case Route.TRY_NATIVE:
            return _try_native(turn, router)
        case _:
            assert_never(route)


async def _native_or_strip(turn: Turn, router: Router) -> AsyncIterator[StreamChunk]:
    learn = partial(router.learn_rejection, turn)
    try:
        async for chunk in _native(turn, turn.request, learn=learn):
            yield chunk
    except Rejected:
        turn.warn(STRIPPED_WARNING)
        async for chunk in _native(turn, strip_request(turn, stream=True)):
            yield chunk


async def _try_native(turn: Turn, router: Router) -> AsyncIterator[StreamChunk]:
    learn = partial(router.learn_rejection, turn)
    native = turn.request
    rescue = router.rescue
    hold = turn.mode is Mode.FALLBACK or turn.request.choice.kind in ("required", "function")
    source = (
        relay.held(turn, native, rescue_text=rescue, learn=learn)
        if hold
        else _native(turn, native, judged=True, rescue_text=rescue, learn=learn)
    )
    try:
        async for chunk in source:
            yield chunk
    except (Rejected, NeedsEmulation):
        async for chunk in _emulated(turn):
            yield chunk


def _native(
    turn: Turn,
    request: ChatRequest,
    *,
    judged: bool = False,
    rescue_text: bool = False,
    learn: relay.Learn | None = None,
) -> AsyncIterator[StreamChunk]:
    """A native stream: judged by :func:`relay.relay`, or passed through untouched."""
    if judged:
        return relay.relay(turn, request, rescue_text=rescue_text, learn=learn)
    return _passed_through(turn, request, learn)


async def _passed_through(
    turn: Turn, request: ChatRequest, learn: relay.Learn | None
) -> AsyncIterator[StreamChunk]:
    unoffered = UnofferedFilter(turn, None if request.tools else ())
    first = True
    try:
        async for chunk in turn.open_stream(request):
            first = False
            if unoffered.may_change(chunk):
                chunk = unoffered.feed(chunk)
            turn.add_usage(chunk.usage)
            yield chunk
    except UpstreamError as exc:
        raise_rejected(exc, first, learn)
        raise
    unoffered.finish()


async def _emulated(turn: Turn) -> AsyncIterator[StreamChunk]:
    """An emulated stream: each attempt read into an :class:`.driver.Attempt` (streamed, its prose
    sent as it comes unless the driver holds it; a decision request whole, it is JSON), the
    next step from the turn's :class:`.driver.TurnDriver`."""
    refuse_several_choices(turn)
    turn.mark_emulated()
    yield StreamChunk(role="assistant")
    request = turn.request
    if not request.wants_tools:
        body = partial(emulation_request, turn, stream=True)
        async for chunk in stream_without_calls(turn, body):
            yield chunk
        return
    turn.nothing_asked = nothing_more_asked(turn)
    if answers_first(turn):
        finished = False
        async for chunk in _answer_without_tools(turn, first=True):
            if chunk.finish_reason is not None and not finished:
                finished = True
                turn.warn(ANSWER_FIRST_WARNING)
            yield chunk
        if finished:
            return
        turn.warn(ANSWER_FIRST_STEP_WARNING)
    first = await planned_first(turn, partial(emulation_request, turn))
    if first is not None:
        for chunk in call_chunks([first[0]]):
            yield chunk
        yield StreamChunk(finish_reason="tool_calls")
        return
    driver = steps.driver_for(turn)
    while True:
        if driver.decision:  # a JSON decision: read whole
            gate = TextGate(hold=True)
            attempt = whole_attempt(turn, await turn.call(emulation_request(turn, driver.messages)))
        else:
            gate = TextGate(hold=driver.hold_text)
            reply = StreamedReply(
                turn.dialect.parser(request.function_tools, markup=turn.markup), gate
            )
            finish = None
            opening = confidence.judged(turn, first_attempt=not driver.messages)
            tokens: list[Any] = []
            request_body = emulation_request(turn, driver.messages, stream=True)
            async for chunk in first_choice(turn, request_body):
                finish = chunk.finish_reason or finish
                if opening and len(tokens) < _OPENING_TOKENS:
                    tokens += _chunk_tokens(chunk)
                if chunk.content:
                    for text in reply.feed(chunk.content):
                        yield StreamChunk(content=text)
            for text in reply.finish():
                yield StreamChunk(content=text)
            unsure = confidence.doubt(tokens) if opening else None
            attempt = _streamed_attempt(turn, reply, finish, unsure)
        match steps.advance(turn, driver, attempt):
            case steps.Reask():
                continue
            case steps.ReturnCalls(calls=valid):
                valid = await finished_calls(turn, valid, driver.messages)
                for chunk in call_chunks(valid):
                    yield chunk
                yield StreamChunk(finish_reason="tool_calls")
            case steps.ReturnText(text=text, finish=finish):
                if text := gate.flush(text):
                    yield StreamChunk(content=text)
                yield StreamChunk(finish_reason=finish or "stop")
            case steps.NextStep(text=text, finish=finish):
                step = await next_step(
                    turn, driver.messages, partial(emulation_request, turn), text
                )
                if step is not None:
                    for chunk in call_chunks([step]):
                        yield chunk
                    yield StreamChunk(finish_reason="tool_calls")
                elif driver.silent_on_failure(text, finish):
                    turn.warn(steps.UNREPORTED_WARNING)
                    async for chunk in _answer_without_tools(turn):
                        yield chunk
                    return
                else:
                    if text := gate.flush(text):
                        yield StreamChunk(content=text)
                    yield StreamChunk(finish_reason=finish or "stop")
            case steps.CutOff(text=text):
                if text := gate.flush(text):
                    yield StreamChunk(content=text)
                yield StreamChunk(finish_reason="length")
            case steps.AnswerWithoutTools(empty=empty, take_calls=take):
                step = await step_before_giving_up(
                    turn, driver.messages, partial(emulation_request, turn), attempt.prose, empty
                )
                calls: tuple[ParsedCall, ...] = () if step is None else (step,)
                if not calls and take:
                    answered = False
                    async for chunk in _answer_without_tools(turn, first=True):
                        answered = True
                        yield chunk
                    if answered:
                        return
                    calls = taken_calls(turn)
                if calls:
                    for chunk in call_chunks(calls):
                        yield chunk
                    yield StreamChunk(finish_reason="tool_calls")
                else:
                    async for chunk in _answer_without_tools(turn):
                        yield chunk
                    return
            case steps.GiveUp(error=error):
                raise error
            case step:
                assert_never(step)
        break
    async for chunk in usage_chunks(turn):
        yield chunk


def _chunk_tokens(chunk: StreamChunk) -> list[Any]:
    """The ``logprobs.content`` entries of an upstream chunk of the first choice."""
    return confidence.logprob_tokens(chunk.choice_extra.get("logprobs"))


def _streamed_attempt(
    turn: Turn, reply: StreamedReply, finish: str | None, unsure: float | None = None
) -> steps.Attempt:
    """A streamed reply, read to its end, as an attempt: its prose held or already sent;
    ``unsure``: how likely the call that opened it was, where judged and under the bar."""
    verdict = check(turn, reply.calls, finish)
    if turn.trimmed_reply is not None:
        finish = None  # a loop of repeats cut by max_tokens: its calls are the reply
    gate = reply.gate
    return steps.Attempt(
        problems=verdict.problems,
        calls=verdict.calls,
        prose=gate.held + gate.after_call,
        sent=gate.emitted,
        declined=reply.declined,
        finish=finish,
        truncated=finish == "length",
        answer_now=turn.answer_now,
        reply=turn.trimmed_reply or reply.parser.received,
        unsure=unsure,
        formed=well_formed(reply.calls),
    )


def _answer_without_tools(turn: Turn, *, first: bool = False) -> AsyncIterator[StreamChunk]:
    """The answer asked for without tool instructions (no call JSON is returned as it);
    ``first``: see :func:`~toolshim.engine.nocalls.stream_without_calls`."""
    body = partial(emulation_request, turn, instructions=False, stream=True)
    return stream_without_calls(turn, body, first=first)


def _role_only(chunk: StreamChunk) -> bool:
    """Nothing but a role: no text, calls or finish, and nothing an upstream sent with it."""
    return not (
        chunk.content
        or chunk.tool_calls
        or chunk.finish_reason is not None
        or chunk.usage is not None
        or chunk.model is not None
        or chunk.extra
        or chunk.choice_extra
        or chunk.event_extra
        or chunk.other_choices
    )
