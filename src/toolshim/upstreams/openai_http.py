"""An OpenAI-compatible upstream over httpx: chat completions (plain and SSE) and the model list.

Works with Ollama's ``/v1``, llama-server, vLLM, LM Studio, OpenRouter and OpenAI. One pooled
``httpx.AsyncClient`` is kept (pass your own, e.g. with ``httpx.MockTransport``, in tests).
Every failure becomes an :mod:`toolshim.errors` upstream error that keeps the status, the body
and the upstream's own message.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from toolshim.errors import (
    ConfigError,
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

__all__ = ["DEFAULT_TIMEOUT", "OpenAIUpstream", "normalize_base_url"]

DEFAULT_TIMEOUT = 600.0
"""Seconds to wait for an upstream answer: local models on a CPU can be slow."""


def normalize_base_url(url: str) -> str:
    """``http://host:port`` → ``http://host:port/v1``; other paths are kept (trailing / dropped),
    a pasted endpoint (``…/v1/chat/completions``) is cut back to its base.

    Raises ConfigError for what cannot be an HTTP API's address (another scheme, no host, a
    port out of range), so that a typo fails at start-up instead of on every request.
    """
    given = url
    url = url.strip()
    if "://" not in url:
        url = f"http://{url}"
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https"):
        raise ConfigError(
            f"the upstream URL {given!r} is not http:// or https:// "
            "(expected e.g. http://127.0.0.1:11434/v1)"
        )
    try:
        port = parts.port
    except ValueError:
        port = -1
    if not parts.hostname or port == -1 or port == 0:
        raise ConfigError(
            f"the upstream URL {given!r} has no valid host and port "
            "(expected e.g. http://127.0.0.1:11434/v1)"
        )
    path = parts.path.rstrip("/")
    for endpoint in ("/chat/completions", "/models"):
        if path.endswith(endpoint):
            path = path[: -len(endpoint)]
    if not path:
        path = "/v1"
    return urlunsplit((parts.scheme.lower(), parts.netloc, path, "", ""))


class OpenAIUpstream:
    """Talks to an OpenAI-compatible server at ``base_url`` (e.g. ``http://127.0.0.1:11434/v1``).

    ``key`` names the upstream in the capability registry; by default it is the normalised
    base URL. A server whose address changes from run to run (the embedded model on a random
    port) passes a stable key instead, so that what is learned in one run holds in the next.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        client: httpx.AsyncClient | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        connect_timeout: float = 10.0,
        headers: Mapping[str, str] | None = None,
        key: str | None = None,
    ) -> None:
        self.base_url = normalize_base_url(base_url)
        self._key = key if key is not None else self.base_url
        self._headers = {"Accept": "application/json", **(headers or {})}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._timeout = httpx.Timeout(timeout, connect=connect_timeout)
        self._owns_client = client is None
        self._client = client or httpx.AsyncClient(
            timeout=self._timeout,
            limits=httpx.Limits(max_connections=200, max_keepalive_connections=100),
        )

    @property
    def key(self) -> str:
        """Where this upstream's facts live in the registry (the base URL unless overridden)."""
        return self._key

    def __repr__(self) -> str:
        if self._key != self.base_url:
            return f"OpenAIUpstream({self.base_url!r}, key={self._key!r})"
        return f"OpenAIUpstream({self.base_url!r})"

    def _url(self, path: str) -> str:
        return f"{self.base_url}/{path.lstrip('/')}"

    def _merged(self, headers: Mapping[str, str] | None) -> dict[str, str]:
        return {**self._headers, **headers} if headers else self._headers

    async def complete(
        self, body: Mapping[str, Any], *, headers: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        url = self._url("chat/completions")
        try:
            response = await self._client.post(
                url, json=body, headers=self._merged(headers), timeout=self._timeout
            )
        except httpx.HTTPError as exc:
            raise _transport_error(exc, url) from exc
        if response.status_code >= 400:
            raise status_error(
                response.status_code, response.content, url, response.headers.get("retry-after")
            )
        return json_object(response.content, url)

    async def stream(
        self, body: Mapping[str, Any], *, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        url = self._url("chat/completions")
        payload = {**body, "stream": True}
        merged = {**self._merged(headers), "Accept": "text/event-stream"}
        try:
            async with self._client.stream(
                "POST", url, json=payload, headers=merged, timeout=self._timeout
            ) as response:
                if response.status_code >= 400:
                    raise status_error(
                        response.status_code,
                        await response.aread(),
                        url,
                        response.headers.get("retry-after"),
                    )
                ctype = response.headers.get("content-type", "")
                if "text/event-stream" not in ctype and "json" in ctype:
                    # The upstream ignored "stream": answer with the whole completion as chunks.
                    whole = json_object(await response.aread(), url)
                    for chunk in completion_as_chunks(whole):
                        yield chunk
                    return
                async for chunk in sse_objects(response.aiter_lines(), url):
                    yield chunk
        except UpstreamError:
            raise
        except httpx.HTTPError as exc:
            raise _transport_error(exc, url) from exc

    async def list_models(self, *, headers: Mapping[str, str] | None = None) -> dict[str, Any]:
        url = self._url("models")
        try:
            response = await self._client.get(url, headers=self._merged(headers))
        except httpx.HTTPError as exc:
            raise _transport_error(exc, url) from exc
        if response.status_code >= 400:
            raise status_error(
                response.status_code, response.content, url, response.headers.get("retry-after")
            )
        return json_object(response.content, url)

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()


def _transport_error(exc: httpx.HTTPError, url: str) -> UpstreamError:
    if isinstance(exc, httpx.TimeoutException):
        return UpstreamTimeoutError(
            f"the upstream at {url} did not answer in time ({exc!r})", url=url
        )
    if isinstance(exc, (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError)):
        return UpstreamConnectionError(f"could not reach the upstream at {url}: {exc}", url=url)
    return UpstreamConnectionError(f"error talking to the upstream at {url}: {exc!r}", url=url)
