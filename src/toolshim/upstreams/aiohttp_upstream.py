"""An OpenAI-compatible upstream over one pooled aiohttp session: the proxy's fast HTTP client.

It implements the same :class:`~toolshim.upstreams.base.Upstream` protocol and the same error
mapping as :class:`~toolshim.upstreams.openai_http.OpenAIUpstream` (httpx). The proxy uses it
because, measured side by side on a 2-core machine, a pass-through over aiohttp kept about ten
times the throughput of one over httpx (see benchmarks/bench_proxy.py).

The session is created lazily inside the running event loop, so the object can be built
before the loop starts (as ``toolshim serve`` does). ``timeout`` bounds the wait for each read
from the upstream (not the whole reply: a long stream may go on as long as tokens keep coming).
Cancelling a call (a client that went away) closes its upstream connection, so the model
server can stop generating.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
import orjson

from toolshim.errors import (
    UpstreamConnectionError,
    UpstreamError,
    UpstreamTimeoutError,
)
from toolshim.upstreams._http import (
    completion_as_chunks,
    json_object,
    sse_objects,
    status_error,
)
from toolshim.upstreams.openai_http import DEFAULT_TIMEOUT, normalize_base_url

__all__ = ["AiohttpUpstream"]

_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy")


class AiohttpUpstream:
    """Talks to an OpenAI-compatible server at ``base_url`` (e.g. ``http://127.0.0.1:11434/v1``).

    ``key`` names the upstream in the capability registry (default: the normalised base URL),
    as for :class:`~toolshim.upstreams.openai_http.OpenAIUpstream`.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        connect_timeout: float = 10.0,
        headers: Mapping[str, str] | None = None,
        max_connections: int = 256,
        session: aiohttp.ClientSession | None = None,
        key: str | None = None,
    ) -> None:
        self.base_url = normalize_base_url(base_url)
        self._key = key if key is not None else self.base_url
        self._headers = {"Accept": "application/json", **(headers or {})}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self.timeout = timeout
        self._timeout = aiohttp.ClientTimeout(
            total=None, connect=connect_timeout, sock_connect=connect_timeout, sock_read=timeout
        )
        self._max_connections = max_connections
        self._session = session
        self._owns_session = session is None
        self._chat_url = f"{self.base_url}/chat/completions"
        self._models_url = f"{self.base_url}/models"

    @property
    def key(self) -> str:
        """Where this upstream's facts live in the registry (the base URL unless overridden)."""
        return self._key

    def __repr__(self) -> str:
        if self._key != self.base_url:
            return f"AiohttpUpstream({self.base_url!r}, key={self._key!r})"
        return f"AiohttpUpstream({self.base_url!r})"

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
        return merged

    async def complete(
        self, body: Mapping[str, Any], *, headers: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        url = self._chat_url
        merged = self._merged(headers)
        merged["Content-Type"] = "application/json"
        try:
            async with self._client().post(url, data=_dumps(body), headers=merged) as response:
                content = await response.read()
                status = response.status
                retry_after = response.headers.get("Retry-After")
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise _transport_error(exc, url, self.timeout) from exc
        if status >= 400:
            raise status_error(status, content, url, retry_after)
        return json_object(content, url)

    async def stream(
        self, body: Mapping[str, Any], *, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        url = self._chat_url
        merged = self._merged(headers, accept="text/event-stream")
        merged["Content-Type"] = "application/json"
        payload = _dumps({**body, "stream": True})
        try:
            async with self._client().post(url, data=payload, headers=merged) as response:
                try:
                    if response.status >= 400:
                        raise status_error(
                            response.status,
                            await response.read(),
                            url,
                            response.headers.get("Retry-After"),
                        )
                    ctype = response.headers.get("Content-Type", "")
                    if "text/event-stream" not in ctype and "json" in ctype:
                        # The upstream ignored "stream": answer with the whole completion as chunks.
                        whole = json_object(await response.read(), url)
                        for chunk in completion_as_chunks(whole):
                            yield chunk
                        return
                    async for chunk in sse_objects(response.content, url):
                        yield chunk
                except BaseException:
                    # Stopped early (an error, a cancelled request, a consumer that went away):
                    # drop the connection so that the model server stops generating.
                    response.close()
                    raise
        except UpstreamError:
            raise
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise _transport_error(exc, url, self.timeout) from exc

    async def list_models(self, *, headers: Mapping[str, str] | None = None) -> dict[str, Any]:
        url = self._models_url
        try:
            async with self._client().get(url, headers=self._merged(headers)) as response:
                content = await response.read()
                status = response.status
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise _transport_error(exc, url, self.timeout) from exc
        if status >= 400:
            raise status_error(status, content, url)
        return json_object(content, url)

    async def aclose(self) -> None:
        if self._session is not None and self._owns_session and not self._session.closed:
            await self._session.close()


def _dumps(body: Mapping[str, Any]) -> bytes:
    return orjson.dumps(body)


def _transport_error(exc: BaseException, url: str, timeout: float) -> UpstreamError:
    if isinstance(exc, TimeoutError):
        return UpstreamTimeoutError(
            f"the upstream at {url} did not answer within {timeout:g}s", url=url
        )
    if isinstance(exc, aiohttp.ClientConnectorError):
        return UpstreamConnectionError(
            f"could not reach the upstream at {url}: {exc.os_error or exc}", url=url
        )
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return UpstreamConnectionError(
            f"the upstream at {url} closed the connection before answering", url=url
        )
    return UpstreamConnectionError(f"error talking to the upstream at {url}: {exc!r}", url=url)
