"""The upstream protocol: what the engine needs from a model server (core types in and out)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol, runtime_checkable

from toolshim.types import ChatRequest, Completion, StreamChunk

__all__ = ["Upstream", "WrappedUpstream"]


@runtime_checkable
class Upstream(Protocol):
    """A chat backend: takes a core :class:`~toolshim.types.ChatRequest`, answers with a core
    :class:`~toolshim.types.Completion` or :class:`~toolshim.types.StreamChunk` s.

    Adapters encode the request in their own protocol (OpenAI chat completions:
    :mod:`toolshim.upstreams.chat_completions`) and never see dialects or modes.
    Failures are raised as :class:`toolshim.errors.UpstreamError` subclasses.
    """

    @property
    def key(self) -> str:
        """A stable identity for this upstream (its base URL), used by the capability store."""
        ...

    async def complete(
        self, request: ChatRequest, *, headers: Mapping[str, str] | None = None
    ) -> Completion:
        """Send a non-streaming request; return the completion."""
        ...

    def stream(
        self, request: ChatRequest, *, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[StreamChunk]:
        """Send a streaming request; yield one chunk for each the upstream sends."""
        ...

    async def list_models(self, *, headers: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The upstream's ``GET /models`` answer."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


class WrappedUpstream:
    """An upstream that wraps another (``inner``) and passes every call on to it unchanged:
    the base of the wrappers that time, count or trace requests, which override only what they
    watch."""

    def __init__(self, inner: Upstream) -> None:
        self.inner = inner

    @property
    def key(self) -> str:
        return self.inner.key

    async def complete(
        self, request: ChatRequest, *, headers: Mapping[str, str] | None = None
    ) -> Completion:
        return await self.inner.complete(request, headers=headers)

    async def stream(
        self, request: ChatRequest, *, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[StreamChunk]:
        async for chunk in self.inner.stream(request, headers=headers):
            yield chunk

    async def list_models(self, *, headers: Mapping[str, str] | None = None) -> dict[str, Any]:
        return await self.inner.list_models(headers=headers)

    async def aclose(self) -> None:
        await self.inner.aclose()
