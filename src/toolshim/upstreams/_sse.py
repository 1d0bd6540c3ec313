"""Server-sent events from raw bytes, with an end check: a stream that stops early is an error.

Transport-free: each adapter feeds the byte chunks its client library reads. Lines have no
length limit of their own (a tool call's arguments can be megabytes in one event); one event
may hold at most ``max_event_bytes`` (default 64 MiB), past which the stream fails with an
:class:`~toolshim.errors.UpstreamProtocolError` that names the limit. A stream counts as
complete when it sent ``data: [DONE]`` or a choice with a ``finish_reason``; one that ends
without either (a connection closed midway, an HTML page served with status 200) raises
:class:`~toolshim.errors.UpstreamIncompleteError` instead of looking like a short answer.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable
from typing import Any

from toolshim.errors import UpstreamIncompleteError, UpstreamProtocolError
from toolshim.redact import redact
from toolshim.upstreams._http import reply_object

__all__ = ["DEFAULT_MAX_EVENT_BYTES", "SSEDecoder", "sse_objects"]

DEFAULT_MAX_EVENT_BYTES = 64 * 1024 * 1024
"""The largest SSE event read from an upstream (64 MiB): room for any tool call's arguments."""

_SNIPPET = 200


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


async def sse_objects(
    chunks: AsyncIterable[bytes],
    url: str,
    *,
    content_type: str = "text/event-stream",
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    secrets: Iterable[str] = (),
) -> AsyncIterator[dict[str, Any]]:
    """The JSON object of each event of an SSE stream read from byte ``chunks``, up to
    ``[DONE]``; raises when the stream ends without ``[DONE]`` or a ``finish_reason``."""
    decoder = SSEDecoder()
    buffer = bytearray()
    event_bytes = 0  # bytes of the event being read, finished lines included
    finished = False
    head = bytearray()  # the start of the body, quoted when it was not an event stream
    async for chunk in chunks:
        if len(head) < _SNIPPET:
            head += chunk[: _SNIPPET - len(head)]
        start = len(buffer)
        buffer += chunk
        begin = 0
        while (end := buffer.find(b"\n", start)) >= 0:
            line = bytes(buffer[begin:end])
            begin = start = end + 1
            event_bytes = 0 if not line.strip() else event_bytes + len(line) + 1
            data = decoder.line(line.decode("utf-8", "replace"))
            if data is not None:
                obj = reply_object(data, url, secrets)
                finished = finished or _has_finish(obj)
                yield obj
            if decoder.done:
                return
        if begin:
            del buffer[:begin]
        if event_bytes + len(buffer) > max_event_bytes:
            raise UpstreamProtocolError(
                f"an event from the upstream at {url} is larger than the limit of "
                f"{max_event_bytes} bytes (max_event_bytes)",
                url=url,
            )
    if buffer:
        data = decoder.line(buffer.decode("utf-8", "replace"))
        if data is not None:  # (a line alone cannot end an event; kept for symmetry)
            obj = reply_object(data, url, secrets)
            finished = finished or _has_finish(obj)
            yield obj
    data = decoder.end()
    if data is not None:
        obj = reply_object(data, url, secrets)
        finished = finished or _has_finish(obj)
        yield obj
    if decoder.done or finished:
        return
    if "text/event-stream" not in content_type.lower():
        raise UpstreamProtocolError(
            f"the upstream at {url} answered a streaming request with "
            f"{content_type or 'no content type'!r}, not an event stream: "
            f"{redact(bytes(head).decode('utf-8', 'replace'), secrets)!r}",
            url=url,
        )
    raise UpstreamIncompleteError(
        f"the upstream at {url} ended its stream without a finish_reason or [DONE]: "
        "the reply was cut off",
        url=url,
    )


def _has_finish(obj: dict[str, Any]) -> bool:
    choices = obj.get("choices")
    if not isinstance(choices, list):
        return False
    return any(isinstance(c, dict) and c.get("finish_reason") for c in choices)
