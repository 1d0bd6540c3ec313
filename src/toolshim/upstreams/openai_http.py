"""An OpenAI-compatible upstream over httpx: chat completions (plain and SSE) and the model list.

Works with Ollama's ``/v1``, llama-server, vLLM, LM Studio, OpenRouter and OpenAI. One pooled
``httpx.AsyncClient`` is kept (pass your own, e.g. with ``httpx.MockTransport``, in tests).
Every failure becomes an :mod:`toolshim.errors` upstream error that keeps the status, the body
and the upstream's own message (credentials masked). Deadlines and retries follow
:mod:`toolshim.upstreams._policy`.
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
    base URL (without ``user:pass@``). A server whose address changes from run to run (the
    embedded model on a random port) passes a stable key instead, so that what is learned in
    one run holds in the next. ``timeout`` is the read deadline, ``connect_timeout`` and
    ``total_timeout`` the others; ``retries`` how often a safe failure is tried again. A
    ``user:pass@`` in ``base_url`` is sent as Basic credentials, in place of any
    ``Authorization`` a caller forwards (``base_url`` is then kept without it).
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        client: httpx.AsyncClient | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        connect_timeout: float | None = DEFAULT_CONNECT_TIMEOUT,
        total_timeout: float | None = DEFAULT_TOTAL_TIMEOUT,
        retries: int | RetryPolicy = DEFAULT_RETRIES,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        headers: Mapping[str, str] | None = None,
        key: str | None = None,
    ) -> None:
        given = normalize_base_url(base_url)
        self.base_url, self._headers, self._authorization = upstream_headers(
            given, api_key, headers
        )
        self.shown_url = self.base_url
        self._key = url_without_credentials(key) if key is not None else self.shown_url
        self.deadlines = Deadlines(connect=connect_timeout, read=timeout, total=total_timeout)
        self.retry = retries if isinstance(retries, RetryPolicy) else RetryPolicy(retries=retries)
        self.max_event_bytes = max_event_bytes
        self._timeout = httpx.Timeout(timeout, connect=connect_timeout, pool=connect_timeout)
        self._owns_client = client is None
        self._client = client or httpx.AsyncClient(
            timeout=self._timeout,
            limits=httpx.Limits(max_connections=200, max_keepalive_connections=100),
        )
        self._base_secrets = credential_values(self._headers, given)

    @property
    def key(self) -> str:
        """Where this upstream's facts live in the registry (the base URL unless overridden)."""
        return self._key

    def __repr__(self) -> str:
        if self._key != self.shown_url:
            return f"OpenAIUpstream({self.shown_url!r}, key={self._key!r})"
        return f"OpenAIUpstream({self.shown_url!r})"

    def _url(self, path: str) -> str:
        return f"{self.base_url}/{path.lstrip('/')}"

    def _merged(self, headers: Mapping[str, str] | None) -> dict[str, str]:
        if not headers:
            return self._headers
        return with_authorization({**self._headers, **headers}, self._authorization)

    def _secrets(self, headers: Mapping[str, str] | None) -> tuple[str, ...]:
        if not headers:
            return self._base_secrets
        return (*self._base_secrets, *credential_values(headers))

    async def _open(
        self,
        request: httpx.Request,
        deadline: float | None,
        secrets: tuple[str, ...],
        retry: RetryPolicy | None = None,
    ) -> httpx.Response:
        """A streamed response whose status is not an error (an error answer raises)."""

        async def attempt() -> httpx.Response:
            try:
                async with self.deadlines.bound(deadline, self.shown_url):
                    response = await self._client.send(request, stream=True)
                    if response.status_code < 400:
                        return response
                    try:
                        content = await response.aread()
                    finally:
                        await response.aclose()
            except httpx.HTTPError as exc:
                raise self._transport_error(exc) from exc
            raise status_error(
                response.status_code,
                content,
                self.shown_url,
                response.headers.get("retry-after"),
                secrets,
            )

        retry = self.retry if retry is None else retry
        return await with_retries(attempt, retry, deadline=deadline, url=self.shown_url)

    async def _read(self, response: httpx.Response, deadline: float | None) -> bytes:
        try:
            async with self.deadlines.bound(deadline, self.shown_url):
                return await response.aread()
        except httpx.HTTPError as exc:
            raise self._transport_error(exc, started=True) from exc
        finally:
            await response.aclose()

    async def _chunks(
        self, response: httpx.Response, deadline: float | None
    ) -> AsyncIterator[bytes]:
        raw = response.aiter_bytes()
        while True:
            try:
                async with self.deadlines.bound(deadline, self.shown_url):
                    chunk = await anext(raw, b"")
            except httpx.HTTPError as exc:
                raise self._transport_error(exc, started=True) from exc
            if not chunk:
                return
            yield chunk

    def _request(
        self, method: str, path: str, headers: dict[str, str], body: Any = None
    ) -> httpx.Request:
        extensions = {"timeout": self._timeout.as_dict()}
        return self._client.build_request(
            method, self._url(path), json=body, headers=headers, extensions=extensions
        )

    async def complete(
        self, body: Mapping[str, Any], *, headers: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        secrets = self._secrets(headers)
        deadline = self.deadlines.start()
        request = self._request("POST", "chat/completions", self._merged(headers), body)
        response = await self._open(request, deadline, secrets)
        return reply_object(await self._read(response, deadline), self.shown_url, secrets)

    async def stream(
        self, body: Mapping[str, Any], *, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        secrets = self._secrets(headers)
        deadline = self.deadlines.start()
        merged = {**self._merged(headers), "Accept": "text/event-stream"}
        request = self._request("POST", "chat/completions", merged, {**body, "stream": True})
        response = await self._open(request, deadline, secrets)
        try:
            ctype = response.headers.get("content-type", "")
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
        finally:
            await response.aclose()

    async def list_models(self, *, headers: Mapping[str, str] | None = None) -> dict[str, Any]:
        secrets = self._secrets(headers)
        deadline = self.deadlines.start()
        request = self._request("GET", "models", self._merged(headers))
        # (not retried: /healthz must say at once that the upstream is down, and why)
        response = await self._open(request, deadline, secrets, NO_RETRIES)
        return json_object(await self._read(response, deadline), self.shown_url, secrets)

    async def tokenize(self, text: str, *, within: float = 5.0) -> int | None:
        """The upstream's own token count of ``text`` (llama-server's ``POST /tokenize``, with
        this upstream's credentials; ``within`` seconds at most), or None where it has none or it
        failed."""
        root = self.base_url.removesuffix("/v1")
        try:
            response = await self._client.post(
                f"{root}/tokenize", json={"content": text}, headers=self._headers, timeout=within
            )
            data = response.json() if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            return None
        tokens = data.get("tokens") if isinstance(data, dict) else None
        return len(tokens) if isinstance(tokens, list) else None

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()

    def _transport_error(self, exc: httpx.HTTPError, *, started: bool = False) -> UpstreamError:
        """The error for ``exc``; ``started``: the answer's headers had come."""
        url = self.shown_url
        if isinstance(exc, (httpx.ConnectTimeout, httpx.PoolTimeout)):
            return self.deadlines.connect_error(url)
        if isinstance(exc, httpx.TimeoutException):
            return self.deadlines.read_error(url)
        if isinstance(exc, httpx.ConnectError):
            return UpstreamConnectionError(
                f"could not reach the upstream at {url}: {exc}", url=url, sent=False
            )
        if started:
            return UpstreamIncompleteError(
                f"the upstream at {url} cut its reply off before its end "
                f"({type(exc).__name__}{': ' if str(exc) else ''}{exc})",
                url=url,
            )
        if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError)):
            return UpstreamConnectionError(
                f"the upstream at {url} broke the connection before answering: "
                f"{str(exc) or type(exc).__name__}",
                url=url,
            )
        return UpstreamConnectionError(
            f"error talking to the upstream at {url}: {type(exc).__name__}", url=url
        )
