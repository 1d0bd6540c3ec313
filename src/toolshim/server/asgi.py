"""HTTP plumbing of the proxy: JSON bodies, the one error mapping, headers in and out, disconnects."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from types import TracebackType
from typing import Any

import orjson
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from toolshim.errors import InvalidRequestError, ToolshimError, UpstreamError
from toolshim.server.logs import REQUEST_ID
from toolshim.types import Metadata
from toolshim.wire.openai_chat import error_body

__all__ = [
    "EMULATED_HEADER",
    "FORWARDED_HEADERS",
    "DisconnectGuard",
    "JSONBody",
    "decode_json_object",
    "emulated_value",
    "error_meta",
    "error_response",
    "error_status_body",
    "forwarded_headers",
    "header_overrides",
    "log_failure",
    "read_body",
    "request_headers",
    "send_json",
]

log = logging.getLogger("toolshim.server")

FORWARDED_HEADERS = ("authorization", "openai-organization", "openai-project")
"""Caller headers passed on to the upstream (``authorization`` unless a key replaces it)."""

_OVERRIDE_HEADERS = {
    "x-toolshim-mode": "mode",
    "x-toolshim-strategy": "strategy",
    "x-toolshim-dialect": "dialect",
    "x-toolshim-max-reasks": "max_reasks",
}
_WANTED = frozenset(name.encode() for name in (*FORWARDED_HEADERS, *_OVERRIDE_HEADERS))
_JSON_TYPE = (b"content-type", b"application/json")


def request_headers(scope: Scope) -> dict[str, str]:
    """The request headers the proxy acts on (forwarded ones and overrides), by lower-case name."""
    return {
        name.decode("latin-1"): value.decode("latin-1")
        for name, value in scope["headers"]
        if name in _WANTED
    }


async def read_body(receive: Receive) -> bytes | None:
    """The whole request body, or None if the client disconnected first."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def send_json(
    send: Send, status: int, data: Any, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    """Answer with ``data`` as JSON (plus ``x-request-id`` and ``headers``) in two ASGI messages."""
    body = orjson.dumps(data)
    raw = [
        _JSON_TYPE,
        (b"content-length", str(len(body)).encode()),
        (b"x-request-id", REQUEST_ID.get().encode("latin-1")),
    ]
    if headers:
        raw.extend(headers)
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body, "more_body": False})


class JSONBody(Response):
    """A JSON response rendered with orjson."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


def decode_json_object(body: bytes) -> dict[str, Any]:
    """The request body as a JSON object, or an :class:`InvalidRequestError` saying why not."""
    if not body.strip():
        raise InvalidRequestError(
            "the request body is empty; send a JSON chat-completions request", code="invalid_json"
        )
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequestError(
            f"the request body is not valid JSON: {exc}", code="invalid_json"
        ) from None
    if not isinstance(data, dict):
        raise InvalidRequestError(
            f"the request body must be a JSON object, not a JSON {type(data).__name__}",
            code="invalid_json",
        )
    return data


def error_response(exc: BaseException, headers: Mapping[str, str] | None = None) -> JSONBody:
    """The OpenAI error response for ``exc`` (the only place failures become HTTP answers)."""
    status, body = error_status_body(exc)
    out = dict(headers or {})
    meta = error_meta(exc)
    if meta is not None:
        out[EMULATED_HEADER.decode()] = emulated_value(meta).decode()
    return JSONBody(body, status_code=status, headers=out)


EMULATED_HEADER = b"x-toolshim-emulated"


def emulated_value(meta: Metadata | None) -> bytes:
    """The ``x-toolshim-emulated`` header's value for a turn's metadata."""
    return b"true" if meta is not None and meta.emulated else b"false"


def error_meta(exc: BaseException) -> Metadata | None:
    """The metadata of the turn ``exc`` ended, when a turn had started (see ToolshimError.meta)."""
    return exc.meta if isinstance(exc, ToolshimError) else None


def error_status_body(
    exc: BaseException, meta: Metadata | None = None
) -> tuple[int, dict[str, Any]]:
    """Log ``exc`` as it deserves and map it with :func:`toolshim.wire.openai_chat.error_body`; the
    turn's metadata (``meta``, else the error's own) goes beside ``error`` as ``toolshim``."""
    status, body = error_body(exc)
    meta = meta or error_meta(exc)
    if meta is not None:
        body["toolshim"] = meta.to_dict()
    log_failure(exc, status)
    return status, body


def log_failure(exc: BaseException, status: int) -> None:
    """Log a failed request as it deserves: upstream trouble, a bad request, or a bug."""
    if isinstance(exc, UpstreamError):
        log.warning("upstream error → %d: %s", status, exc.message)
    elif isinstance(exc, ToolshimError):
        log.info("request failed → %d %s: %s", status, exc.error_type, exc.message)
    else:
        log.error("internal error → %d", status, exc_info=exc)


def forwarded_headers(headers: Mapping[str, str], upstream_api_key: str | None) -> dict[str, str]:
    """The caller's headers to pass upstream; ``upstream_api_key`` replaces ``Authorization``."""
    out: dict[str, str] = {}
    for name in FORWARDED_HEADERS:
        value = headers.get(name)
        if value:
            out[name.title() if name == "authorization" else name] = value
    if upstream_api_key:
        out["Authorization"] = f"Bearer {upstream_api_key}"
    return out


def header_overrides(headers: Mapping[str, str]) -> dict[str, str]:
    """Per-request engine options from ``x-toolshim-mode`` / ``-strategy`` / ``-dialect`` / ``-max-reasks``."""
    out: dict[str, str] = {}
    for header, option in _OVERRIDE_HEADERS.items():
        value = headers.get(header)
        if value is not None and value.strip():
            out[option] = value.strip()
    return out


class DisconnectGuard:
    """Cancels the task that serves a request as soon as its client disconnects.

    Without it an abandoned request would keep the upstream generating (uvicorn silently drops
    what is sent to a closed connection). On a disconnect the body of the ``async with`` is
    cancelled, the cancellation is absorbed, and :attr:`disconnected` is True.

    ``blocks`` is how many ``async with`` blocks of the same task it guards, one after the
    other, with one watcher (a streamed answer guards the wait for its first chunk and then
    the sending; a watcher task for each costs CPU on every request). The watcher stops at
    the end of the last block, at the end of any block left by an exception, and at
    :meth:`stop`, which a caller that may skip a block must call.
    """

    def __init__(self, receive: Receive, *, blocks: int = 1) -> None:
        self._receive = receive
        self._watcher: asyncio.Task[None] | None = None
        self._task: asyncio.Task[Any] | None = None
        self._blocks = blocks
        self.disconnected = False

    async def __aenter__(self) -> DisconnectGuard:
        self._task = asyncio.current_task()
        if self._watcher is None:
            self._watcher = asyncio.get_running_loop().create_task(self._watch())
        return self

    async def _watch(self) -> None:
        while True:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                self.disconnected = True
                if self._task is not None:
                    self._task.cancel()
                return

    def stop(self) -> None:
        """Stop watching (idempotent)."""
        if self._watcher is not None:
            self._watcher.cancel()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        self._blocks -= 1
        if self._blocks <= 0 or exc_type is not None:
            self.stop()
        if self.disconnected and self._task is not None:
            self._task.uncancel()
            return exc_type is asyncio.CancelledError
        return False
