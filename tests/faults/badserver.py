"""A misbehaving HTTP server on 127.0.0.1, written on raw asyncio sockets so every byte is ours.

Each fault is a coroutine ``(reader, writer, request)`` that answers one request however it
likes (or never). :func:`bad_server` serves one fault in the running loop and records the
requests it got; :func:`closed_port` gives a port where nothing listens, and
:func:`unanswered_port` one whose accept queue is full (a connection attempt hangs).
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "BadServer",
    "Request",
    "bad_server",
    "chunk",
    "closed_port",
    "completion",
    "event",
    "head",
    "reset",
    "unanswered_port",
]


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


Fault = Callable[[asyncio.StreamReader, asyncio.StreamWriter, Request], Awaitable[None]]


@dataclass
class BadServer:
    port: int
    requests: list[Request] = field(default_factory=list)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


async def _read_request(reader: asyncio.StreamReader) -> Request | None:
    try:
        head_bytes = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    lines = head_bytes.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return Request(method, path, headers, body)


@asynccontextmanager
async def bad_server(*faults: Fault) -> AsyncIterator[BadServer]:
    """Serve ``faults`` in turn, one per request (the last one repeats), on 127.0.0.1."""
    tasks: set[asyncio.Task[None]] = set()
    state: BadServer

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        tasks.add(task)
        try:
            while (request := await _read_request(reader)) is not None:
                if not request.path.startswith("/v1/"):
                    # A stray probe (another process on this shared machine polling the
                    # port it had before, e.g. GET /healthz): not a request of the test.
                    writer.write(head(404, {"Content-Length": "0"}))
                    await writer.drain()
                    continue
                state.requests.append(request)
                fault = faults[min(len(state.requests), len(faults)) - 1]
                await fault(reader, writer, request)
                if writer.is_closing():
                    break
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()
            tasks.discard(task)

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    state = BadServer(server.sockets[0].getsockname()[1])
    try:
        yield state
    finally:
        server.close()
        for task in list(tasks):
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()


def closed_port() -> int:
    """A port on 127.0.0.1 where nothing listens (connections are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def unanswered_port() -> Iterator[int]:
    """A port on 127.0.0.1 whose listener never accepts and whose queue is full: the kernel
    drops further connection attempts, so they hang until the client's connect timeout."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = int(listener.getsockname()[1])
        fillers = []
        try:
            for _ in range(4):
                filler = socket.socket()
                filler.setblocking(False)
                with suppress(BlockingIOError):
                    filler.connect(("127.0.0.1", port))
                fillers.append(filler)
            yield port
        finally:
            for filler in fillers:
                filler.close()


def head(status: int = 200, headers: dict[str, str] | None = None, *, reason: str = "X") -> bytes:
    """A status line and headers, ready to send."""
    lines = [f"HTTP/1.1 {status} {reason}", *(f"{k}: {v}" for k, v in (headers or {}).items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def event(data: Any) -> bytes:
    """One SSE event (``data`` as JSON, or a str as it is)."""
    text = data if isinstance(data, str) else json.dumps(data)
    return f"data: {text}\n\n".encode()


def chunk(data: bytes) -> bytes:
    """``data`` in chunked transfer framing."""
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def completion(
    content: str | None = "hi",
    *,
    finish: str | None = "stop",
    tool_calls: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-bad",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }


def delta(
    content: str | None = None,
    *,
    finish: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    d: dict[str, Any] = {}
    if content is not None:
        d["content"] = content
    if tool_calls is not None:
        d["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-bad",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": d, "finish_reason": finish}],
    }


def reset(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP reset (RST) instead of an orderly FIN."""
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()
