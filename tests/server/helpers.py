"""Shared pieces of the proxy tests: a proxy in-process over httpx.ASGITransport, SSE parsing."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, cast

import httpx
import openai

from toolshim.capabilities.registry import Registry
from toolshim.engine import Engine
from toolshim.server import ProxyApp, create_app
from toolshim.testing import CALL_JSON, WEATHER, read_sse
from toolshim.upstreams.base import Upstream

FENCED_CALL = f"```json\n{CALL_JSON}\n```"


def chat(*, tools: bool = True, stream: bool = False, **extra: Any) -> dict[str, Any]:
    """A chat-completions body asking for the weather in Paris."""
    body: dict[str, Any] = {
        "model": "fake-model",
        "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
        **extra,
    }
    if tools:
        body["tools"] = [WEATHER]
    if stream:
        body["stream"] = True
    return body


@dataclass
class Proxy:
    client: httpx.AsyncClient
    app: ProxyApp
    engine: Engine


@asynccontextmanager
async def proxy(
    upstream: Upstream,
    *,
    registry: Registry | None = None,
    app_options: dict[str, Any] | None = None,
    **engine_options: Any,
) -> AsyncIterator[Proxy]:
    """The proxy app in front of ``upstream``, with an httpx client that calls it in-process."""
    engine = Engine(upstream, registry=registry or Registry(), **engine_options)
    app = create_app(engine, **(app_options or {}))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://proxy") as client:
        yield Proxy(client, app, engine)


def sse_events(text: str) -> list[Any]:
    """The ``data:`` payloads of an SSE body: JSON objects, and the string "[DONE]"."""
    events: list[Any] = []
    for event in read_sse(text):
        assert event.event is None, f"not an SSE data event: {event!r}"
        events.append(event.data if event.data == "[DONE]" else event.json())
    return events


def assemble(events: list[Any]) -> dict[str, Any]:
    """Stream chunks folded into one message, as an OpenAI client would (calls by index)."""
    content = ""
    calls: dict[int, dict[str, Any]] = {}
    finish = None
    meta = None
    usage = None
    for item in events:
        if item == "[DONE]":
            continue
        meta = item.get("toolshim", meta)
        usage = item.get("usage") or usage
        for choice in item.get("choices") or ():
            delta = choice.get("delta") or {}
            content += delta.get("content") or ""
            for tc in delta.get("tool_calls") or ():
                entry = calls.setdefault(tc["index"], {"id": None, "name": "", "arguments": ""})
                entry["id"] = tc.get("id") or entry["id"]
                function = tc.get("function") or {}
                entry["name"] += function.get("name") or ""
                entry["arguments"] += function.get("arguments") or ""
            finish = choice.get("finish_reason") or finish
    return {
        "content": content,
        "tool_calls": [calls[i] for i in sorted(calls)],
        "finish_reason": finish,
        "toolshim": meta,
        "usage": usage,
    }


def metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample in Prometheus text (0 when absent)."""
    label_text = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    pattern = re.escape(name) + (r"\{" + re.escape(label_text) + r"\}" if labels else "")
    match = re.search(rf"^{pattern} ([0-9.e+-]+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


@asynccontextmanager
async def sdk(upstream: Upstream, **engine_options: Any) -> AsyncIterator[openai.AsyncOpenAI]:
    """The real openai SDK talking to the proxy app in-process."""
    app = create_app(Engine(upstream, registry=Registry(), **engine_options))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://proxy/v1") as http:
        # The SDK's client type is httpx2's; it takes an httpx client as well.
        yield openai.AsyncOpenAI(
            base_url="http://proxy/v1",
            api_key="sk-test",
            http_client=cast(Any, http),
            max_retries=0,
        )
