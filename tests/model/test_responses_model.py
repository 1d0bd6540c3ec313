"""The Responses API on the real embedded model, in every mode: ``toolshim serve``'s engine
(over the facts the embedded server reports) behind a real socket, driven by the openai SDK's
``responses.create`` and ``responses.stream``, then a ``function_call_output`` round trip on
``previous_response_id``. Temperature 0."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import openai
import pytest

from toolshim.capabilities.registry import Registry
from toolshim.engine import Engine
from toolshim.local import EmbeddedServer
from toolshim.server import create_app
from toolshim.testing import ServedApp
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


MODES = ["off", "fallback", "force", "auto", "strip"]
QUESTION = "What is the weather in Paris right now?"


@pytest.fixture
def client_for(qwen: EmbeddedServer, tmp_path: Path) -> Iterator[Callable[[str], openai.OpenAI]]:
    """``client_for(mode)``: the proxy as ``toolshim serve --mode MODE`` runs it on the embedded
    model (its measured facts in the registry, the model pinned), on a real port, and an SDK
    client for it."""
    with ExitStack() as stack:

        def factory(mode: str) -> openai.OpenAI:
            registry = Registry.open(tmp_path / f"{mode}.sqlite3")
            stack.callback(registry.close)
            qwen.record_capabilities(registry)
            upstream = OpenAIUpstream(qwen.base_url, key=qwen.key, timeout=300)
            engine = Engine(upstream, registry=registry, mode=mode)
            app = create_app(engine, default_model=qwen.model, pin_model=True)
            base_url = stack.enter_context(ServedApp(app)).base_url
            sdk = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0)
            stack.callback(sdk.close)
            return sdk

        yield factory


def ask(client: openai.OpenAI, stream: bool, **extra: Any) -> Any:
    body: dict[str, Any] = {
        "model": "any",
        "input": QUESTION,
        "tools": TOOLS,
        "temperature": 0,
        "max_output_tokens": 128,
        **extra,
    }
    if not stream:
        return client.responses.create(**body)
    with client.responses.stream(**body) as events:
        types = [event.type for event in events]
        response = events.get_final_response()
    assert types[:2] == ["response.created", "response.in_progress"] and types[-1] in (
        "response.completed",
        "response.incomplete",
    ), types
    return response


def calls_of(response: Any) -> list[tuple[str, dict[str, Any]]]:
    return [
        (item.name, json.loads(item.arguments))
        for item in response.output
        if item.type == "function_call"
    ]


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_on_the_embedded_model_created_and_streamed(
    client_for: Callable[[str], openai.OpenAI], mode: str
) -> None:
    client = client_for(mode)
    created, streamed = ask(client, False), ask(client, True)
    for response in (created, streamed):
        meta = response.model_extra["toolshim"]
        assert meta["mode"] == mode, meta
        calls = calls_of(response)
        if mode == "strip":
            assert calls == [] and response.output_text.strip(), response.output
            continue
        assert response.status == "completed", response.output
        assert len(calls) == 1, response.output
        name, arguments = calls[0]
        assert name == "get_weather" and arguments["city"].lower() == "paris", calls
        # off and fallback: the 0.5B answers native tools with the call written as text in
        # content, which toolshim recovers (native, one call); force and auto emulate
        assert meta["emulated"] is (mode in ("force", "auto")), meta
    # temperature 0: the same answer streamed or not
    assert calls_of(created) == calls_of(streamed)
    if mode == "strip":
        assert created.output_text == streamed.output_text
        return

    (call,) = [item for item in streamed.output if item.type == "function_call"]
    answer = client.responses.create(
        model="any",
        previous_response_id=streamed.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "18°C, sunny"}],
        tools=TOOLS,
        temperature=0,
        max_output_tokens=96,
    )
    assert answer.status == "completed", answer.output
    assert answer.previous_response_id == streamed.id
    warnings = answer.model_extra["toolshim"]["warnings"]
    if mode in ("off", "fallback") and not answer.output_text:
        # a native reply (recovered from content): the 0.5B repeats the call it just made;
        # toolshim says so, and leaves it (as on chat completions)
        assert any(w.startswith("repeats get_weather") for w in warnings), answer.output
        return
    assert "18" in answer.output_text, answer.output
