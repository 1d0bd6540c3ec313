"""The fault matrix: each way an upstream misbehaves, and the one result toolshim must give.

``FAULTS`` maps a name to a :class:`Fault`: the server's behaviour for a plain and a streamed
request, and the expected outcome of each as ``(HTTP status, error code)`` (``None``: the
request succeeds). The deadlines every case runs with are :data:`DEADLINES`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from tests.faults.badserver import (
    Request,
    bad_server,
    chunk,
    closed_port,
    completion,
    delta,
    event,
    head,
    reset,
    unanswered_port,
)

__all__ = ["DEADLINES", "FAULTS", "Fault", "Outcome", "fault_url"]

DEADLINES = {"connect_timeout": 1.0, "timeout": 0.6, "total_timeout": 1.5}
"""What every fault case runs with: short deadlines, so that a hang shows as a failure."""

Outcome = tuple[int, str] | None
Behaviour = Callable[[asyncio.StreamReader, asyncio.StreamWriter, Request], Awaitable[None]]

SSE = {"Content-Type": "text/event-stream"}
JSON = {"Content-Type": "application/json"}
FIRST = delta("The weather ")


@dataclass(frozen=True)
class Fault:
    description: str
    plain: Behaviour | None
    streamed: Behaviour | None
    plain_outcome: Outcome
    streamed_outcome: Outcome
    retried: bool = False
    """The request is tried 1 + retries times."""
    no_server: str = ""
    """Without a server: ``refused`` (nothing listens) or ``unanswered`` (a full queue)."""
    resent: bool = False
    """The aiohttp adapter sends it once more at once: to a client, a connection closed
    before any answer looks like a kept-alive one the server had closed (llama-server)."""

    def behaviour(self, streamed: bool) -> Behaviour:
        """The server's behaviour for a streamed or a plain request (not for "refused")."""
        behaviour = self.streamed if streamed else self.plain
        assert behaviour is not None, f"{self.description!r} has no server"
        return behaviour


async def _send(writer: asyncio.StreamWriter, *parts: bytes) -> None:
    for part in parts:
        writer.write(part)
    await writer.drain()


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    await writer.wait_closed()


async def never_answer(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: Request
) -> None:
    await asyncio.sleep(3600)


async def reset_mid_body_plain(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: Request
) -> None:
    body = json.dumps(completion("x" * 500)).encode()
    await _send(writer, head(200, {**JSON, "Content-Length": str(len(body))}), body[:100])
    await asyncio.sleep(0.05)
    reset(writer)


async def reset_mid_body_streamed(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: Request
) -> None:
    await _send(writer, head(200, {**SSE, "Transfer-Encoding": "chunked"}), chunk(event(FIRST)))
    await asyncio.sleep(0.05)
    reset(writer)


async def close_before_answering(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: Request
) -> None:
    await _close(writer)


async def reset_before_answering(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: Request
) -> None:
    reset(writer)


async def silent_mid_body_plain(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: Request
) -> None:
    body = json.dumps(completion("x" * 500)).encode()
    await _send(writer, head(200, {**JSON, "Content-Length": str(len(body))}), body[:100])
    await asyncio.sleep(3600)


async def silent_mid_body_streamed(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: Request
) -> None:
    await _send(writer, head(200, {**SSE, "Transfer-Encoding": "chunked"}), chunk(event(FIRST)))
    await asyncio.sleep(3600)


def _drip(headers: dict[str, str], body: bytes) -> Behaviour:
    async def drip(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: Request
    ) -> None:
        await _send(writer, head(200, headers))
        for byte in body:
            await _send(writer, bytes([byte]))
            await asyncio.sleep(0.1)

    return drip


_SLOW = b"data: " + json.dumps(delta("x" * 200)).encode() + b"\n\n"
drip_plain = _drip({**JSON, "Content-Length": "5000"}, json.dumps(completion("x" * 4000)).encode())
drip_streamed = _drip({**SSE, "Connection": "close"}, _SLOW * 50)


async def cut_close_delimited_plain(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: Request
) -> None:
    body = json.dumps(completion("x" * 500)).encode()
    await _send(writer, head(200, {**JSON, "Connection": "close"}), body[:200])
    await _close(writer)


async def cut_close_delimited_streamed(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: Request
) -> None:
    await _send(writer, head(200, {**SSE, "Connection": "close"}), event(FIRST), event(delta("is")))
    await _close(writer)


async def cut_chunked_plain(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: Request
) -> None:
    body = json.dumps(completion("x" * 500)).encode()
    await _send(writer, head(200, {**JSON, "Transfer-Encoding": "chunked"}), chunk(body[:200]))
    await _close(writer)


async def cut_chunked_streamed(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: Request
) -> None:
    await _send(
        writer,
        head(200, {**SSE, "Transfer-Encoding": "chunked"}),
        chunk(event(FIRST)),
        chunk(event(delta("is"))),
    )
    await _close(writer)


def _status(status: int, body: bytes, headers: dict[str, str]) -> Behaviour:
    async def answer(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: Request
    ) -> None:
        await _send(writer, head(status, {**headers, "Content-Length": str(len(body))}), body)

    return answer


def _error_json(message: str, kind: str = "server_error") -> bytes:
    return json.dumps({"error": {"message": message, "type": kind, "code": None}}).encode()


HTML_PAGE = b"<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"
rate_limited = _status(
    429, _error_json("Rate limit reached", "rate_limit_error"), {**JSON, "Retry-After": "7"}
)
server_error_json = _status(500, _error_json("the model crashed"), JSON)
overloaded_json = _status(503, _error_json("overloaded"), {**JSON, "Retry-After": "0"})
bad_gateway_html = _status(502, HTML_PAGE, {"Content-Type": "text/html"})
invalid_json_plain = _status(200, b'{"choices": [', JSON)


async def invalid_json_streamed(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: Request
) -> None:
    await _send(writer, head(200, {**SSE, "Connection": "close"}), b'data: {"choices": [\n\n')
    await _close(writer)


html_ok = _status(200, HTML_PAGE, {"Content-Type": "text/html"})
OVERLOADED = {"error": {"message": "model overloaded", "type": "server_error", "code": 503}}
error_with_200_plain = _status(200, json.dumps(OVERLOADED).encode(), JSON)


async def error_event_streamed(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: Request
) -> None:
    await _send(writer, head(200, {**SSE, "Connection": "close"}), event(FIRST), event(OVERLOADED))
    await _close(writer)


def huge_arguments() -> str:
    """Tool-call arguments of about 5 MB (one SSE event, one line)."""
    return json.dumps({"city": "Paris", "notes": "n" * 5_000_000})


def _call(arguments: str, call_id: str = "call_1") -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "get_weather", "arguments": arguments},
    }


def _call_delta(arguments: str) -> list[dict[str, Any]]:
    return [{"index": 0, **_call(arguments)}]


huge_event_plain = _status(
    200,
    json.dumps(
        completion(None, finish="tool_calls", tool_calls=[_call(huge_arguments())])
    ).encode(),
    JSON,
)


async def huge_event_streamed(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: Request
) -> None:
    await _send(
        writer,
        head(200, {**SSE, "Connection": "close"}),
        event(delta(tool_calls=_call_delta(huge_arguments()))),
        event(delta(finish="tool_calls")),
        event("[DONE]"),
    )
    await _close(writer)


CUT_ARGUMENTS = '{"city": "Par'
length_in_call_plain = _status(
    200,
    json.dumps(completion(None, finish="length", tool_calls=[_call(CUT_ARGUMENTS)])).encode(),
    JSON,
)


async def length_in_call_streamed(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: Request
) -> None:
    await _send(
        writer,
        head(200, {**SSE, "Connection": "close"}),
        event(delta(tool_calls=_call_delta(CUT_ARGUMENTS))),
        event(delta(finish="length")),
        event("[DONE]"),
    )
    await _close(writer)


FAULTS: dict[str, Fault] = {
    "refused": Fault(
        "nothing listens on the port",
        None,
        None,
        (502, "upstream_unreachable"),
        (502, "upstream_unreachable"),
        retried=True,
        no_server="refused",
    ),
    "connect hangs": Fault(
        "the listener's queue is full: SYNs are dropped",
        None,
        None,
        (504, "upstream_timeout"),
        (504, "upstream_timeout"),
        retried=True,
        no_server="unanswered",
    ),
    "closed before answering": Fault(
        "the request is read, the connection closed without a byte",
        close_before_answering,
        close_before_answering,
        (502, "upstream_unreachable"),
        (502, "upstream_unreachable"),
        resent=True,
    ),
    "reset before answering": Fault(
        "the request is read, then a TCP reset",
        reset_before_answering,
        reset_before_answering,
        (502, "upstream_unreachable"),
        (502, "upstream_unreachable"),
    ),
    "reset mid-body": Fault(
        "TCP reset after part of the body",
        reset_mid_body_plain,
        reset_mid_body_streamed,
        (502, "upstream_incomplete"),
        (502, "upstream_incomplete"),
    ),
    "no answer before headers": Fault(
        "the request is read, nothing is sent",
        never_answer,
        never_answer,
        (504, "upstream_timeout"),
        (504, "upstream_timeout"),
    ),
    "silent mid-body": Fault(
        "headers and part of the body (a first event), then nothing",
        silent_mid_body_plain,
        silent_mid_body_streamed,
        (504, "upstream_timeout"),
        (504, "upstream_timeout"),
    ),
    "drip": Fault(
        "headers, then a byte every 0.1 s",
        drip_plain,
        drip_streamed,
        (504, "upstream_timeout"),
        (504, "upstream_timeout"),
    ),
    "cut, close-delimited": Fault(
        "no length, no chunks: closed midway",
        cut_close_delimited_plain,
        cut_close_delimited_streamed,
        (502, "upstream_bad_response"),
        (502, "upstream_incomplete"),
    ),
    "cut, chunked": Fault(
        "chunked, closed without the last chunk",
        cut_chunked_plain,
        cut_chunked_streamed,
        (502, "upstream_incomplete"),
        (502, "upstream_incomplete"),
    ),
    "429 with Retry-After": Fault(
        "429, Retry-After: 7, JSON error",
        rate_limited,
        rate_limited,
        (429, "rate_limit_error"),
        (429, "rate_limit_error"),
    ),
    "500 JSON": Fault(
        "500 with an OpenAI error body",
        server_error_json,
        server_error_json,
        (500, "server_error"),
        (500, "server_error"),
    ),
    "503 JSON, Retry-After: 0": Fault(
        "503 every time",
        overloaded_json,
        overloaded_json,
        (503, "server_error"),
        (503, "server_error"),
        retried=True,
    ),
    "502 HTML": Fault(
        "502 with nginx's HTML page",
        bad_gateway_html,
        bad_gateway_html,
        (502, "upstream_error"),
        (502, "upstream_error"),
        retried=True,
    ),
    "invalid JSON": Fault(
        "200 with a JSON body cut short / a broken event",
        invalid_json_plain,
        invalid_json_streamed,
        (502, "upstream_bad_response"),
        (502, "upstream_bad_response"),
    ),
    "error with 200": Fault(
        "200 with an error object as the body / an error event after the first",
        error_with_200_plain,
        error_event_streamed,
        (503, "upstream_error"),
        (503, "upstream_error"),
    ),
    "HTML with 200": Fault(
        "200 with an HTML page",
        html_ok,
        html_ok,
        (502, "upstream_bad_response"),
        (502, "upstream_bad_response"),
    ),
    "huge event": Fault(
        "a 5 MB tool call in one event", huge_event_plain, huge_event_streamed, None, None
    ),
    "max_tokens inside a tool call": Fault(
        "finish_reason length, arguments cut",
        length_in_call_plain,
        length_in_call_streamed,
        None,
        None,
    ),
}


@asynccontextmanager
async def fault_url(fault: Fault, streamed: bool) -> AsyncIterator[tuple[str, list[Request]]]:
    """The base URL of an upstream that misbehaves as ``fault`` says, and the requests it got."""
    if fault.no_server == "refused":
        yield f"http://127.0.0.1:{closed_port()}/v1", []
    elif fault.no_server == "unanswered":
        with unanswered_port() as port:
            yield f"http://127.0.0.1:{port}/v1", []
    else:
        async with bad_server(fault.behaviour(streamed)) as server:
            yield server.base_url, server.requests
