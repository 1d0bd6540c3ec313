"""One ASGI wrapper around every route: access keys, concurrent requests, the request body's size
and read deadline, and the drain at shutdown.

Routes behind it never see a body that is over the limit or still arriving: the whole body is
read here (within ``body_timeout``, stopping as soon as it passes ``max_body_bytes``) and
handed on as one ``http.request`` message; later ``receive()`` calls reach the server as they
are (a disconnect still shows). With access keys, the key is checked here and the
``Authorization`` and ``x-api-key`` headers are removed before any route sees them: the proxy's
key is never forwarded upstream (``--upstream-api-key`` is what the upstream gets).
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Awaitable
from contextvars import ContextVar
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolshim.errors import (
    AuthenticationError,
    LimitExceededError,
    ShuttingDownError,
    ToolshimError,
)
from toolshim.responses_store import OWNER
from toolshim.server.asgi import log_failure, send_json
from toolshim.server.auth import AccessKeys, presented_key
from toolshim.server.limits import LimitLog, Limits
from toolshim.server.routes import codec_for_path

__all__ = ["KEY_NAME", "OPEN_PATHS", "UNCOUNTED_PATHS", "Guard", "cut_by_drain"]

log = logging.getLogger("toolshim.server")

KEY_NAME: ContextVar[str] = ContextVar("toolshim_key_name", default="-")
"""The name of the access key the request being served presented (``-`` without keys)."""

OPEN_PATHS = frozenset({"/healthz"})
"""Paths served without an access key: readiness probes carry none (its output holds no
credential). ``/metrics`` needs a key like every other route."""
UNCOUNTED_PATHS = frozenset({"/healthz", "/metrics"})
"""Paths not counted against ``max_concurrent_requests`` (probes must answer under load)."""

_KEY_HEADERS = frozenset({b"authorization", b"x-api-key"})
_CLOSE = [(b"connection", b"close")]

_CUT: weakref.WeakKeyDictionary[asyncio.Task[Any], ShuttingDownError] = weakref.WeakKeyDictionary()
"""Request tasks the drain cancelled, with the error that says so."""


def cut_by_drain() -> ShuttingDownError | None:
    """In a request task that was just cancelled: the error to answer with when the drain
    cut it (the cancellation is then withdrawn, so the answer can be sent), else None (a
    cancellation for another reason, to be let through).

    A route that has begun a stream catches ``CancelledError``, calls this, and ends the
    stream with the error in its protocol's shape; whatever a route leaves unanswered the
    :class:`Guard` answers itself.
    """
    task = asyncio.current_task()
    error = _CUT.pop(task, None) if task is not None else None
    if error is not None and task is not None:
        task.uncancel()
    return error


class Guard:
    """The limits and keys of :class:`~toolshim.server.limits.Limits` applied to ``app``."""

    def __init__(
        self,
        app: ASGIApp,
        limits: Limits,
        *,
        keys: AccessKeys | None = None,
        limit_log: LimitLog | None = None,
        on_key: Any = None,
    ) -> None:
        self.app = app
        self.limits = limits
        self.keys = keys
        self.limit_log = limit_log or LimitLog()
        self.on_key = on_key
        """Called with the key name of each accepted request (a metrics counter)."""
        self.active = 0
        """Requests being served now (``UNCOUNTED_PATHS`` excepted)."""
        self.draining = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._cut: set[asyncio.Task[Any]] = set()
        self._drain_timer: asyncio.TimerHandle | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope["path"]
        key_token = owner_token = None
        if self.keys is not None and path not in OPEN_PATHS:
            name = self.keys.check(presented_key(scope["headers"]))
            if name is None:
                client = scope.get("client")
                where = f" from {client[0]}" if client else ""
                self.limit_log.hit("auth", f"a request without a valid access key{where}")
                await _answer(
                    send,
                    path,
                    AuthenticationError(
                        "a valid access key is required: send it as 'Authorization: Bearer KEY' "
                        "or 'x-api-key: KEY'"
                    ),
                    [(b"www-authenticate", b'Bearer realm="toolshim"')],
                )
                return
            key_token = KEY_NAME.set(name)
            owner_token = OWNER.set(f"key:{name}")  # what it stores is its own
            if self.on_key is not None:
                self.on_key(name)
        elif self.keys is not None:  # an open path: a valid key still says who asks
            name = self.keys.check(presented_key(scope["headers"]))
            if name is not None:
                key_token = KEY_NAME.set(name)
        if self.keys is not None:
            # On open paths too: a probe may carry the proxy's key (/healthz asks the
            # upstream, and would pass it on).
            scope = dict(scope)
            scope["headers"] = [h for h in scope["headers"] if h[0] not in _KEY_HEADERS]
        try:
            await self._serve(scope, receive, send, counted=path not in UNCOUNTED_PATHS)
        finally:
            if key_token is not None:
                KEY_NAME.reset(key_token)
            if owner_token is not None:
                OWNER.reset(owner_token)

    async def _serve(self, scope: Scope, receive: Receive, send: Send, *, counted: bool) -> None:
        path = scope["path"]
        if self.draining:
            await _answer(send, path, self._shutting_down("the server is shutting down"), _CLOSE)
            return
        limit = self.limits.max_concurrent_requests
        if counted and limit and self.active >= limit:
            await self._refuse(
                send,
                path,
                f"{self.active} requests in flight",
                LimitExceededError(
                    f"the proxy is serving its maximum of {limit} requests at once "
                    "(--max-concurrent-requests); retry shortly",
                    limit="concurrent_requests",
                    status=429,
                    retry_after="1",
                ),
            )
            return
        task = asyncio.current_task()
        assert task is not None
        if counted:
            self.active += 1
        self._tasks.add(task)
        sent = _Sent(send)
        try:
            body_receive = await self._read_body(scope, receive, send)
            if body_receive is not None:
                await self.app(scope, body_receive, sent.send)
            if task in self._cut and not sent.finished:
                await self._answer_cut(path, sent)
        except asyncio.CancelledError:
            if cut_by_drain() is None:
                raise
            await self._answer_cut(path, sent)
        finally:
            self._tasks.discard(task)
            self._cut.discard(task)
            _CUT.pop(task, None)
            if counted:
                self.active -= 1

    # -- the body -------------------------------------------------------------------------

    async def _read_body(self, scope: Scope, receive: Receive, send: Send) -> Receive | None:
        """A receive that hands the whole body over at once; None when the request was
        answered here (too big, too slow)."""
        length: int | None = None
        framed = False
        for name, value in scope["headers"]:
            if name == b"content-length":
                framed = True
                try:
                    length = int(value)
                except ValueError:
                    length = None
            elif name == b"transfer-encoding":
                framed = True
        if not framed or length == 0:
            return receive
        cap = self.limits.max_body_bytes
        path = scope["path"]
        if cap and length is not None and length > cap:
            await self._too_big(send, path, f"Content-Length {length}")
            return None
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self.limits.body_timeout):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return _disconnected
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if cap and size > cap:
                        await self._too_big(send, path, f"more than {cap} bytes read")
                        return None
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            seconds = self.limits.body_timeout
            await self._refuse(
                send,
                path,
                f"a request body took over {seconds:g}s",
                LimitExceededError(
                    f"the request body did not arrive within {seconds:g}s (--body-timeout)",
                    limit="body_timeout",
                    status=408,
                ),
                _CLOSE,
            )
            return None
        body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if delivered:
                return await receive()
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}

        return replay

    async def _too_big(self, send: Send, path: str, what: str) -> None:
        cap = self.limits.max_body_bytes
        await self._refuse(
            send,
            path,
            f"a request body over {cap} bytes ({what})",
            LimitExceededError(
                f"the request body is larger than this proxy accepts ({cap} bytes, "
                "--max-body-size)",
                limit="body_size",
                status=413,
            ),
            _CLOSE,
        )

    async def _refuse(
        self,
        send: Send,
        path: str,
        seen: str,
        error: LimitExceededError,
        headers: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        """Answer a request over one of the limits with ``error`` (and ``headers``), noting
        in the limit log what was ``seen``."""
        self.limit_log.hit(error.limit, seen)
        await _answer(send, path, error, headers)

    # -- the drain ------------------------------------------------------------------------

    def drain(self, timeout: float | None = None) -> None:
        """Stop taking requests; those still running ``timeout`` seconds from now (the
        limits' ``drain_timeout`` by default) are cut: answered with a 503, or a stream ends
        with an error event. Call it from the event loop that serves the app."""
        if self.draining:
            return
        self.draining = True
        seconds = self.limits.drain_timeout if timeout is None else timeout
        if self._tasks:
            log.info(
                "draining: %d request(s) in flight get %gs to finish", len(self._tasks), seconds
            )
        self._drain_timer = asyncio.get_running_loop().call_later(seconds, self._cut_all)

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    def _cut_all(self) -> None:
        if not self._tasks:
            return
        log.warning(
            "drain time (%gs) is up: cutting %d request(s) still running",
            self.limits.drain_timeout,
            len(self._tasks),
        )
        error = self._shutting_down(
            "the server shut down before this request was finished "
            f"(drain time {self.limits.drain_timeout:g}s, --drain-timeout)"
        )
        for task in list(self._tasks):
            self._cut.add(task)
            _CUT[task] = error
            task.cancel()

    def _shutting_down(self, why: str) -> ShuttingDownError:
        return ShuttingDownError(f"{why}; send the request again (to another replica)")

    async def _answer_cut(self, path: str, sent: _Sent) -> None:
        """Answer a request the drain cut that its route left unanswered."""
        if sent.finished:
            return
        if not sent.started:
            error = self._shutting_down(
                "the server shut down before this request was finished "
                f"(drain time {self.limits.drain_timeout:g}s, --drain-timeout)"
            )
            await _answer(sent.send, path, error, _CLOSE)
            return
        await sent.send({"type": "http.response.body", "body": b"", "more_body": False})


class _Sent:
    """Wraps ``send`` to know whether the response has started and whether it has ended."""

    __slots__ = ("_send", "finished", "started")

    def __init__(self, send: Send) -> None:
        self._send = send
        self.started = False
        self.finished = False

    def send(self, message: Message) -> Awaitable[None]:
        # send's own awaitable handed back: no coroutine of this wrapper per message
        kind = message["type"]
        if kind == "http.response.body":
            if not message.get("more_body", False):
                self.finished = True
        elif kind == "http.response.start":
            self.started = True
        return self._send(message)


async def _disconnected() -> Message:
    return {"type": "http.disconnect"}


async def _answer(
    send: Send, path: str, error: ToolshimError, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    """Answer ``error`` in the error shape of the protocol ``path`` belongs to."""
    status, body = codec_for_path(path).error(error)
    log_failure(error, status)
    extra = list(headers or ())
    retry_after = getattr(error, "retry_after", None)
    if retry_after:
        extra.append((b"retry-after", retry_after.encode("latin-1")))
    await send_json(send, status, body, extra)
