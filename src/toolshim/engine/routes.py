"""Where a turn goes (:class:`Route`), and the whole (non-streamed) reply served on each route.

==================  ==========================================================================
route               what is sent upstream
==================  ==========================================================================
NATIVE              the request as it came (``off``, or nothing to emulate)
EMULATE             tools in the prompt, history as text (:mod:`.emulate`)
STRIP               no tools, history as text, a "no tools" note (``strip``, support not "yes")
NATIVE_OR_STRIP     native; a tools rejection is learned and the turn stripped instead
TRY_NATIVE          native; a tools rejection is learned and the turn emulated, a reply
                    without usable calls is judged (:func:`~.native.settle_native`)
==================  ==========================================================================

The engine decides the route (:meth:`toolshim.engine.Engine.route`); the whole reply is served
here and the stream by :mod:`.streaming`, each matching every route exhaustively.
"""

from __future__ import annotations

from dataclasses import replace
from enum import Enum
from typing import Protocol, assert_never

from toolshim.engine.emulate import emulate
from toolshim.engine.history import rewrite_history, strip_note
from toolshim.engine.native import rescue, settle_native
from toolshim.engine.turn import Turn
from toolshim.engine.unoffered import drop_unoffered
from toolshim.errors import UpstreamError
from toolshim.types import ChatRequest, Completion, Mode

__all__ = ["STRIPPED_WARNING", "Route", "Router", "serve_whole", "strip_request"]

STRIPPED_WARNING = "tools dropped: the model has no known native tool support"


class Route(Enum):
    """Where a turn goes (see the module docstring)."""

    NATIVE = "native"
    EMULATE = "emulate"
    STRIP = "strip"
    NATIVE_OR_STRIP = "native-or-strip"
    TRY_NATIVE = "try"


class Router(Protocol):
    """What serving a turn needs from the engine: its route, learning from a tools rejection,
    and whether calls written as text are rescued."""

    @property
    def rescue(self) -> bool: ...

    def route(self, turn: Turn) -> Route: ...

    def learn_rejection(self, turn: Turn, error: UpstreamError) -> bool: ...


async def serve_whole(turn: Turn, route: Route, router: Router) -> Completion:
    """The whole reply of ``turn`` on ``route``."""
    match route:
        case Route.NATIVE:
            completion = drop_unoffered(turn, await turn.call(turn.request))
            if turn.mode is not Mode.FORCE and router.rescue:
                return rescue(turn, completion) or completion
            return completion  # off: native only
        case Route.EMULATE:
            return await emulate(turn)
        case Route.STRIP:
            return await _strip(turn)
        case Route.NATIVE_OR_STRIP:
            try:
                return drop_unoffered(turn, await turn.call(turn.request))
            except UpstreamError as exc:
                if router.learn_rejection(turn, exc):
                    return await _strip(turn)
                raise
        case Route.TRY_NATIVE:
            try:
                completion = await turn.call(turn.request)
            except UpstreamError as exc:
                if router.learn_rejection(turn, exc):
                    return await emulate(turn)
                raise
            # A native reply in auto/fallback: kept, trimmed, rescued, or the turn emulated.
            settled = settle_native(turn, completion, rescue_text=router.rescue)
            return settled if settled is not None else await emulate(turn)
        case _:
            assert_never(route)


async def _strip(turn: Turn) -> Completion:
    turn.warn(STRIPPED_WARNING)
    return drop_unoffered(turn, await turn.call(strip_request(turn)), offered=())


def strip_request(turn: Turn, *, stream: bool = False) -> ChatRequest:
    """Strip mode's request: no tools, history as text, and the "no tools" note."""
    request = turn.request
    messages = rewrite_history(request.messages, turn.dialect, strip_note())
    params = dict(request.params)
    if not stream:
        params.pop("stream_options", None)
    return replace(request, messages=messages, stream=stream, params=params).without_tools()
