"""Shared pieces of the security tests: tool bodies, a recording HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from toolshim.testing import FakeUpstream, FunctionUpstream, Reply, call


def tool_body(parameters: Any, *, name: str = "get_weather", **extra: Any) -> dict[str, Any]:
    """A chat body offering one tool with ``parameters`` as its schema."""
    return {
        "model": "fake-model",
        "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
        "tools": [{"type": "function", "function": {"name": name, "parameters": parameters}}],
        **extra,
    }


def calling_upstream(arguments: dict[str, Any], *, name: str = "get_weather") -> FakeUpstream:
    """A model that calls ``name`` with ``arguments`` every time: natively when it is sent
    ``tools``, else as the json dialect's text (which emulation reads)."""

    def reply(body: dict[str, Any]) -> Reply | str:
        if body.get("tools"):
            return Reply(None, [call(name, arguments)])
        return json.dumps({"tool_calls": [{"name": name, "arguments": arguments}]})

    return FunctionUpstream(reply)


@dataclass
class Recorder:
    """What a :func:`recording_server` was asked for."""

    base_url: str
    paths: list[str] = field(default_factory=list)


@contextmanager
def recording_server(document: Any) -> Iterator[Recorder]:
    """A real HTTP server on 127.0.0.1 that answers every GET with ``document`` (JSON) and
    records the paths it was asked for."""
    payload = json.dumps(document).encode()
    holder: list[Recorder] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            holder[0].paths.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    holder.append(Recorder(f"http://127.0.0.1:{server.server_address[1]}"))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield holder[0]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
