"""The transport seam under the one HTTP adapter (:class:`~toolshim.upstreams.openai_http.OpenAIUpstream`):
send one request, hand back its status, headers and body, and say which upstream error each of
the HTTP library's exceptions is.

===================  ========================================================================
transport            used by
===================  ========================================================================
AiohttpTransport     the proxy (``toolshim serve``) and the coding eval: one pooled aiohttp
                     session, which measured fastest (``benchmarks/bench_proxy_cpu.py``)
HttpxTransport       the library and the CLI (an ``httpx.AsyncClient``, yours if passed: e.g.
                     with ``httpx.MockTransport`` in tests)
===================  ========================================================================

Everything else (headers and credentials, deadlines, retries, error bodies, SSE, the model list)
is the adapter's, once. Exceptions are mapped in :meth:`Transport.error`, one table a transport:

====================================  ==========================  ===========================
failure                               httpx                       aiohttp
====================================  ==========================  ===========================
connect deadline                      ConnectTimeout, PoolTimeout ConnectionTimeoutError
read deadline (no byte for too long)  TimeoutException            TimeoutError
not reachable (nothing sent)          ConnectError                ClientConnectorError
cut off after the answer began        any other                   any other
broke before answering                RemoteProtocolError,        ServerDisconnectedError,
                                      ReadError                   ClientOSError
====================================  ==========================  ===========================
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from enum import Enum
from typing import Any, Protocol

import aiohttp
import httpx
import orjson

from toolshim.errors import UpstreamConnectionError, UpstreamError, UpstreamIncompleteError
from toolshim.upstreams._policy import Deadlines

__all__ = ["AiohttpTransport", "HttpxTransport", "Response", "Transport"]

_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy")


class Response(Protocol):
    """One answer whose headers have come; its body not yet read."""

    @property
    def status(self) -> int: ...

    def header(self, name: str) -> str | None:
        """A response header (any case), or None."""
        ...

    async def read(self) -> bytes:
        """The whole body."""
        ...

    async def read_some(self) -> bytes:
        """The next piece of the body as it arrives; ``b""`` at its end."""
        ...

    async def release(self, *, abort: bool = False) -> None:
        """Done with it; ``abort`` drops the connection (so the model server stops generating)."""
        ...


class Transport(Protocol):
    """Sends requests for the adapter; raises its own exceptions (``errors``)."""

    errors: tuple[type[BaseException], ...]
    """The exceptions :meth:`error` maps."""

    async def open(
        self, method: str, url: str, headers: Mapping[str, str], body: Any = None
    ) -> Response:
        """Send a request (``body``: a JSON value, or None) and return once its headers came."""
        ...

    def error(
        self, exc: BaseException, url: str, deadlines: Deadlines, *, started: bool
    ) -> UpstreamError:
        """The upstream error for one of ``errors``; ``started``: the answer's headers had come."""
        ...

    async def aclose(self) -> None: ...


class _HttpxResponse:
    __slots__ = ("_pieces", "response")

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._pieces: AsyncIterator[bytes] | None = None

    @property
    def status(self) -> int:
        return self.response.status_code

    def header(self, name: str) -> str | None:
        value: str | None = self.response.headers.get(name)
        return value

    async def read(self) -> bytes:
        return await self.response.aread()

    async def read_some(self) -> bytes:
        if self._pieces is None:
            self._pieces = self.response.aiter_bytes()
        return await anext(self._pieces, b"")

    async def release(self, *, abort: bool = False) -> None:
        await self.response.aclose()


class HttpxTransport:
    """Requests over an ``httpx.AsyncClient`` (one of its own unless ``client`` is passed)."""

    errors: tuple[type[BaseException], ...] = (httpx.HTTPError,)

    def __init__(
        self, client: httpx.AsyncClient | None, timeout: float | None, connect: float | None
    ) -> None:
        self._timeout = httpx.Timeout(timeout, connect=connect, pool=connect)
        self._extensions = {"timeout": self._timeout.as_dict()}
        self._owns_client = client is None
        self.client = client or httpx.AsyncClient(
            timeout=self._timeout,
            limits=httpx.Limits(max_connections=200, max_keepalive_connections=100),
        )

    async def open(
        self, method: str, url: str, headers: Mapping[str, str], body: Any = None
    ) -> _HttpxResponse:
        request = self.client.build_request(
            method, url, json=body, headers=headers, extensions=self._extensions
        )
        return _HttpxResponse(await self.client.send(request, stream=True))

    def error(
        self, exc: BaseException, url: str, deadlines: Deadlines, *, started: bool
    ) -> UpstreamError:
        return _mapped(_HTTPX_FAILURES, exc, url, deadlines, started, _httpx_detail(exc))

    async def aclose(self) -> None:
        if self._owns_client:
            await self.client.aclose()


class _AiohttpResponse:
    __slots__ = ("response",)

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self.response = response

    @property
    def status(self) -> int:
        return self.response.status

    def header(self, name: str) -> str | None:
        return self.response.headers.get(name)

    async def read(self) -> bytes:
        return await self.response.read()

    async def read_some(self) -> bytes:
        return await self.response.content.readany()

    async def release(self, *, abort: bool = False) -> None:
        if abort:
            self.response.close()
        self.response.release()


class AiohttpTransport:
    """Requests over one pooled aiohttp session, created lazily inside the running event loop
    (so the adapter can be built before the loop starts, as ``toolshim serve`` does)."""

    errors: tuple[type[BaseException], ...] = (TimeoutError, aiohttp.ClientError, OSError)

    def __init__(
        self,
        session: aiohttp.ClientSession | None,
        timeout: float | None,
        connect: float | None,
        max_connections: int,
    ) -> None:
        self._timeout = aiohttp.ClientTimeout(
            total=None, connect=connect, sock_connect=connect, sock_read=timeout
        )
        self._max_connections = max_connections
        self._session = session
        self._owns_session = session is None

    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(
                    limit=self._max_connections, ttl_dns_cache=300, keepalive_timeout=30
                ),
                timeout=self._timeout,
                # Reading proxy variables costs time on every request; only do it when set.
                trust_env=any(os.environ.get(name) for name in _PROXY_VARIABLES),
                auto_decompress=True,
            )
            self._owns_session = True
        return self._session

    async def open(
        self, method: str, url: str, headers: Mapping[str, str], body: Any = None
    ) -> _AiohttpResponse:
        if body is not None:
            headers = {**headers, "Content-Type": "application/json"}
            data: bytes | None = orjson.dumps(body)
        else:
            data = None
        try:
            response = await self.session().request(method, url, data=data, headers=headers)
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
            if not _stale_connection(exc):
                raise
            # A kept-alive connection the server had closed (llama-server closes it after a
            # stream without saying so): nothing was read, so the request is sent again at
            # once, on a new connection.
            response = await self.session().request(method, url, data=data, headers=headers)
        return _AiohttpResponse(response)

    def error(
        self, exc: BaseException, url: str, deadlines: Deadlines, *, started: bool
    ) -> UpstreamError:
        return _mapped(_AIOHTTP_FAILURES, exc, url, deadlines, started, _aiohttp_detail(exc))

    async def aclose(self) -> None:
        if self._session is not None and self._owns_session and not self._session.closed:
            await self._session.close()


class Failure(Enum):
    """What went wrong, whatever the HTTP library."""

    CONNECT_DEADLINE = "connect deadline"
    READ_DEADLINE = "read deadline"
    UNREACHABLE = "not reachable"
    CLOSED = "closed before answering"
    BROKE = "broke before answering"


_HTTPX_FAILURES: tuple[
    tuple[type[BaseException] | tuple[type[BaseException], ...], Failure], ...
] = (
    ((httpx.ConnectTimeout, httpx.PoolTimeout), Failure.CONNECT_DEADLINE),
    (httpx.TimeoutException, Failure.READ_DEADLINE),
    (httpx.ConnectError, Failure.UNREACHABLE),
    ((httpx.RemoteProtocolError, httpx.ReadError), Failure.BROKE),
)
_AIOHTTP_FAILURES: tuple[
    tuple[type[BaseException] | tuple[type[BaseException], ...], Failure], ...
] = (
    (aiohttp.ConnectionTimeoutError, Failure.CONNECT_DEADLINE),
    (TimeoutError, Failure.READ_DEADLINE),  # aiohttp's SocketTimeoutError: no byte for too long
    (aiohttp.ClientConnectorError, Failure.UNREACHABLE),
    (aiohttp.ServerDisconnectedError, Failure.CLOSED),
    (aiohttp.ClientOSError, Failure.BROKE),
)


def _httpx_detail(exc: BaseException) -> tuple[str, str, str]:
    """What an httpx exception says: when unreachable, when cut off, when broken."""
    text = str(exc)
    return text, f"{type(exc).__name__}{': ' if text else ''}{text}", text or type(exc).__name__


def _aiohttp_detail(exc: BaseException) -> tuple[str, str, str]:
    """What an aiohttp exception says: when unreachable, when cut off, when broken."""
    name = type(exc).__name__
    if isinstance(exc, aiohttp.ClientConnectorError):
        return str(exc.os_error or exc), name, name
    if isinstance(exc, aiohttp.ClientOSError):
        return str(exc), name, exc.strerror or name
    return str(exc), name, name


def _mapped(
    table: tuple[tuple[type[BaseException] | tuple[type[BaseException], ...], Failure], ...],
    exc: BaseException,
    url: str,
    deadlines: Deadlines,
    started: bool,
    detail: tuple[str, str, str],
) -> UpstreamError:
    """The upstream error for ``exc`` by its row in ``table`` (the first that matches)."""
    failure = next((failure for kinds, failure in table if isinstance(exc, kinds)), None)
    if failure is Failure.CONNECT_DEADLINE:
        return deadlines.error("connect", url)
    if failure is Failure.READ_DEADLINE:
        return deadlines.error("read", url)
    unreachable, cut_off, broke = detail
    if failure is Failure.UNREACHABLE:
        return UpstreamConnectionError(
            f"could not reach the upstream at {url}: {unreachable}", url=url, sent=False
        )
    if started:
        return UpstreamIncompleteError(
            f"the upstream at {url} cut its reply off before its end ({cut_off})", url=url
        )
    if failure is Failure.CLOSED:
        return UpstreamConnectionError(
            f"the upstream at {url} closed the connection before answering", url=url
        )
    if failure is Failure.BROKE:
        return UpstreamConnectionError(
            f"the upstream at {url} broke the connection before answering: {broke}", url=url
        )
    return UpstreamConnectionError(
        f"error talking to the upstream at {url}: {type(exc).__name__}", url=url
    )


def _stale_connection(exc: aiohttp.ClientError) -> bool:
    """True for the errors of a request written to a pooled connection the server closed."""
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return True
    return isinstance(exc, aiohttp.ClientOSError) and "Can not write request body" in str(exc)
