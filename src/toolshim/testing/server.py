"""A scripted upstream served over real HTTP on 127.0.0.1, in a thread or as its own process.

In a test, wrap any upstream (a :class:`~toolshim.testing.FakeUpstream`, a
:class:`~toolshim.testing.FunctionUpstream`, a :class:`ScriptedUpstream`)::

    with serve_fake(FakeUpstream(["Hello!"], tools="reject")) as server:
        client = OpenAI(base_url=server.base_url, api_key="x")

As a process (end-to-end tests, the benchmark)::

    python -m toolshim.testing.server --port 0 --script script.json
    # prints: toolshim fake upstream listening on http://127.0.0.1:PORT/v1

A script is JSON: ``{"tools": "native" | "reject" | "ignore", "rejection": "ollama",
"models": [...], "replies": [...], "repeat": false, "record": true, "delay": 0,
"chunk_delay": 0, "piece": 7}``. A reply is a string (the content), an object
``{"content", "tool_calls": [{"name", "arguments"}], "finish_reason", "delay"}``, a whole
``chat.completion`` (with ``choices``), or ``{"error": {"status", "message"}}``.
``repeat`` cycles the replies forever; ``record: false`` keeps no history (benchmarks).

Control endpoints (not part of any real API): ``POST /_toolshim/script`` replaces the
script, ``GET /_toolshim/history`` returns what was received (``requests``, ``headers``) and
how many requests were abandoned by their client (``cancelled``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import socket
import sys
import threading
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

from toolshim.errors import ToolshimError, UpstreamStatusError
from toolshim.testing import REJECTION_MESSAGES, CompletionUpstream, Reply, rejection_error
from toolshim.upstreams.chat_completions import ChatCompletionsUpstream
from toolshim.wire.openai_chat import error_body

__all__ = [
    "RunningServer",
    "Script",
    "ScriptedUpstream",
    "main",
    "serve_app",
    "serve_fake",
    "upstream_app",
]

TOOLS_BEHAVIOURS = ("native", "reject", "ignore")


@dataclass
class Script:
    """What a :class:`ScriptedUpstream` answers (see the module docstring for the JSON form)."""

    replies: list[Any] = field(default_factory=list)
    tools: str = "native"
    rejection: str = "ollama"
    models: list[str] = field(default_factory=lambda: ["fake-model"])
    repeat: bool = False
    record: bool = True
    delay: float = 0.0
    chunk_delay: float = 0.0
    piece: int = 7

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Script:
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown script field(s) {unknown}; known: {sorted(known)}")
        script = cls(**dict(data))
        if script.tools not in TOOLS_BEHAVIOURS:
            raise ValueError(f"tools must be one of {TOOLS_BEHAVIOURS}, not {script.tools!r}")
        if script.rejection not in REJECTION_MESSAGES:
            raise ValueError(
                f"unknown rejection {script.rejection!r}; known: {sorted(REJECTION_MESSAGES)}"
            )
        for i, reply in enumerate(script.replies):
            if not isinstance(reply, str | Mapping):
                raise ValueError(f"replies[{i}] must be a string or an object")
        return script


class ScriptedUpstream(CompletionUpstream):
    """An :class:`~toolshim.upstreams.base.Upstream` that plays a :class:`Script`."""

    def __init__(self, script: Script | Mapping[str, Any] | None = None) -> None:
        self.script = script if isinstance(script, Script) else Script.from_dict(script or {})
        self._position = 0
        self.history: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []

    @property
    def key(self) -> str:
        return "scripted://upstream"

    def _next(self, body: Mapping[str, Any], headers: Mapping[str, str] | None) -> Any:
        script = self.script
        if script.record:
            self.history.append(dict(body))
            self.headers.append(dict(headers or {}))
        if body.get("tools") and script.tools == "reject":
            raise rejection_error(script.rejection, str(body.get("model") or script.models[0]))
        if not script.replies:
            raise UpstreamStatusError("the scripted upstream has no replies", status=500)
        if self._position >= len(script.replies):
            if not script.repeat:
                raise UpstreamStatusError(
                    f"the scripted upstream has no reply left for request #{self._position + 1}",
                    status=500,
                )
            self._position = 0
        reply = script.replies[self._position]
        self._position += 1
        return reply

    async def _produce(
        self, body: Mapping[str, Any], headers: Mapping[str, str] | None
    ) -> dict[str, Any]:
        reply = self._next(body, headers)
        model = str(body.get("model") or self.script.models[0])
        delay = self.script.delay
        if isinstance(reply, Mapping) and "delay" in reply:
            delay = float(reply["delay"])
        if delay:
            await asyncio.sleep(delay)
        return _completion(
            reply, model, native=self.script.tools == "native" and bool(body.get("tools"))
        )

    def _pacing(self) -> tuple[int, float]:
        return self.script.piece, self.script.chunk_delay

    async def list_models(self, *, headers: Mapping[str, str] | None = None) -> dict[str, Any]:
        return {
            "object": "list",
            "data": [
                {"id": m, "object": "model", "owned_by": "toolshim-fake"}
                for m in self.script.models
            ],
        }

    async def aclose(self) -> None:
        return None


def _completion(reply: Any, model: str, *, native: bool) -> dict[str, Any]:
    if isinstance(reply, str):
        return Reply(reply).completion(model)
    if "error" in reply:
        error = reply["error"]
        message = (
            str(error.get("message", "scripted error"))
            if isinstance(error, Mapping)
            else str(error)
        )
        status = int(error.get("status", 500)) if isinstance(error, Mapping) else 500
        raise UpstreamStatusError(message, status=status, body={"error": {"message": message}})
    if "choices" in reply:
        return dict(reply)
    calls = [
        {
            "id": call.get("id") or f"call_{uuid.uuid4().hex[:12]}",
            "type": "function",
            "function": {
                "name": call["name"],
                "arguments": call["arguments"]
                if isinstance(call.get("arguments"), str)
                else json.dumps(call.get("arguments") or {}),
            },
        }
        for call in reply.get("tool_calls") or ()
    ]
    if calls and not native:
        raise UpstreamStatusError(
            "scripted native tool calls for a request without tools (or with tools='ignore')",
            status=500,
        )
    return Reply(
        reply.get("content", ""), calls, reply.get("finish_reason"), reply.get("usage")
    ).completion(model)


# -- the HTTP side ------------------------------------------------------------------------------

_UPSTREAM: web.AppKey[list[ChatCompletionsUpstream]] = web.AppKey("upstream", list)
_CANCELLED: web.AppKey[list[int]] = web.AppKey("cancelled", list)


def upstream_app(upstream: ChatCompletionsUpstream) -> web.Application:
    """An aiohttp app that serves ``upstream`` as an OpenAI-compatible server."""
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app[_UPSTREAM] = [upstream]
    app[_CANCELLED] = [0]
    for prefix in ("/v1", ""):
        app.router.add_post(f"{prefix}/chat/completions", _chat)
        app.router.add_get(f"{prefix}/models", _models)
    app.router.add_post("/_toolshim/script", _set_script)
    app.router.add_get("/_toolshim/history", _history)
    return app


def _error(exc: BaseException) -> web.Response:
    if isinstance(exc, UpstreamStatusError) and isinstance(exc.body, Mapping):
        return _json(exc.body, exc.status)
    status, body = error_body(exc)
    if not isinstance(exc, ToolshimError):
        body["error"]["message"] = f"{type(exc).__name__}: {exc}"
    return _json(body, status)


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type="application/json")


async def _chat(request: web.Request) -> web.StreamResponse:
    upstream = request.app[_UPSTREAM][0]
    try:
        body = orjson.loads(await request.read())
    except orjson.JSONDecodeError as exc:
        return _json({"error": {"message": f"invalid JSON: {exc}"}}, 400)
    headers = {str(name): value for name, value in request.headers.items()}
    try:
        if not body.get("stream"):
            try:
                return _json(await upstream.complete_body(body, headers=headers))
            except Exception as exc:
                return _error(exc)
        return await _stream(request, upstream, body, headers)
    except asyncio.CancelledError:
        request.app[_CANCELLED][0] += 1
        raise


async def _stream(
    request: web.Request,
    upstream: ChatCompletionsUpstream,
    body: dict[str, Any],
    headers: dict[str, str],
) -> web.StreamResponse:
    chunks = upstream.stream_body(body, headers=headers)
    try:
        first = await chunks.__anext__()
    except StopAsyncIteration:
        first = None
    except Exception as exc:
        return _error(exc)
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await response.prepare(request)
    try:
        if first is not None:
            await response.write(b"data: " + orjson.dumps(first) + b"\n\n")
            async for chunk in chunks:
                await response.write(b"data: " + orjson.dumps(chunk) + b"\n\n")
    except Exception as exc:
        await response.write(b"data: " + orjson.dumps(error_body(exc)[1]) + b"\n\n")
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


async def _models(request: web.Request) -> web.Response:
    try:
        return _json(await request.app[_UPSTREAM][0].list_models())
    except Exception as exc:
        return _error(exc)


async def _set_script(request: web.Request) -> web.Response:
    try:
        script = Script.from_dict(orjson.loads(await request.read()))
    except (ValueError, TypeError) as exc:
        return _json({"error": {"message": f"bad script: {exc}"}}, 400)
    request.app[_UPSTREAM][0] = ScriptedUpstream(script)
    request.app[_CANCELLED][0] = 0
    return _json({"ok": True})


async def _history(request: web.Request) -> web.Response:
    upstream = request.app[_UPSTREAM][0]
    return _json(
        {
            "requests": getattr(upstream, "history", []),
            "headers": getattr(upstream, "headers", []),
            "cancelled": request.app[_CANCELLED][0],
        }
    )


# -- running it ---------------------------------------------------------------------------------


@dataclass
class RunningServer:
    """A fake upstream that is listening: ``base_url`` ends in ``/v1``."""

    host: str
    port: int
    app: web.Application

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def cancelled(self) -> int:
        """Requests whose client went away before the answer was complete."""
        return self.app[_CANCELLED][0]


def _listen(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(1024)
    sock.setblocking(False)
    return sock


async def _start(app: web.Application, sock: socket.socket) -> web.AppRunner:
    runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
    await runner.setup()
    await web.SockSite(runner, sock).start()
    return runner


@contextlib.contextmanager
def serve_fake(
    upstream: ChatCompletionsUpstream, *, host: str = "127.0.0.1", port: int = 0
) -> Iterator[RunningServer]:
    """Serve ``upstream`` over HTTP from a background thread for the duration of the block."""
    with serve_app(upstream_app(upstream), host=host, port=port) as server:
        yield server


@contextlib.contextmanager
def serve_app(
    app: web.Application, *, host: str = "127.0.0.1", port: int = 0
) -> Iterator[RunningServer]:
    """Serve any aiohttp ``app`` from a background thread (its own event loop) for the block."""
    sock = _listen(host, port)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    state: dict[str, Any] = {}

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            state["runner"] = loop.run_until_complete(_start(app, sock))
        except BaseException as exc:  # reported to the caller below
            state["error"] = exc
            ready.set()
            return
        ready.set()
        loop.run_forever()
        loop.run_until_complete(state["runner"].cleanup())

    thread = threading.Thread(target=run, name="toolshim-fake-upstream", daemon=True)
    thread.start()
    ready.wait()
    try:
        if "error" in state:
            raise state["error"]
        yield RunningServer(host, sock.getsockname()[1], app)
    finally:
        if thread.is_alive():
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=10)
        if not loop.is_running():  # still running: a request in flight at an interrupt (the
            loop.close()  # thread is a daemon; closing a running loop raises over the cause)
        sock.close()


def _new_loop() -> asyncio.AbstractEventLoop:
    """A uvloop loop where installed (a fast upstream makes the benchmark honest)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def main(argv: list[str] | None = None) -> None:
    """``python -m toolshim.testing.server``: a scripted upstream in its own process."""
    parser = argparse.ArgumentParser(
        prog="python -m toolshim.testing.server",
        description="A scripted OpenAI-compatible upstream for tests and benchmarks.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (printed)")
    parser.add_argument("--script", type=Path, help="a JSON script (see the module docstring)")
    parser.add_argument("--reply", action="append", default=[], help="a text reply (repeatable)")
    parser.add_argument("--tools", choices=TOOLS_BEHAVIOURS, help="how requests with tools fare")
    parser.add_argument("--repeat", action="store_true", help="cycle the replies forever")
    args = parser.parse_args(argv)
    try:
        data: dict[str, Any] = json.loads(args.script.read_text()) if args.script else {}
        if args.reply:
            data["replies"] = list(data.get("replies", [])) + args.reply
        if args.tools:
            data["tools"] = args.tools
        if args.repeat:
            data["repeat"] = True
        upstream = ScriptedUpstream(Script.from_dict(data))
        sock = _listen(args.host, args.port)
    except (OSError, ValueError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    port = sock.getsockname()[1]
    loop = _new_loop()
    asyncio.set_event_loop(loop)
    runner = loop.run_until_complete(_start(upstream_app(upstream), sock))
    loop.add_signal_handler(signal.SIGTERM, loop.stop)
    print(f"toolshim fake upstream listening on http://{args.host}:{port}/v1", flush=True)
    try:
        loop.run_forever()
    except KeyboardInterrupt:
        pass
    finally:
        loop.run_until_complete(runner.cleanup())
        loop.close()


if __name__ == "__main__":
    main()
