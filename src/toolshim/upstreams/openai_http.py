"""An OpenAI-compatible upstream over httpx: chat completions (plain and SSE) and the model list.

Works with Ollama's ``/v1``, llama-server, vLLM, LM Studio, OpenRouter and OpenAI. One pooled
``httpx.AsyncClient`` is kept (pass your own, e.g. with ``httpx.MockTransport``, in tests).
Every failure becomes an :mod:`toolshim.errors` upstream error that keeps the status, the body
and the upstream's own message.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from toolshim.errors import (
    UpstreamConnectionError,
    UpstreamError,
    UpstreamProtocolError,
    UpstreamStatusError,
    UpstreamTimeoutError,
    upstream_error_fields,
)

__all__ = ["DEFAULT_TIMEOUT", "OpenAIUpstream", "normalize_base_url"]

DEFAULT_TIMEOUT = 600.0
"""Seconds to wait for an upstream answer: local models on a CPU can be slow."""


def normalize_base_url(url: str) -> str:
    """``http://host:port`` → ``http://host:port/v1``; other paths are kept (trailing / dropped)."""
    url = url.strip()
    if "://" not in url:
        url = f"http://{url}"
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    if not path:
        path = "/v1"
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


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
            raise _status_error(response.status_code, response.content, url)
        return _json_object(response.content, url)

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
                    raise _status_error(response.status_code, await response.aread(), url)
                ctype = response.headers.get("content-type", "")
                if "text/event-stream" not in ctype and "json" in ctype:
                    # The upstream ignored "stream": answer with the whole completion as chunks.
                    whole = _json_object(await response.aread(), url)
                    for chunk in completion_as_chunks(whole):
                        yield chunk
                    return
                async for chunk in _sse_objects(response, url):
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
            raise _status_error(response.status_code, response.content, url)
        return _json_object(response.content, url)

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()


async def _sse_objects(response: httpx.Response, url: str) -> AsyncIterator[dict[str, Any]]:
    """Parse ``data:`` events; ``[DONE]`` ends the stream; an error event raises."""
    data_lines: list[str] = []
    async for line in response.aiter_lines():
        if line.startswith("data:"):
            data_lines.append(line[5:].lstrip(" "))
            continue
        if line.strip() or not data_lines:
            continue  # comments (":"), "event:", "id:" and blank keep-alives
        data = "\n".join(data_lines)
        data_lines = []
        if data.strip() == "[DONE]":
            return
        yield _event(data, url)
    if data_lines and "\n".join(data_lines).strip() != "[DONE]":
        yield _event("\n".join(data_lines), url)


def _event(data: str, url: str) -> dict[str, Any]:
    obj = _json_object(data.encode(), url)
    if "error" in obj and "choices" not in obj:
        fields = upstream_error_fields(obj)
        status = obj["error"].get("code") if isinstance(obj["error"], Mapping) else None
        raise UpstreamStatusError(
            str(fields.get("message") or "the upstream sent an error event"),
            status=status if isinstance(status, int) and 400 <= status < 600 else 502,
            body=obj,
            url=url,
        )
    return obj


def _json_object(content: bytes, url: str) -> dict[str, Any]:
    try:
        obj = json.loads(content)
    except ValueError as exc:
        snippet = content[:200].decode("utf-8", "replace")
        raise UpstreamProtocolError(
            f"the upstream at {url} answered with something that is not JSON: {snippet!r}",
            url=url,
        ) from exc
    if not isinstance(obj, dict):
        raise UpstreamProtocolError(
            f"the upstream at {url} answered with a JSON {type(obj).__name__}, not an object",
            url=url,
        )
    return obj


def _status_error(status: int, content: bytes, url: str) -> UpstreamStatusError:
    try:
        body: Any = json.loads(content)
    except ValueError:
        body = content.decode("utf-8", "replace")
    fields = upstream_error_fields(body)
    message = fields.get("message") or f"the upstream answered HTTP {status}"
    return UpstreamStatusError(
        str(message),
        status=status,
        body=body,
        url=url,
        upstream_type=fields.get("type"),
        upstream_code=fields.get("code"),
        upstream_param=fields.get("param"),
    )


def _transport_error(exc: httpx.HTTPError, url: str) -> UpstreamError:
    if isinstance(exc, httpx.TimeoutException):
        return UpstreamTimeoutError(
            f"the upstream at {url} did not answer in time ({exc!r})", url=url
        )
    if isinstance(exc, (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError)):
        return UpstreamConnectionError(f"could not reach the upstream at {url}: {exc}", url=url)
    return UpstreamConnectionError(f"error talking to the upstream at {url}: {exc!r}", url=url)


def completion_as_chunks(completion: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A whole ``chat.completion`` re-expressed as stream chunks (for upstreams that ignore stream)."""
    base = {
        "id": completion.get("id", "chatcmpl-upstream"),
        "object": "chat.completion.chunk",
        "created": completion.get("created", int(time.time())),
        "model": completion.get("model", ""),
    }
    chunks = []
    for choice in completion.get("choices") or []:
        message = dict(choice.get("message") or {})
        delta: dict[str, Any] = {"role": message.pop("role", "assistant")}
        if message.get("content") is not None:
            delta["content"] = message["content"]
        if message.get("tool_calls"):
            delta["tool_calls"] = [
                {"index": i, **call} for i, call in enumerate(message["tool_calls"])
            ]
        chunks.append(
            {
                **base,
                "choices": [
                    {
                        "index": choice.get("index", 0),
                        "delta": delta,
                        "finish_reason": choice.get("finish_reason"),
                    }
                ],
            }
        )
    if completion.get("usage"):
        chunks.append({**base, "choices": [], "usage": completion["usage"]})
    return chunks
