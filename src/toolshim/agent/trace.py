"""An upstream wrapper that reports each request body and raw reply, for ``--verbose`` tracing.

It shows what the model really saw (after the engine rewrote the history and put the tools
in the prompt) and what it really answered (before any parsing), like seed 002's debug dump.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import KW_ONLY, dataclass
from typing import Any

from toolshim.accumulate import ChoiceAccumulator
from toolshim.errors import UpstreamError
from toolshim.types import ChatRequest, Completion, StreamChunk
from toolshim.upstreams.base import Upstream, WrappedUpstream
from toolshim.upstreams.chat_completions import request_body
from toolshim.wire.openai_chat import completion_to_dict, usage_to_dict

__all__ = ["TracingUpstream", "reassemble"]

RequestHook = Callable[[Mapping[str, Any]], None]
ReplyHook = Callable[[Mapping[str, Any], Mapping[str, Any]], None]
ErrorHook = Callable[[Mapping[str, Any], UpstreamError], None]


@dataclass(eq=False, repr=False)
class TracingUpstream(WrappedUpstream):
    """Delegates to ``inner``; calls the hooks around every chat request (same ``key``)."""

    inner: Upstream
    _: KW_ONLY
    on_request: RequestHook | None = None
    on_reply: ReplyHook | None = None
    on_error: ErrorHook | None = None

    def __repr__(self) -> str:
        return f"TracingUpstream({self.inner!r})"

    async def complete(
        self, request: ChatRequest, *, headers: Mapping[str, str] | None = None
    ) -> Completion:
        body = request_body(request)
        with self._watching(body):
            reply = await self.inner.complete(request, headers=headers)
        if self.on_reply:
            self.on_reply(body, completion_to_dict(reply))
        return reply

    async def stream(
        self, request: ChatRequest, *, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[StreamChunk]:
        body = request_body(request, stream=True)
        chunks: list[StreamChunk] = []
        with self._watching(body):
            async for chunk in self.inner.stream(request, headers=headers):
                chunks.append(chunk)
                yield chunk
        if self.on_reply:
            self.on_reply(body, reassemble(chunks))

    @contextmanager
    def _watching(self, body: dict[str, Any]) -> Iterator[None]:
        """Call ``on_request`` with ``body``, then ``on_error`` if the block raises an
        :class:`~toolshim.errors.UpstreamError` (raised on)."""
        if self.on_request:
            self.on_request(body)
        try:
            yield
        except UpstreamError as exc:
            if self.on_error:
                self.on_error(body, exc)
            raise


def reassemble(chunks: list[StreamChunk]) -> dict[str, Any]:
    """Stream chunks put back together as one ``chat.completion`` (choice 0), by the one
    accumulator (:class:`~toolshim.accumulate.ChoiceAccumulator`)."""
    reply = ChoiceAccumulator()
    usage = None
    for chunk in chunks:
        usage = usage_to_dict(chunk.usage) if chunk.usage is not None else usage
        reply.add(chunk)
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    calls = reply.tool_calls()
    if calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in calls
        ]
    return {
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}],
        "usage": usage,
    }
