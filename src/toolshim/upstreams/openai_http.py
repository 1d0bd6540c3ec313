"""The one HTTP adapter to an OpenAI-compatible upstream: chat completions (plain and SSE),
the model list, llama-server's token count.

Works with Ollama's ``/v1``, llama-server, vLLM, LM Studio, OpenRouter and OpenAI. Requests go
through a transport (:mod:`toolshim.upstreams._transports`): httpx here by default (pass your
own ``httpx.AsyncClient``, e.g. with ``httpx.MockTransport``, in tests), one pooled aiohttp
session for the proxy (:class:`~toolshim.upstreams.aiohttp_upstream.AiohttpUpstream`). Every
failure becomes an :mod:`toolshim.errors` upstream error that keeps the status, the body and
the upstream's own message (credentials masked). Deadlines and retries follow
:mod:`toolshim.upstreams._policy`. Cancelling a call (a client that went away) closes its
upstream connection, so the model server can stop generating.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import orjson

from toolshim.errors import ConfigError, UpstreamError
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
from toolshim.upstreams._transports import HttpxTransport, Response, Transport
from toolshim.upstreams.chat_completions import ChatCompletionsUpstream

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


class OpenAIUpstream(ChatCompletionsUpstream):
    """Talks to an OpenAI-compatible server at ``base_url`` (e.g. ``http://127.0.0.1:11434/v1``).

    ``key`` names the upstream in the capability registry; by default it is the normalised
    base URL (without ``user:pass@``). A server whose address changes from run to run (the
    embedded model on a random port) passes a stable key instead, so that what is learned in
    one run holds in the next. ``timeout`` is the read deadline, ``connect_timeout`` and
    ``total_timeout`` the others; ``retries`` how often a safe failure is tried again. A
    ``user:pass@`` in ``base_url`` is sent as Basic credentials, in place of any
    ``Authorization`` a caller forwards (``base_url`` is then kept without it). ``transport``
    replaces the httpx one (``client``).
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
        transport: Transport | None = None,
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
        self.transport: Transport = transport or HttpxTransport(client, timeout, connect_timeout)
        self._errors = self.transport.errors
        self._chat_url = f"{self.base_url}/chat/completions"
        self._models_url = f"{self.base_url}/models"
        self._base_secrets = credential_values(self._headers, given)

    @property
    def key(self) -> str:
        """Where this upstream's facts live in the registry (the base URL unless overridden)."""
        return self._key

    def __repr__(self) -> str:
        name = type(self).__name__
        if self._key != self.shown_url:
            return f"{name}({self.shown_url!r}, key={self._key!r})"
        return f"{name}({self.shown_url!r})"

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
        headers: Mapping[str, str],
        deadline: float | None,
        secrets: tuple[str, ...],
        body: Any = None,
        retry: RetryPolicy | None = None,
    ) -> Response:
        """A response whose status is not an error (an error answer raises), with retries."""
        transport = self.transport

        async def attempt() -> Response:
            try:
                async with self.deadlines.bound(deadline, self.shown_url):
                    response = await transport.open(method, url, headers, body)
                    if response.status < 400:
                        return response
                    try:
                        content = await response.read()
                    finally:
                        await response.release()
            except UpstreamError:
                raise
            except self._errors as exc:
                raise transport.error(exc, self.shown_url, self.deadlines, started=False) from exc
            retry_after = response.header("Retry-After")
            raise status_error(response.status, content, self.shown_url, retry_after, secrets)

        retry = self.retry if retry is None else retry
        return await with_retries(attempt, retry, deadline=deadline, url=self.shown_url)

    async def _read(self, response: Response, deadline: float | None) -> bytes:
        try:
            async with self.deadlines.bound(deadline, self.shown_url):
                return await response.read()
        except UpstreamError:
            raise
        except self._errors as exc:
            raise self.transport.error(exc, self.shown_url, self.deadlines, started=True) from exc
        finally:
            await response.release()

    async def _pieces(self, response: Response, deadline: float | None) -> AsyncIterator[bytes]:
        while True:
            try:
                async with self.deadlines.bound(deadline, self.shown_url):
                    piece = await response.read_some()
            except UpstreamError:
                raise
            except self._errors as exc:
                raise self.transport.error(
                    exc, self.shown_url, self.deadlines, started=True
                ) from exc
            if not piece:
                return
            yield piece

    async def complete_body(
        self, body: Mapping[str, Any], *, headers: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        secrets = self._secrets(headers)
        deadline = self.deadlines.start()
        merged = self._merged(headers)
        response = await self._open("POST", self._chat_url, merged, deadline, secrets, body)
        return reply_object(await self._read(response, deadline), self.shown_url, secrets)

    async def stream_body(
        self, body: Mapping[str, Any], *, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        secrets = self._secrets(headers)
        deadline = self.deadlines.start()
        merged = self._merged(headers, accept="text/event-stream")
        payload = {**body, "stream": True}
        response = await self._open("POST", self._chat_url, merged, deadline, secrets, payload)
        try:
            ctype = response.header("Content-Type") or ""
            if "text/event-stream" not in ctype and "json" in ctype:
                # The upstream ignored "stream": answer with the whole completion as chunks.
                whole = reply_object(await self._read(response, deadline), self.shown_url, secrets)
                for chunk in completion_as_chunks(whole):
                    yield chunk
                return
            events = sse_objects(
                self._pieces(response, deadline),
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
            await response.release(abort=True)
            raise
        finally:
            await response.release()

    async def list_models(self, *, headers: Mapping[str, str] | None = None) -> dict[str, Any]:
        secrets = self._secrets(headers)
        deadline = self.deadlines.start()
        # (not retried: /healthz must say at once that the upstream is down, and why)
        response = await self._open(
            "GET", self._models_url, self._merged(headers), deadline, secrets, retry=NO_RETRIES
        )
        return json_object(await self._read(response, deadline), self.shown_url, secrets)

    async def tokenize(self, text: str, *, within: float = 5.0) -> int | None:
        """The upstream's own token count of ``text`` (llama-server's ``POST /tokenize``, with
        this upstream's credentials; ``within`` seconds at most), or None where it has none or it
        failed."""
        root = self.base_url.removesuffix("/v1")
        failures: tuple[type[BaseException], ...] = (TimeoutError, ValueError, *self._errors)
        try:
            async with asyncio.timeout(within):
                response = await self.transport.open(
                    "POST", f"{root}/tokenize", self._headers, {"content": text}
                )
                try:
                    if response.status != 200:
                        return None
                    data = orjson.loads(await response.read())
                finally:
                    await response.release()
        except failures:
            return None
        tokens = data.get("tokens") if isinstance(data, dict) else None
        return len(tokens) if isinstance(tokens, list) else None

    async def aclose(self) -> None:
        await self.transport.aclose()
