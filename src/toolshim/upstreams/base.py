"""The upstream protocol: what the engine needs from a model server (OpenAI JSON in and out)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol, runtime_checkable

__all__ = ["Upstream"]


@runtime_checkable
class Upstream(Protocol):
    """An OpenAI-compatible chat-completions backend.

    Bodies and answers are plain OpenAI JSON objects; adapters never see dialects or modes.
    Failures are raised as :class:`toolshim.errors.UpstreamError` subclasses.
    """

    @property
    def key(self) -> str:
        """A stable identity for this upstream (its base URL), used by the capability store."""
        ...

    async def complete(
        self, body: Mapping[str, Any], *, headers: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        """Send a non-streaming request; return the ``chat.completion`` object."""
        ...

    def stream(
        self, body: Mapping[str, Any], *, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        """Send a streaming request; yield each ``chat.completion.chunk`` object."""
        ...

    async def list_models(self, *, headers: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The upstream's ``GET /models`` answer."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...
