"""The OpenAI chat-completions encoding of the upstream protocol, for adapters that speak it.

:class:`ChatCompletionsUpstream` implements :class:`~toolshim.upstreams.base.Upstream` (core
requests in, core completions and chunks out) over two methods that send a JSON body:
:meth:`~ChatCompletionsUpstream.complete_body` and :meth:`~ChatCompletionsUpstream.stream_body`.
The HTTP adapter and the test doubles build on it, so the engine never sees OpenAI JSON.
Each streamed upstream chunk becomes one :class:`~toolshim.types.StreamChunk`, read whole
(:func:`~toolshim.wire.openai_chat.chunk_from_dict`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Mapping
from typing import Any

from toolshim.types import ChatRequest, Completion, StreamChunk
from toolshim.upstreams.base import Upstream
from toolshim.wire.openai_chat import (
    chunk_from_dict,
    completion_from_dict,
    completion_to_dict,
    parse_request,
    request_to_body,
)

__all__ = ["ChatCompletionsUpstream", "complete_chat_body", "request_body"]


def request_body(request: ChatRequest, *, stream: bool = False) -> dict[str, Any]:
    """The chat-completions body of a core request (``stream``: with ``"stream": true``)."""
    body = request_to_body(request)
    return {**body, "stream": True} if stream else body


class ChatCompletionsUpstream(ABC):
    """An upstream that speaks OpenAI chat completions: subclasses send bodies, this class
    encodes the core request and reads the answers."""

    @property
    @abstractmethod
    def key(self) -> str: ...

    @abstractmethod
    async def complete_body(
        self, body: Mapping[str, Any], *, headers: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        """Send a non-streaming body; return the ``chat.completion`` object."""

    @abstractmethod
    def stream_body(
        self, body: Mapping[str, Any], *, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        """Send a streaming body; yield each ``chat.completion.chunk`` object."""

    @abstractmethod
    async def list_models(self, *, headers: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The upstream's ``GET /models`` answer."""

    @abstractmethod
    async def aclose(self) -> None:
        """Release connections."""

    async def complete(
        self, request: ChatRequest, *, headers: Mapping[str, str] | None = None
    ) -> Completion:
        return completion_from_dict(
            await self.complete_body(request_body(request), headers=headers)
        )

    async def stream(
        self, request: ChatRequest, *, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[StreamChunk]:
        async for data in self.stream_body(request_body(request, stream=True), headers=headers):
            yield chunk_from_dict(data)


async def complete_chat_body(
    upstream: Upstream, body: Mapping[str, Any], *, headers: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Send a chat-completions ``body`` through any upstream; its answer as a
    ``chat.completion`` object (for callers that hold OpenAI JSON, such as the evaluations)."""
    if isinstance(upstream, ChatCompletionsUpstream):
        return await upstream.complete_body(body, headers=headers)
    return completion_to_dict(await upstream.complete(parse_request(body), headers=headers))
