"""Server-sent events for streamed chat completions: chunk and error events, ``[DONE]``, the response."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Any

import orjson
from starlette.types import Receive, Send

from toolshim.server.asgi import DisconnectGuard
from toolshim.server.logs import REQUEST_ID

__all__ = ["DONE", "SSEResponse", "event"]

DONE = b"data: [DONE]\n\n"


def event(data: Mapping[str, Any]) -> bytes:
    """One ``data: {json}`` event."""
    return b"data: " + orjson.dumps(data) + b"\n\n"


class SSEResponse:
    """An ASGI response that sends each item of ``events`` as it comes, then ends the body.

    A client that disconnects cancels the iteration (and with it the upstream request); the
    generator is closed either way, so its ``finally`` blocks run before the response ends.
    """

    def __init__(
        self,
        events: AsyncGenerator[bytes, None],
        *,
        headers: list[tuple[bytes, bytes]] | None = None,
        guard: DisconnectGuard | None = None,
    ) -> None:
        self.events = events
        self.guard = guard
        """The caller's guard to send under (one watcher for a whole request), else a new one."""
        self.raw_headers = [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache"),
            (b"x-accel-buffering", b"no"),
            (b"x-request-id", REQUEST_ID.get().encode("latin-1")),
            *(headers or ()),
        ]

    async def __call__(self, receive: Receive, send: Send) -> None:
        try:
            async with self.guard or DisconnectGuard(receive):
                await send(
                    {"type": "http.response.start", "status": 200, "headers": self.raw_headers}
                )
                async for data in self.events:
                    await send({"type": "http.response.body", "body": data, "more_body": True})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await self.events.aclose()
