"""The proxy served by a real uvicorn on 127.0.0.1, and the real anthropic SDK talking to it."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import uvicorn

import anthropic
from toolshim.capabilities.registry import Registry
from toolshim.engine import Engine
from toolshim.server import create_app
from toolshim.upstreams.base import Upstream

WEATHER = {
    "name": "get_weather",
    "description": "Current weather for a city",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
TIME = {
    "name": "get_time",
    "description": "The local time in a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
CALL_JSON = '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}'


@dataclass
class Live:
    url: str
    client: anthropic.AsyncAnthropic
    engine: Engine


@asynccontextmanager
async def live(upstream: Upstream, **engine_options: Any) -> AsyncIterator[Live]:
    """``create_app`` on a real uvicorn server (this event loop) and an SDK client for it."""
    engine = Engine(upstream, registry=Registry(), **engine_options)
    app = create_app(engine)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.01)
        url = f"http://127.0.0.1:{port}"
        async with anthropic.AsyncAnthropic(
            base_url=url, api_key="sk-ant-test", max_retries=0
        ) as client:
            yield Live(url, client, engine)
    finally:
        server.should_exit = True
        await task
        sock.close()


def blocks(message: Any) -> list[dict[str, Any]]:
    """A message's content blocks as dicts, ids replaced by their kind (toolu_emulated_ / toolu_)."""
    out = []
    for block in message.content:
        data = block.to_dict() if hasattr(block, "to_dict") else dict(block)
        if "id" in data:
            data["id"] = "toolu_emulated_" if data["id"].startswith("toolu_emulated_") else "toolu_"
        out.append(data)
    return out
