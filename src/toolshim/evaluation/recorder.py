"""A recording pass-through: forwards every request to a target server, streams the answer
back unchanged, and keeps what each exchange cost (the coding-agent suite's meter).

Put one in front of a model server and it reads llama-server's ``timings`` (prompt tokens
processed, and those served from its KV cache); put one in front of toolshim and it reads the
``toolshim`` metadata of each answer (LLM calls, re-asks, warnings) and its error, if any.
It is an aiohttp app; serve it with :func:`toolshim.testing.server.serve_app`.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

__all__ = ["Exchange", "Recorder"]

_HOP_BY_HOP = frozenset(
    {"host", "content-length", "connection", "transfer-encoding", "keep-alive", "accept-encoding"}
)
_PASSED_BACK = ("content-type", "x-toolshim-emulated", "retry-after", "request-id", "x-request-id")
_MADE_UP = b"there is no tool named"
"""How toolshim's correction of a call to a tool that does not exist begins."""
_DATA = re.compile(rb"^data: ?(.*)$", re.MULTILINE)


@dataclass
class Exchange:
    """One request through the recorder, and what its answer said about its cost."""

    method: str
    path: str
    started: float
    seconds: float = 0.0
    status: int = 0
    model: str | None = None
    prompt_tokens: int | None = None
    """Prompt tokens of the request (llama-server: processed plus served from its cache)."""
    cached_tokens: int | None = None
    """Of those, served from the upstream's KV cache."""
    output_tokens: int | None = None
    toolshim: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    made_up_tool: bool = False
    """The request re-asks the model for a call to a tool that does not exist (toolshim's
    correction is in it)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "path": self.path,
            "seconds": round(self.seconds, 3),
            "status": self.status,
            "model": self.model,
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "output_tokens": self.output_tokens,
            "toolshim": self.toolshim,
            "error": self.error,
            "made_up_tool": self.made_up_tool,
        }


class Recorder:
    """``Recorder(target).app()`` forwards ``/…`` to ``target`` (a root URL, no ``/v1``) and
    appends an :class:`Exchange` to :attr:`exchanges` for each request; with ``transcript``,
    each request's body and its answer's bytes are appended to that JSON-lines file too (what
    a model was really asked, for reading a failure afterwards)."""

    def __init__(self, target: str, *, transcript: Path | None = None) -> None:
        self.target = target.rstrip("/")
        self.exchanges: list[Exchange] = []
        self.transcript = transcript

    def app(self) -> web.Application:
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        return app

    def mark(self) -> int:
        """A position in :attr:`exchanges`: what came after it is :meth:`since` it."""
        return len(self.exchanges)

    def since(self, mark: int) -> list[Exchange]:
        return self.exchanges[mark:]

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        exchange = Exchange(request.method, request.path, time.monotonic())
        self.exchanges.append(exchange)
        exchange.model = _model_of(body)
        exchange.made_up_tool = _MADE_UP in body
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=30)
        seen = bytearray()
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout, auto_decompress=False) as session,
                session.request(
                    request.method, self.target + request.path_qs, data=body, headers=headers
                ) as answer,
            ):
                exchange.status = answer.status
                response = web.StreamResponse(
                    status=answer.status,
                    headers={k: v for k, v in answer.headers.items() if k.lower() in _PASSED_BACK},
                )
                await response.prepare(request)
                async for piece in answer.content.iter_any():
                    seen += piece
                    await response.write(piece)
                await response.write_eof()
                return response
        except (aiohttp.ClientError, ConnectionError) as exc:
            exchange.status = exchange.status or 502
            exchange.error = f"recorder: {type(exc).__name__}: {exc}"
            raise
        finally:
            exchange.seconds = time.monotonic() - exchange.started
            _read_answer(exchange, bytes(seen))
            if self.transcript is not None:
                self._write_transcript(exchange, body, bytes(seen))

    def _write_transcript(self, exchange: Exchange, body: bytes, answer: bytes) -> None:
        line = {
            "path": exchange.path,
            "status": exchange.status,
            "seconds": round(exchange.seconds, 3),
            "request": body.decode("utf-8", "replace"),
            "answer": answer.decode("utf-8", "replace"),
        }
        assert self.transcript is not None
        with self.transcript.open("a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\n")


def _model_of(body: bytes) -> str | None:
    try:
        value = json.loads(body) if body else None
    except ValueError:
        return None
    model = value.get("model") if isinstance(value, dict) else None
    return model if isinstance(model, str) else None


def _documents(data: bytes) -> list[Any]:
    """The JSON documents of an answer: the body itself, or each ``data:`` line of a stream."""
    text = data.strip()
    pieces = [text] if text.startswith(b"{") else _DATA.findall(data)
    out: list[Any] = []
    for piece in pieces:
        try:
            out.append(json.loads(piece))
        except ValueError:
            continue
    return out


def _read_answer(exchange: Exchange, data: bytes) -> None:
    for document in _documents(data):
        if not isinstance(document, dict):
            continue
        timings = document.get("timings")
        if isinstance(timings, dict) and isinstance(timings.get("prompt_n"), int):
            cached = timings.get("cache_n") if isinstance(timings.get("cache_n"), int) else 0
            exchange.cached_tokens = cached
            exchange.prompt_tokens = timings["prompt_n"] + cached
            if isinstance(timings.get("predicted_n"), int):
                exchange.output_tokens = timings["predicted_n"]
        if exchange.prompt_tokens is None or not isinstance(timings, dict):
            _read_usage(exchange, document)
        for holder in (document, document.get("delta"), document.get("response")):
            if isinstance(holder, dict) and isinstance(holder.get("toolshim"), dict):
                exchange.toolshim = holder["toolshim"]
        error = document.get("error")
        if isinstance(error, dict) and exchange.error is None:
            exchange.error = str(error.get("message") or error)[:500]
        elif isinstance(error, str) and exchange.error is None:
            exchange.error = error[:500]
        if document.get("type") == "response.failed" and exchange.error is None:
            failed = document.get("response", {}).get("error")
            exchange.error = str(failed)[:500] if failed else "response.failed"


def _read_usage(exchange: Exchange, document: dict[str, Any]) -> None:
    """Prompt and cached tokens from a protocol's own ``usage`` (llama-server's ``/v1/messages``
    and ``/v1/responses`` carry no ``timings``): Anthropic's ``input_tokens`` leave out
    ``cache_read_input_tokens``; the Responses API's include ``cached_tokens``."""
    holders = [document, document.get("message"), document.get("response")]
    for holder in holders:
        usage = holder.get("usage") if isinstance(holder, dict) else None
        if not isinstance(usage, dict):
            continue
        read = usage.get("cache_read_input_tokens")
        given = usage.get("input_tokens")
        if isinstance(read, int) and isinstance(given, int):
            exchange.prompt_tokens, exchange.cached_tokens = given + read, read
            return
        details = usage.get("input_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        if isinstance(given, int) and isinstance(cached, int):
            exchange.prompt_tokens, exchange.cached_tokens = given, cached
            return
