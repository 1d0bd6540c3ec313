"""A small fake model server on 127.0.0.1 for discovery, probe and CLI tests.

It speaks just enough of each server's API: Ollama's ``/api/version``, ``/api/tags`` and
``/api/show``; LM Studio's ``/api/v0/models``; llama-server's ``/props``; and the OpenAI
``/v1/models`` and ``/v1/chat/completions`` every one of them has. Each model says how it
answers a chat request that carries ``tools``.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class FakeModel:
    """One model. ``chat``: tools | reject | text | text-call | slow | missing."""

    name: str
    capabilities: list[str] | None = field(default_factory=lambda: ["completion", "tools"])
    template: str | None = None
    context_length: int | None = 32768
    parameter_size: str = "7.6B"
    chat: str = "tools"
    show: str = "ok"  # ok | error | slow
    listing: dict[str, Any] = field(default_factory=dict)
    """Extra fields for this model's /v1/models (or LM Studio /api/v0/models) entry."""


@dataclass
class FakeServer:
    kind: str  # ollama | lm-studio | llama-server | openai
    models: dict[str, FakeModel]
    base_url: str = ""
    requests: list[tuple[str, str, Any]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    models_status: int = 200

    @property
    def root(self) -> str:
        return self.base_url.removesuffix("/v1")

    def posted(self, path: str) -> list[Any]:
        return [body for method, p, body in self.requests if method == "POST" and p == path]


def _completion(model: str, message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:8]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }


def _handler(server: FakeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return

        def _send(self, status: int, data: Any) -> None:
            payload = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _body(self) -> Any:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            return json.loads(raw) if raw else None

        def do_GET(self) -> None:
            server.requests.append(("GET", self.path, None))
            kind = server.kind
            if self.path == "/api/version" and kind == "ollama":
                return self._send(200, {"version": "0.12.3"})
            if self.path == "/api/tags" and kind == "ollama":
                rows = [
                    {"name": m.name, "model": m.name, "size": 1, "details": {}}
                    for m in server.models.values()
                ]
                return self._send(200, {"models": rows})
            if self.path == "/api/v0/models" and kind == "lm-studio":
                rows = [
                    {"id": m.name, "object": "model", "type": "llm", "arch": "llama", **m.listing}
                    for m in server.models.values()
                ]
                return self._send(200, {"object": "list", "data": rows})
            if self.path == "/props" and kind == "llama-server":
                return self._send(
                    200, {"default_generation_settings": {"n_ctx": 8192}, "total_slots": 1}
                )
            if self.path == "/v1/models":
                if server.models_status != 200:
                    return self._send(
                        server.models_status, {"error": {"message": "invalid api key"}}
                    )
                rows = [
                    {"id": m.name, "object": "model", "owned_by": "fake", **m.listing}
                    for m in server.models.values()
                ]
                return self._send(200, {"object": "list", "data": rows})
            return self._send(404, {"error": "not found"})

        def do_POST(self) -> None:
            body = self._body()
            server.requests.append(("POST", self.path, body))
            if self.path == "/api/show" and server.kind == "ollama":
                model = server.models.get(str(body.get("model") or body.get("name")))
                if model is None:
                    return self._send(404, {"error": "model not found"})
                if model.show == "error":
                    return self._send(500, {"error": "failed to read the model file"})
                if model.show == "slow":
                    server.release.wait(10)
                data: dict[str, Any] = {
                    "details": {"family": "x", "parameter_size": model.parameter_size},
                    "model_info": {"general.architecture": "llama"},
                }
                if model.context_length:
                    data["model_info"]["llama.context_length"] = model.context_length
                if model.capabilities is not None:
                    data["capabilities"] = model.capabilities
                if model.template is not None:
                    data["template"] = model.template
                return self._send(200, data)
            if self.path == "/v1/chat/completions":
                return self._chat(body)
            return self._send(404, {"error": "not found"})

        def _chat(self, body: dict[str, Any]) -> None:
            name = str(body.get("model"))
            model = server.models.get(name)
            if model is None or model.chat == "missing":
                return self._send(
                    404, {"error": {"message": f"model '{name}' not found, try pulling it first"}}
                )
            tools = body.get("tools")
            if model.chat == "slow":
                server.release.wait(10)
            if tools and model.chat == "reject":
                return self._send(
                    400,
                    {
                        "error": {
                            "message": f"registry.ollama.ai/library/{name} does not support tools",
                            "type": "api_error",
                        }
                    },
                )
            if tools and model.chat == "tools":
                call = {
                    "id": "call_1",
                    "type": "function",
                    "function": {
                        "name": tools[0]["function"]["name"],
                        "arguments": json.dumps({"timezone": "Europe/Paris"}),
                    },
                }
                message = {"role": "assistant", "content": None, "tool_calls": [call]}
                return self._send(200, _completion(name, message, "tool_calls"))
            if tools and model.chat == "text-call":
                text = (
                    '```json\n{"name": "get_current_time", '
                    '"arguments": {"timezone": "Europe/Paris"}}\n```'
                )
                message = {"role": "assistant", "content": text}
                return self._send(200, _completion(name, message, "stop"))
            message = {"role": "assistant", "content": "It is noon in Paris, I think."}
            return self._send(200, _completion(name, message, "stop"))

    return Handler


@contextmanager
def fake_server(kind: str, *models: FakeModel) -> Iterator[FakeServer]:
    """Serve ``models`` as a ``kind`` server on 127.0.0.1 (a free port) for the block."""
    state = FakeServer(kind, {m.name: m for m in models})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    httpd.daemon_threads = True
    state.base_url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    thread = threading.Thread(
        target=httpd.serve_forever, args=(0.05,), name="fake-model-server", daemon=True
    )
    thread.start()
    try:
        yield state
    finally:
        state.release.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def closed_port_url() -> str:
    """A base URL on 127.0.0.1 where nothing listens."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"
