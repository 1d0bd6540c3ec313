"""The OpenAI Responses protocol (``POST /v1/responses``, for Codex CLI and the Agents SDK): its
codec for the proxy.

Requests are read by :mod:`.input` (input items) and
:mod:`.tools` (tools, ``tool_choice``); answers, stream events and errors are
written by :mod:`.events`; errors have OpenAI's shape
(``{"error": {"message", "type", "param", "code"}}``), as on chat completions.

``previous_response_id`` is served from a :class:`~toolshim.responses_store.ResponseStore`:
the codec the proxy serves with is made for its engine (:meth:`ResponsesCodec.for_engine`),
over the store beside the engine's registry, owned by the caller (another caller's id is
answered as an unknown one). A request with ``store: false`` stores nothing; an unknown id is
a 400; a response that could not be stored comes back with ``store: false`` and a warning
saying why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from toolshim.responses_store import ResponseStore, open_response_store
from toolshim.types import ChatRequest, Completion, Metadata
from toolshim.wire.base import Decoded
from toolshim.wire.openai_chat import CODEC as CHAT
from toolshim.wire.openai_responses.events import ResponsesStreamEncoder, encode_completion
from toolshim.wire.openai_responses.input import (
    ResponsesContext,
    ResponsesRequest,
    decode_request,
)

if TYPE_CHECKING:
    from toolshim.engine import Engine

__all__ = ["CODEC", "ResponsesCodec", "ResponsesRequest"]


def _context(request: ChatRequest) -> ResponsesContext:
    context = request.context if isinstance(request, ResponsesRequest) else None
    if context is None:  # a plain chat request (not decoded here): answer it all the same
        from toolshim.wire.openai_responses.input import new_response_id

        context = ResponsesContext(id=new_response_id(), model=request.model, created_at=0)
    return context


class ResponsesCodec:
    """``POST /v1/responses``."""

    name = "responses"

    def __init__(self, store: ResponseStore | None = None) -> None:
        self.store = store or ResponseStore()

    def for_engine(self, engine: Engine, **bounds: Any) -> ResponsesCodec:
        """The codec for one proxy app: responses kept beside ``engine``'s registry, held to
        ``bounds`` (:class:`~toolshim.responses_store.ResponseStore`'s keyword arguments)."""
        return ResponsesCodec(open_response_store(engine.registry, **bounds))

    def decode(self, payload: dict[str, Any]) -> Decoded:
        previous = payload.get("previous_response_id")
        history = self.store.conversation(previous) if previous is not None else []
        return decode_request(payload, history)

    def encode(self, completion: Completion, request: ChatRequest) -> dict[str, Any]:
        context = _context(request)
        data = encode_completion(completion, context)
        return self._save(data, context) if context.store else data

    def stream_encoder(self, request: ChatRequest) -> ResponsesStreamEncoder:
        context = _context(request)
        on_complete = None
        if context.store:

            def on_complete(response: dict[str, Any]) -> dict[str, Any]:
                return self._save(response, context)

        return ResponsesStreamEncoder(context, on_complete)

    def _save(self, response: dict[str, Any], context: ResponsesContext) -> dict[str, Any]:
        """Store ``response``; one that could not be stored says so (``store`` false, and why
        in its warnings)."""
        reason = self.store.save(
            response, context.input_items, previous=context.previous_response_id
        )
        if reason is None:
            return response
        meta = dict(response.get("toolshim") or {})
        warning = (
            f"this response was not stored, so previous_response_id cannot continue it: {reason}"
        )
        meta["warnings"] = [*meta.get("warnings", ()), warning]
        return {**response, "store": False, "toolshim": meta}

    def error(self, exc: BaseException, meta: Metadata | None = None) -> tuple[int, dict[str, Any]]:
        return CHAT.error(exc, meta)


CODEC = ResponsesCodec()
"""The codec in the route table; the proxy serves with ``CODEC.for_engine(engine)``."""
