"""A client that goes away cancels its upstream request (real uvicorn, real upstream over HTTP)."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from tests.server.helpers import chat, metric
from toolshim.capabilities.registry import Registry
from toolshim.engine import Engine
from toolshim.server import ProxyApp, create_app
from toolshim.testing import ServedApp
from toolshim.testing.server import ScriptedUpstream, serve_fake
from toolshim.upstreams.aiohttp_upstream import AiohttpUpstream


def wait_for(condition: object, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return True
        time.sleep(0.02)
    return False


def client_closed(app: ProxyApp) -> float:
    text = app.metrics.render().decode()
    return metric(text, "toolshim_requests_total", mode="auto", outcome="client_closed")


@pytest.mark.parametrize("stream", [False, True])
def test_a_client_disconnect_cancels_the_upstream_request(stream: bool) -> None:
    slow: dict[str, object] = {"content": "one two three four five six seven eight nine ten"}
    if not stream:
        slow["delay"] = 30
    script = {"replies": [slow, "fast answer"], "piece": 4, "chunk_delay": 0.3 if stream else 0}
    with serve_fake(ScriptedUpstream(script)) as upstream_server:
        engine = Engine(AiohttpUpstream(upstream_server.base_url), registry=Registry())
        app = create_app(engine)
        with ServedApp(app) as served:
            base_url = served.url

            async def leave_early() -> None:
                async with httpx.AsyncClient(base_url=base_url, timeout=0.5) as client:
                    body = chat(tools=False, stream=stream)
                    if stream:
                        async with client.stream("POST", "/v1/chat/completions", json=body) as r:
                            async for _ in r.aiter_bytes():
                                break  # the first event arrived: now hang up
                    else:
                        with pytest.raises(httpx.ReadTimeout):
                            await client.post("/v1/chat/completions", json=body)

            asyncio.run(leave_early())
            assert wait_for(lambda: upstream_server.cancelled == 1), "upstream kept generating"
            assert wait_for(lambda: client_closed(app) == 1)

            async def ask() -> httpx.Response:
                async with httpx.AsyncClient(base_url=base_url, timeout=10) as client:
                    return await client.post("/v1/chat/completions", json=chat(tools=False))

            # The proxy is fine afterwards: the next request is served normally.
            response = asyncio.run(ask())
            assert response.status_code == 200
            assert response.json()["choices"][0]["message"]["content"] == "fast answer"
