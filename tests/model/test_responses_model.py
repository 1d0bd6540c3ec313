"""The Responses API on the real embedded model: ``toolshim serve``'s engine (auto over the
facts the embedded server reports) behind a real socket, driven by the openai SDK."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from tests.responses.conftest import serve_proxy
from toolshim.capabilities.facts import Source
from toolshim.capabilities.registry import Registry
from toolshim.engine import Engine
from toolshim.local import EmbeddedServer
from toolshim.server import create_app
from toolshim.upstreams.openai_http import OpenAIUpstream

pytestmark = pytest.mark.model

TOOLS: list[Any] = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city"}},
            "required": ["city"],
        },
        "strict": False,
    },
    {
        "type": "function",
        "name": "get_time",
        "description": "Current local time in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
        "strict": False,
    },
]


@pytest.fixture
def client(qwen: EmbeddedServer) -> Iterator[openai.OpenAI]:
    upstream = OpenAIUpstream(qwen.base_url)
    registry = Registry(None)
    for name, value in qwen.capabilities().items():
        registry.learn(upstream.key, qwen.model, name, value, Source.UPSTREAM)
    with serve_proxy(create_app(Engine(upstream, registry=registry))) as base_url:
        sdk = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0)
        try:
            yield sdk
        finally:
            sdk.close()


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
def test_the_embedded_model_calls_a_tool_through_the_responses_api(
    client: openai.OpenAI, qwen: EmbeddedServer, stream: bool
) -> None:
    body: dict[str, Any] = {
        "model": qwen.model,
        "input": "What is the weather in Paris right now?",
        "tools": TOOLS,
        "temperature": 0,
        "max_output_tokens": 128,
    }
    if stream:
        with client.responses.stream(**body) as events:
            for _ in events:
                pass
            response = events.get_final_response()
    else:
        response = client.responses.create(**body)
    calls = [item for item in response.output if item.type == "function_call"]
    assert len(calls) == 1, response.output
    assert calls[0].name == "get_weather"
    assert json.loads(calls[0].arguments)["city"].lower() == "paris"
    assert calls[0].call_id.startswith("emulated_")
    assert response.model_extra["toolshim"]["emulated"] is True

    answer = client.responses.create(
        model=qwen.model,
        previous_response_id=response.id,
        input=[
            {"type": "function_call_output", "call_id": calls[0].call_id, "output": "18°C, sunny"}
        ],
        tools=TOOLS,
        temperature=0,
        max_output_tokens=96,
    )
    assert answer.status == "completed"
    assert answer.output_text.strip() or any(i.type == "function_call" for i in answer.output)
