"""The proxy served for real (uvicorn on 127.0.0.1, in a thread) in front of a scripted upstream,
and the openai SDK pointed at it."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest
import uvicorn

from toolshim.capabilities.registry import Registry
from toolshim.engine import Engine
from toolshim.server import ProxyApp, create_app
from toolshim.upstreams.base import Upstream


@contextmanager
def serve_proxy(app: ProxyApp) -> Iterator[str]:
    """Run ``app`` under uvicorn in a thread; yield its ``/v1`` base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@dataclass
class Live:
    base_url: str
    app: ProxyApp
    client: openai.OpenAI


LiveFactory = Callable[..., Live]


@pytest.fixture
def live(tmp_path: Path) -> Iterator[LiveFactory]:
    """``live(upstream, mode=…)``: the proxy on a real socket and an SDK client for it. The
    registry (and the response store beside it) is a SQLite file in ``tmp_path`` unless
    ``registry=`` says otherwise."""
    with_stack: list[Any] = []

    def factory(upstream: Upstream, *, registry: Registry | None = None, **options: Any) -> Live:
        registry = registry or Registry.open(tmp_path / "capabilities.sqlite3", profiles=False)
        app = create_app(Engine(upstream, registry=registry, **options))
        context = serve_proxy(app)
        base_url = context.__enter__()
        client = openai.OpenAI(base_url=base_url, api_key="sk-test", max_retries=0)
        with_stack.append((context, client, registry))
        return Live(base_url, app, client)

    try:
        yield factory
    finally:
        for context, client, registry in reversed(with_stack):
            client.close()
            context.__exit__(None, None, None)
            registry.close()
