"""The proxy served for real (uvicorn on 127.0.0.1, in a thread) in front of a scripted upstream,
and the openai SDK pointed at it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest

from toolshim.capabilities.registry import Registry
from toolshim.engine import Engine
from toolshim.server import ProxyApp, create_app
from toolshim.testing import ServedApp
from toolshim.upstreams.base import Upstream


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
        context = ServedApp(app)
        base_url = context.__enter__().base_url
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
