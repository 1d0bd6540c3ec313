"""Client connections under uvicorn: a header deadline, a header size cap and a connection limit
that makes room by closing the connection that has waited longest for its headers.

uvicorn bounds idle keep-alive time (``timeout_keep_alive``) but not the time a client takes
to send its headers, nor their size with httptools, and its ``limit_concurrency`` answers
a 503 only once headers are in, so a thousand slowloris connections hold every descriptor.
:func:`guarded_protocol` returns uvicorn's own httptools protocol with those bounds added;
pass it as ``uvicorn.Config(http=...)``. A client that sends its request at once never waits
on any of them; body deadlines and sizes are the ASGI :class:`~toolshim.server.guard.Guard`'s.
"""

from __future__ import annotations

import asyncio
from http import HTTPStatus
from typing import Any

import orjson
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from toolshim.errors import LimitExceededError
from toolshim.server.limits import LimitLog, Limits
from toolshim.wire.openai_chat import error_body

__all__ = ["guarded_protocol", "raw_error_response"]

LINGER = 2.0
"""Seconds a refused connection keeps reading (and discarding) after its answer is sent."""


def raw_error_response(error: LimitExceededError) -> bytes:
    """A complete HTTP/1.1 answer carrying ``error``'s OpenAI body, closing the connection."""
    status, body = error_body(error)
    data = orjson.dumps(body)
    head = [
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}",
        "content-type: application/json",
        f"content-length: {len(data)}",
        "connection: close",
    ]
    if error.retry_after:
        head.append(f"retry-after: {error.retry_after}")
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data


def guarded_protocol(limits: Limits, limit_log: LimitLog) -> type[asyncio.Protocol]:
    """uvicorn's httptools protocol bounded by ``limits`` (one set of connections per call)."""
    waiting: dict[Any, None] = {}
    """Connections waiting for the rest of a request's headers, oldest first."""
    idle: dict[Any, None] = {}
    """Keep-alive connections between requests, longest idle first."""

    class GuardedProtocol(HttpToolsProtocol):
        _header_timer: asyncio.TimerHandle | None = None
        _header_bytes = 0
        _rejected = False

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            cap = limits.max_connections
            if cap and len(self.connections) > cap and not _make_room(self):
                limit_log.hit("connections", f"{cap} connections open, all busy: refused one")
                self._refuse(
                    LimitExceededError(
                        f"the proxy has its maximum of {cap} connections open "
                        "(--max-connections); retry shortly",
                        limit="connections",
                        status=503,
                        retry_after="1",
                    ),
                    linger=False,
                )
                return
            self._await_headers()

        def data_received(self, data: bytes) -> None:
            if self._rejected:
                return  # answered and closing: what the client still sends is discarded
            super().data_received(data)
            if self in waiting and not self._rejected:
                self._header_bytes += len(data)
                if self._header_bytes > limits.max_header_bytes:
                    limit_log.hit(
                        "header_size", f"request headers over {limits.max_header_bytes} bytes"
                    )
                    self._refuse(
                        LimitExceededError(
                            f"the request line and headers are larger than "
                            f"{limits.max_header_bytes} bytes",
                            limit="header_size",
                            status=431,
                        )
                    )

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._await_headers()

        def on_headers_complete(self) -> None:
            self._stop_waiting()
            if not self._rejected:
                super().on_headers_complete()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and not self.pipeline:
                idle[self] = None

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_waiting()
            idle.pop(self, None)
            super().connection_lost(exc)

        # -- the header deadline ------------------------------------------------------------

        def _await_headers(self) -> None:
            idle.pop(self, None)
            if self not in waiting:
                waiting[self] = None
                self._header_bytes = 0
            if self._header_timer is None:
                self._header_timer = self.loop.call_later(limits.header_timeout, self._headers_late)

        def _stop_waiting(self) -> None:
            waiting.pop(self, None)
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_late(self) -> None:
            self._header_timer = None
            if self.cycle is not None and not self.cycle.response_complete:
                # A pipelined request behind one still being answered: wait for that first.
                self._header_timer = self.loop.call_later(limits.header_timeout, self._headers_late)
                return
            limit_log.hit(
                "header_timeout",
                f"a client did not send its request headers within {limits.header_timeout:g}s",
            )
            self._refuse(
                LimitExceededError(
                    f"the request headers did not arrive within {limits.header_timeout:g}s "
                    "(--header-timeout)",
                    limit="header_timeout",
                    status=408,
                )
            )

        def _refuse(self, error: LimitExceededError, *, linger: bool = True) -> None:
            """Answer ``error`` and close, without starting the app; ``linger=False`` where
            the point is to free the descriptor at once (the connection cap)."""
            self._rejected = True
            self._stop_waiting()
            idle.pop(self, None)
            if self.transport.is_closing():
                return
            self.transport.write(raw_error_response(error))
            if linger and self.transport.can_write_eof():
                # A lingering close: closing with the client's bytes unread would reset the
                # connection, and a reset can destroy the answer before the client reads it
                # (a client still sending oversized headers would see a broken pipe, not a 431).
                self.transport.write_eof()
                self.loop.call_later(LINGER, self.transport.close)
            else:
                self.transport.close()

        def _evict(self) -> None:
            """Close this connection to make room for a new one (an idle one silently: its
            client opens another when it has a request)."""
            if self in idle:
                idle.pop(self, None)
                self._rejected = True
                self.transport.close()
                return
            self._refuse(
                LimitExceededError(
                    "the proxy is at its connection limit and this connection had sent no "
                    "complete request",
                    limit="connections",
                    status=408,
                ),
                linger=False,
            )

    def _make_room(newcomer: GuardedProtocol) -> bool:
        for pool, what in ((waiting, "waited longest for its headers"), (idle, "was idle longest")):
            for victim in pool:
                if victim is not newcomer:
                    limit_log.hit(
                        "connections",
                        f"{limits.max_connections} connections open: closed the one that {what}",
                    )
                    victim._evict()
                    return True
        return False

    return GuardedProtocol
