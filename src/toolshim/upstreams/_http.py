"""What the HTTP adapters share: reading JSON answers and SSE events, and HTTP error mapping.

Transport-free: each adapter feeds it the bytes and lines its client library gives.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Any

import orjson

from toolshim.errors import UpstreamProtocolError, UpstreamStatusError, upstream_error_fields

__all__ = [
    "SSEDecoder",
    "completion_as_chunks",
    "event_object",
    "json_object",
    "sse_objects",
    "status_error",
]


def json_object(content: bytes | str, url: str) -> dict[str, Any]:
    """A JSON object from an upstream's answer, or an UpstreamProtocolError quoting the start."""
    try:
        obj = orjson.loads(content)
    except orjson.JSONDecodeError as exc:
        raw = content.encode() if isinstance(content, str) else content
        snippet = raw[:200].decode("utf-8", "replace")
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


def status_error(
    status: int, content: bytes, url: str, retry_after: str | None = None
) -> UpstreamStatusError:
    """An HTTP error answer, with the upstream's status, body, own message and Retry-After."""
    try:
        body: Any = orjson.loads(content)
    except orjson.JSONDecodeError:
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
        retry_after=retry_after,
    )


def event_object(data: str, url: str) -> dict[str, Any]:
    """One SSE event's JSON; an ``{"error": …}`` event (sent mid-stream) raises."""
    obj = json_object(data, url)
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


class SSEDecoder:
    """Server-sent events, line by line: ``line()`` returns an event's data when one ends.

    Comments (``:``), ``event:``/``id:`` fields and blank keep-alives are skipped; several
    ``data:`` lines make one event. ``done`` turns true at ``data: [DONE]``.
    """

    def __init__(self) -> None:
        self._data: list[str] = []
        self.done = False

    def line(self, line: str) -> str | None:
        line = line.rstrip("\r\n")
        if line.startswith("data:"):
            self._data.append(line[5:].lstrip(" "))
            return None
        if line.strip() or not self._data:
            return None
        return self._take()

    def end(self) -> str | None:
        """The data of an event the stream ended without a blank line after."""
        return self._take() if self._data else None

    def _take(self) -> str | None:
        data = "\n".join(self._data)
        self._data = []
        if data.strip() == "[DONE]":
            self.done = True
            return None
        return data


async def sse_objects(lines: AsyncIterable[str | bytes], url: str) -> AsyncIterator[dict[str, Any]]:
    """The JSON object of each event of an SSE stream, given its lines, up to ``[DONE]``."""
    decoder = SSEDecoder()
    async for line in lines:
        text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
        data = decoder.line(text)
        if data is not None:
            yield event_object(data, url)
        if decoder.done:
            return
    data = decoder.end()
    if data is not None:
        yield event_object(data, url)


def completion_as_chunks(completion: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A whole ``chat.completion`` as stream chunks (for upstreams that ignore ``stream``)."""
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
        # the provider's own fields (reasoning_content, reasoning_details, …) travel too
        delta.update(
            (key, value)
            for key, value in message.items()
            if key not in ("content", "tool_calls") and value is not None
        )
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
