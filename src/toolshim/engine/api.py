"""The engine's public serving API: one request in core types in, a completion or a stream of
core chunks out, with the turn's ``toolshim`` metadata readable at any time.

The proxy (every protocol's endpoint) and library code built on the engine use this and
nothing deeper::

    answer = engine.answer(request, headers=upstream_headers, warnings=dropped, mode="force")
    completion = await answer.complete()          # or:
    async for chunk in answer.stream(): ...       # the last chunk carries the metadata
    answer.meta(), answer.emulated                # so far (also after an error)

``engine.answer`` validates the options and picks the dialect at once (a bad option raises
there, before anything is sent); an error raised while serving carries the metadata in
``exc.meta``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable
from dataclasses import replace

import toolshim.engine.streaming as streaming
from toolshim.engine.routes import Router, serve_whole
from toolshim.engine.turn import Turn, describe_request, dropped_calls_warning, with_meta
from toolshim.errors import ToolshimError
from toolshim.types import ChatRequest, Completion, Metadata, StreamChunk

__all__ = ["Answer"]

log = logging.getLogger("toolshim.engine")


class Answer:
    """One request being served: :meth:`complete` or :meth:`stream` it, once."""

    __slots__ = ("_router", "_turn")

    def __init__(self, router: Router, turn: Turn, warnings: Iterable[str] = ()) -> None:
        self._router = router
        self._turn = turn
        for warning in warnings:
            turn.warn(warning)
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "← client request (stream=%s, mode=%s)\n%s",
                turn.request.stream,
                turn.mode.value,
                describe_request(turn.request),
            )

    @property
    def request(self) -> ChatRequest:
        """The request as the engine serves it."""
        return self._turn.request

    @property
    def emulated(self) -> bool:
        """True once emulation ran for this request (known after the first streamed chunk)."""
        return self._turn.emulated

    def meta(self) -> Metadata:
        """The ``toolshim`` metadata so far."""
        return self._turn.meta()

    async def complete(self) -> Completion:
        """The whole answer; its ``meta`` is the ``toolshim`` metadata."""
        turn = self._turn
        try:
            router = self._router
            completion = await serve_whole(turn, router.route(turn), router)
        except ToolshimError as exc:
            with_meta(exc, turn)
            raise
        legacy = turn.request.legacy_functions
        if legacy and len(completion.tool_calls) > 1:
            turn.warn(dropped_calls_warning(len(completion.tool_calls)))
        turn.returned(completion.tool_calls)
        return replace(
            completion, usage=turn.usage or completion.usage, meta=turn.meta(), legacy=legacy
        )

    def stream(self) -> AsyncIterator[StreamChunk]:
        """The answer as chunks: one role chunk first, the metadata on the last. Close the
        iterator (``aclose``) to stop early: that closes the upstream request."""
        router, turn = self._router, self._turn
        return streaming.serve(turn, router.route(turn), router)
