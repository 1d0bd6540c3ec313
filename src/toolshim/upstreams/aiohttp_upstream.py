"""An OpenAI-compatible upstream over one pooled aiohttp session: the proxy's fast HTTP client.

It implements the same :class:`~toolshim.upstreams.base.Upstream` protocol and the same error
mapping as :class:`~toolshim.upstreams.openai_http.OpenAIUpstream` (httpx). The proxy uses it
because, measured side by side on a 2-core machine, a pass-through over aiohttp kept about ten
times the throughput of one over httpx (see benchmarks/bench_proxy.py).

The session is created lazily inside the running event loop, so the object can be built
before the loop starts (as ``toolshim serve`` does). ``timeout`` bounds the wait for each read
from the upstream, ``connect_timeout`` the connection and ``total_timeout`` the whole request
(see :mod:`toolshim.upstreams._policy`, which also says which failures are retried).
Cancelling a call (a client that went away) closes its upstream connection, so the model
server can stop generating.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
import orjson

from toolshim.errors import (
    UpstreamConnectionError,
    UpstreamError,
    UpstreamIncompleteError,
)
from toolshim.redact import credential_values, url_without_credentials
from toolshim.upstreams._http import (
    completion_as_chunks,
    json_object,
    reply_object,
    status_error,
    upstream_headers,
    with_authorization,
)
from toolshim.upstreams._policy import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_RETRIES,
    DEFAULT_TOTAL_TIMEOUT,
    NO_RETRIES,
    Deadlines,
    RetryPolicy,
    with_retries,
)
from toolshim.upstreams._sse import DEFAULT_MAX_EVENT_BYTES, sse_objects
from toolshim.upstreams.openai_http import DEFAULT_TIMEOUT, normalize_base_url

__all__ = ["AiohttpUpstream"]

_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy")
_READ_SIZE = 2**16


class AiohttpUpstream:
    """Talks to an OpenAI-compatible server at ``base_url`` (e.g. ``http://127.0.0.1:11434/v1``).

    ``key`` names the upstream in the capability registry (default: the normalised base URL,
    without ``user:pass@``), as for :class:`~toolshim.upstreams.openai_http.OpenAIUpstream`.
    A ``user:pass@`` in ``base_url`` is sent as Basic credentials, in place of any
    ``Authorization`` a caller forwards.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        connect_timeout: float | None = DEFAULT_CONNECT_TIMEOUT,
        total_timeout: float | None = DEFAULT_TOTAL_TIMEOUT,
        retries: int | RetryPolicy = DEFAULT_RETRIES,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        headers: Mapping[str, str] | None = None,
        max_connections: int = 256,
        session: aiohttp.ClientSession | None = None,
        key: str | None = None,
    ) -> None:
        given = normalize_base_url(base_url)
        self.base_url, self._headers, self._authorization = upstream_headers(
            given, api_key, headers
        )
        self.shown_url = self.base_url
        self._key = url_without_credentials(key) if key is not None else self.shown_url
        self.timeout = timeout
        self.deadlines = Deadlines(connect=connect_timeout, read=timeout, total=total_timeout)
        self.retry = retries if isinstance(retries, RetryPolicy) else RetryPolicy(retries=retries)
        self.max_event_bytes = max_event_bytes
        self._timeout = aiohttp.ClientTimeout(
            total=None, connect=connect_timeout, sock_connect=connect_timeout, sock_read=timeout
        )
        self._max_connections = max_connections
        self._session = session
        self._owns_session = session is None
        self._chat_url = f"{self.base_url}/chat/completions"
        self._models_url = f"{self.base_url}/models"
        self._base_secrets = credential_values(self._headers, given)

    @property
    def key(self) -> str:
        """Where this upstream's facts live in the registry (the base URL unless overridden)."""
        return self._key

    def __repr__(self) -> str:
        if self._key != self.shown_url:
            return f"AiohttpUpstream({self.shown_url!r}, key={self._key!r})"
        return f"AiohttpUpstream({self.shown_url!r})"

    def _client(self) -> aiohttp.ClientSession:
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

    def _merged(
        self, headers: Mapping[str, str] | None, accept: str | None = None
    ) -> dict[str, str]:
        merged = {**self._headers, **headers} if headers else dict(self._headers)
        if accept is not None:
            merged["Accept"] = accept
        return with_authorization(merged, self._authorization) if headers else merged

    def _secrets(self, headers: Mapping[str, str] | None) -> tuple[str, ...]:
        if not headers:
            return self._base_secrets
        return (*self._base_secrets, *credential_values(headers))

    async def _open(
        self,
        method: str,
        url: str,
        deadline: float | None,
        secrets: tuple[str, ...],
        retry: RetryPolicy | None = None,
        **options: Any,
    ) -> aiohttp.ClientResponse:
        """A response whose status is not an error (an error answer raises), with retries."""

        async def attempt() -> aiohttp.ClientResponse:
            try:
                async with self.deadlines.bound(deadline, self.shown_url):
                    try:
                        response = await self._client().request(method, url, **options)
                    except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
                        if not _stale_connection(exc):
                            raise
                        # A kept-alive connection the server had closed (llama-server closes
                        # it after a stream without saying so): nothing was read, so the
                        # request is sent again at once, on a new connection.
                        response = await self._client().request(method, url, **options)
                    if response.status < 400:
                        return response
                    try:
                        content = await response.read()
                    finally:
                        response.release()
            except UpstreamError:
                raise
            except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                raise self._transport_error(exc) from exc
            retry_after = response.headers.get("Retry-After")
            raise status_error(response.status, content, self.shown_url, retry_after, secrets)

        retry = self.retry if retry is None else retry
        return await with_retries(attempt, retry, deadline=deadline, url=self.shown_url)

    async def _read(self, response: aiohttp.ClientResponse, deadline: float | None) -> bytes:
        try:
            async with self.deadlines.bound(deadline, self.shown_url):
                return await response.read()
        except UpstreamError:
            raise
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise self._transport_error(exc, started=True) from exc
        finally:
            response.release()

    async def _chunks(
        self, response: aiohttp.ClientResponse, deadline: float | None
    ) -> AsyncIterator[bytes]:
        content = response.content
        while True:
            try:
                async with self.deadlines.bound(deadline, self.shown_url):
                    chunk = await content.readany()
            except UpstreamError:
                raise
            except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                raise self._transport_error(exc, started=True) from exc
            if not chunk:
                return
            yield chunk

    async def complete(
        self, body: Mapping[str, Any], *, headers: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        merged = self._merged(headers)
        merged["Content-Type"] = "application/json"
        secrets = self._secrets(headers)
        deadline = self.deadlines.start()
        response = await self._open(
            "POST", self._chat_url, deadline, secrets, data=_dumps(body), headers=merged
        )
        return reply_object(await self._read(response, deadline), self.shown_url, secrets)

    async def stream(
        self, body: Mapping[str, Any], *, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        merged = self._merged(headers, accept="text/event-stream")
        merged["Content-Type"] = "application/json"
        secrets = self._secrets(headers)
        payload = _dumps({**body, "stream": True})
        deadline = self.deadlines.start()
        response = await self._open(
            "POST", self._chat_url, deadline, secrets, data=payload, headers=merged
        )
        try:
            ctype = response.headers.get("Content-Type", "")
            if "text/event-stream" not in ctype and "json" in ctype:
                # The upstream ignored "stream": answer with the whole completion as chunks.
                whole = reply_object(await self._read(response, deadline), self.shown_url, secrets)
                for chunk in completion_as_chunks(whole):
                    yield chunk
                return
            events = sse_objects(
                self._chunks(response, deadline),
                self.shown_url,
                content_type=ctype,
                max_event_bytes=self.max_event_bytes,
                secrets=secrets,
            )
            async for chunk in events:
                yield chunk
        except BaseException:
            # Stopped early (an error, a cancelled request, a consumer that went away):
            # drop the connection so that the model server stops generating.
            response.close()
            raise
        finally:
            response.release()

    async def list_models(self, *, headers: Mapping[str, str] | None = None) -> dict[str, Any]:
        secrets = self._secrets(headers)
        deadline = self.deadlines.start()
        # (not retried: /healthz must say at once that the upstream is down, and why)
        response = await self._open(
            "GET", self._models_url, deadline, secrets, NO_RETRIES, headers=self._merged(headers)
        )
        return json_object(await self._read(response, deadline), self.shown_url, secrets)

    async def tokenize(self, text: str, *, within: float = 5.0) -> int | None:
        """The upstream's own token count of ``text`` (llama-server's ``POST /tokenize``, with
        this upstream's credentials; ``within`` seconds at most), or None where it has none or it
        failed."""
        root = self.base_url.removesuffix("/v1")
        headers = {**self._headers, "Content-Type": "application/json"}
        try:
            async with asyncio.timeout(within):
                response = await self._client().post(
                    f"{root}/tokenize", data=_dumps({"content": text}), headers=headers
                )
                async with response:
                    if response.status != 200:
                        return None
                    data = orjson.loads(await response.read())
        except (TimeoutError, aiohttp.ClientError, OSError, orjson.JSONDecodeError):
            return None
        tokens = data.get("tokens") if isinstance(data, dict) else None
        return len(tokens) if isinstance(tokens, list) else None

    async def aclose(self) -> None:
        if self._session is not None and self._owns_session and not self._session.closed:
            await self._session.close()

    def _transport_error(self, exc: BaseException, *, started: bool = False) -> UpstreamError:
        """The error for ``exc``; ``started``: the answer's headers had come."""
        url = self.shown_url
        if isinstance(exc, aiohttp.ConnectionTimeoutError):
            return self.deadlines.connect_error(url)
        if isinstance(exc, TimeoutError):  # aiohttp's SocketTimeoutError: no byte for too long
            return self.deadlines.read_error(url)
        if isinstance(exc, aiohttp.ClientConnectorError):
            return UpstreamConnectionError(
                f"could not reach the upstream at {url}: {exc.os_error or exc}",
                url=url,
                sent=False,
            )
        if started:
            return UpstreamIncompleteError(
                f"the upstream at {url} cut its reply off before its end ({type(exc).__name__})",
                url=url,
            )
        if isinstance(exc, aiohttp.ServerDisconnectedError):
            return UpstreamConnectionError(
                f"the upstream at {url} closed the connection before answering", url=url
            )
        if isinstance(exc, aiohttp.ClientOSError):
            return UpstreamConnectionError(
                f"the upstream at {url} broke the connection before answering: "
                f"{exc.strerror or type(exc).__name__}",
                url=url,
            )
        return UpstreamConnectionError(
            f"error talking to the upstream at {url}: {type(exc).__name__}", url=url
        )


def _stale_connection(exc: aiohttp.ClientError) -> bool:
    """True for the errors of a request written to a pooled connection the server closed."""
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return True
    return isinstance(exc, aiohttp.ClientOSError) and "Can not write request body" in str(exc)


def _dumps(body: Mapping[str, Any]) -> bytes:
    return orjson.dumps(body)
