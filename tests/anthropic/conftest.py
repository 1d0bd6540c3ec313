"""The proxy served by a real uvicorn on 127.0.0.1, and the real anthropic SDK talking to it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anthropic
from toolshim.capabilities.registry import Registry
from toolshim.engine import Engine
from toolshim.server import create_app
from toolshim.testing import ServedApp
from toolshim.upstreams.base import Upstream

TIME = {
    "name": "get_time",
    "description": "The local time in a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


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
    async with ServedApp(app) as served:
        url = served.url
        async with anthropic.AsyncAnthropic(
            base_url=url, api_key="sk-ant-test", max_retries=0
        ) as client:
            yield Live(url, client, engine)


def blocks(message: Any) -> list[dict[str, Any]]:
    """A message's content blocks as dicts, ids replaced by their kind (toolu_emulated_ / toolu_)."""
    out = []
    for block in message.content:
        data = block.to_dict() if hasattr(block, "to_dict") else dict(block)
        if "id" in data:
            data["id"] = "toolu_emulated_" if data["id"].startswith("toolu_emulated_") else "toolu_"
        out.append(data)
    return out
