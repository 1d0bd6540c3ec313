"""The real model through toolshim: protocol behaviour (shapes, rescue, re-asks, streaming,
structured output), not the model's wisdom. Temperature 0 and small ``max_tokens`` throughout.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx
import jsonschema
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from toolshim.capabilities.facts import Source, Support
from toolshim.capabilities.registry import Registry
from toolshim.engine import Engine
from toolshim.engine.emulate import emulation_request
from toolshim.local import EmbeddedServer
from toolshim.upstreams.chat_completions import ChatCompletionsUpstream
from toolshim.upstreams.openai_http import OpenAIUpstream
from toolshim.wire.openai_chat import chunk_to_dict, completion_to_dict

pytestmark = pytest.mark.model

WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string", "description": "the city name"}},
    "required": ["city"],
}
TIME_SCHEMA = {
    "type": "object",
    "properties": {"timezone": {"type": "string", "description": "an IANA timezone"}},
    "required": ["timezone"],
}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather for a city",
            "parameters": WEATHER_SCHEMA,
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "Get the current local time in an IANA timezone",
            "parameters": TIME_SCHEMA,
        },
    },
]
SCHEMAS = {"get_weather": WEATHER_SCHEMA, "get_time": TIME_SCHEMA}
NEEDS_A_TOOL = "What is the weather in Paris right now?"
NEEDS_NO_TOOL = "What is 2+2? Answer with just the number."


def request(server: EmbeddedServer, question: str, **extra: Any) -> dict[str, Any]:
    return {
        "model": server.model,
        "messages": [{"role": "user", "content": question}],
        "tools": TOOLS,
        "temperature": 0,
        "max_tokens": 80,
        **extra,
    }


def assert_valid_call(call: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """An OpenAI tool call to an offered tool whose arguments satisfy the tool's schema."""
    assert call["type"] == "function"
    assert call["id"]
    name = call["function"]["name"]
    assert name in SCHEMAS, f"{name!r} was not offered"
    arguments = json.loads(call["function"]["arguments"])
    jsonschema.validate(arguments, SCHEMAS[name])
    return name, arguments


class Recording(ChatCompletionsUpstream):
    """The real upstream, recording the bodies it is sent; ``first_reply`` replaces its first
    answer (to force a re-ask without relying on the model to err)."""

    def __init__(self, inner: OpenAIUpstream, first_reply: str | None = None) -> None:
        self.inner = inner
        self.first_reply = first_reply
        self.bodies: list[dict[str, Any]] = []

    @property
    def key(self) -> str:
        return self.inner.key

    async def complete_body(
        self, body: Mapping[str, Any], *, headers: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        self.bodies.append(json.loads(json.dumps(body)))
        if self.first_reply is not None and len(self.bodies) == 1:
            message = {"role": "assistant", "content": self.first_reply}
            return {
                "id": "chatcmpl-replaced",
                "object": "chat.completion",
                "created": 0,
                "model": str(body["model"]),
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            }
        return await self.inner.complete_body(body, headers=headers)

    def stream_body(
        self, body: Mapping[str, Any], *, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        self.bodies.append(json.loads(json.dumps(body)))
        return self.inner.stream_body(body, headers=headers)

    async def list_models(self, *, headers: Mapping[str, str] | None = None) -> dict[str, Any]:
        return await self.inner.list_models(headers=headers)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def _complete(engine: Engine, body: dict[str, Any]) -> dict[str, Any]:
    try:
        completion = await engine.acomplete(body)
    finally:
        await engine.aclose()
    data = completion_to_dict(completion)
    ChatCompletion.model_validate(data)  # the openai SDK reads it
    return data


async def _stream(engine: Engine, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The streamed turn's chunks as written to the wire, each read by the openai SDK."""
    chunks: list[dict[str, Any]] = []
    try:
        async for chunk in engine.astream({**body, "stream": True}):
            chunks.append(chunk_to_dict(chunk, id="chatcmpl-test", model=body["model"], created=0))
    finally:
        await engine.aclose()
    for data in chunks:
        ChatCompletionChunk.model_validate(data)
    return chunks


# -- the embedded server itself -------------------------------------------------------------


def test_server_reports_its_model_and_measured_facts(qwen: EmbeddedServer) -> None:
    listing = httpx.get(f"{qwen.base_url}/models").json()
    assert [m["id"] for m in listing["data"]] == [qwen.model] == ["qwen2.5-coder-0.5b-instruct"]
    assert "<tool_call>" in qwen.props["chat_template"]  # Qwen's own template, via jinja
    assert qwen.capabilities() == {
        "native_tools": "no",
        "tool_choice": "no",
        "structured_output": "yes",
        "prefill": "yes",
        "parallel_calls": "unknown",
        "dialect": "hermes",
        "context_window": "4096",
    }


def test_a_request_without_temperature_is_answered_greedily(qwen: EmbeddedServer) -> None:
    """The embedded server samples at 0 when the caller sends no temperature (llama.cpp's
    own default, 0.8, gave the chat's 0.5B wrong answers after right calls); a caller's
    own temperature still wins, which the sampled replies show. ``cache_prompt: false``:
    a prompt read partly from llama.cpp's cache is computed in other batches, which can flip a
    near-tie token even at temperature 0 (seen once in CI: "open area of water" against
    "unforgiving landscape")."""
    assert qwen.props["default_generation_settings"]["params"]["temperature"] == 0.0
    body = {
        "model": qwen.model,
        "messages": [{"role": "user", "content": "Write one sentence about the sea."}],
        "max_tokens": 24,
        "cache_prompt": False,
    }

    def replies(**extra: Any) -> set[str]:
        return {
            httpx.post(
                f"{qwen.base_url}/chat/completions", json={**body, **extra}, timeout=300
            ).json()["choices"][0]["message"]["content"]
            for _ in range(3)
        }

    assert len(replies()) == 1
    assert len(replies(temperature=1.5)) > 1


def test_native_tools_come_back_as_text_in_content(qwen: EmbeddedServer) -> None:
    """Why native_tools is "no": llama.cpp accepts ``tools`` but returns no ``tool_calls``;
    the model writes the call as fenced JSON in ``content``. If a llama.cpp update starts
    parsing these calls, this test fails and capabilities() must change."""
    body = request(qwen, NEEDS_A_TOOL)
    reply = httpx.post(f"{qwen.base_url}/chat/completions", json=body, timeout=300).json()
    message = reply["choices"][0]["message"]
    assert not message.get("tool_calls")
    assert '"get_weather"' in message["content"]


def test_json_schema_response_format_is_enforced(qwen: EmbeddedServer) -> None:
    """(f) llama.cpp constrains the output to the schema, even one the prompt never mentions."""
    schema = {
        "type": "object",
        "properties": {
            "verdict": {"enum": ["alpha", "beta"]},
            "count": {"type": "integer", "minimum": 0, "maximum": 9},
        },
        "required": ["verdict", "count"],
        "additionalProperties": False,
    }
    body = {
        "model": qwen.model,
        "messages": [{"role": "user", "content": "Write a haiku about the sea."}],
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "verdict", "schema": schema, "strict": True},
        },
        "temperature": 0,
        "max_tokens": 40,
    }
    reply = httpx.post(f"{qwen.base_url}/chat/completions", json=body, timeout=300).json()
    jsonschema.validate(json.loads(reply["choices"][0]["message"]["content"]), schema)


# -- through the engine ---------------------------------------------------------------------

DIALECTS = ["hermes", "json"]


def learned_registry(server: EmbeddedServer, key: str) -> Registry:
    """A registry holding what the embedded server reports, as ``toolshim serve`` records it."""
    registry = Registry(None)
    for name, value in server.capabilities().items():
        registry.learn(key, server.model, name, value, Source.UPSTREAM)
    return registry


def product_engine(server: EmbeddedServer, upstream: Any = None, **options: Any) -> Engine:
    """``toolshim serve``'s engine on the embedded model: auto mode over the learned facts."""
    upstream = upstream or OpenAIUpstream(server.base_url)
    return Engine(upstream, registry=learned_registry(server, upstream.key), **options)


def assert_one_emulated_call(
    data: dict[str, Any], continuations: int = 0
) -> tuple[str, dict[str, Any]]:
    """``continuations``: the requests that asked for more calls by continuing the reply."""
    choice = data["choices"][0]
    assert choice["finish_reason"] == "tool_calls", choice["message"]
    assert choice["message"]["content"] is None
    [call] = choice["message"]["tool_calls"]
    assert call["id"].startswith("emulated_")
    meta = data["toolshim"]
    assert meta["emulated"] is True
    assert "tool calls emulated" in meta["warnings"]
    assert meta["llm_calls"] == 1 + meta["reasks"] + continuations
    return assert_valid_call(call)


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_force_mode_returns_a_valid_openai_tool_call(
    qwen: EmbeddedServer, dialect: str
) -> None:
    """(a) two tools, a question that needs one: an OpenAI tool call to an offered tool."""
    engine = Engine(
        OpenAIUpstream(qwen.base_url), mode="force", dialect=dialect, registry=":memory:"
    )
    data = await _complete(engine, request(qwen, NEEDS_A_TOOL))
    assert_one_emulated_call(data)
    assert data["toolshim"]["dialect"] == dialect


async def test_auto_mode_on_the_learned_facts_emulates_with_the_measured_dialect(
    qwen: EmbeddedServer,
) -> None:
    """What ``toolshim serve`` does with the embedded model: native_tools=no → emulate."""
    upstream = Recording(OpenAIUpstream(qwen.base_url))
    data = await _complete(product_engine(qwen, upstream), request(qwen, NEEDS_A_TOOL))
    # one city asked for, nothing more in the question: the reply is not continued
    assert_one_emulated_call(data, continuations=0)
    assert all(b["messages"][-1]["role"] == "user" for b in upstream.bodies)
    assert (data["toolshim"]["mode"], data["toolshim"]["dialect"]) == ("auto", "hermes")


@pytest.mark.parametrize("mode", ["auto", "off"])
async def test_calls_written_in_content_are_recovered(qwen: EmbeddedServer, mode: str) -> None:
    """(b) native tools to a model toolshim knows nothing about: the model writes the call
    as text in content; toolshim returns it as a tool call, in one LLM call."""
    engine = Engine(OpenAIUpstream(qwen.base_url), mode=mode, registry=":memory:")
    data = await _complete(engine, request(qwen, NEEDS_A_TOOL))
    choice = data["choices"][0]
    assert choice["finish_reason"] == "tool_calls", choice["message"]
    assert choice["message"]["content"] is None
    [call] = choice["message"]["tool_calls"]
    assert assert_valid_call(call) == ("get_weather", {"city": "Paris"})
    meta = data["toolshim"]
    assert meta["warnings"] == ["tool calls recovered from content"]
    assert (meta["emulated"], meta["llm_calls"], meta["reasks"]) == (False, 1, 0)


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_streamed_emulated_call_reassembles(qwen: EmbeddedServer, dialect: str) -> None:
    """(c) tool_calls deltas: id, type and name first, then arguments; metadata last."""
    engine = Engine(
        OpenAIUpstream(qwen.base_url), mode="force", dialect=dialect, registry=":memory:"
    )
    body = request(qwen, NEEDS_A_TOOL, stream=True, stream_options={"include_usage": True})
    chunks = await _stream(engine, body)  # the openai SDK reads every chunk
    text, calls = reassemble(chunks)
    assert len(calls) == 1, (text, chunks)
    assert_valid_call(calls[0])
    assert text == "", f"text streamed beside a tool call: {text!r}"
    finish = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert [f for f in finish if f] == ["tool_calls"]
    assert all("toolshim" not in c for c in chunks[:-1])
    meta = chunks[-1]["toolshim"]
    assert (meta["emulated"], meta["dialect"]) == (True, dialect)
    assert chunks[-1]["usage"]["completion_tokens"] > 0


def reassemble(chunks: list[dict[str, Any]]) -> tuple[str, dict[int, dict[str, Any]]]:
    """Put streamed deltas back together the way OpenAI clients do (and check their order)."""
    calls: dict[int, dict[str, Any]] = {}
    text = ""
    for chunk in chunks:
        for choice in chunk["choices"]:
            text += choice["delta"].get("content") or ""
            for delta in choice["delta"].get("tool_calls") or []:
                function = delta["function"]
                if delta["index"] not in calls:
                    assert delta.get("id") and delta.get("type") == "function", delta
                    assert function.get("name"), delta
                    calls[delta["index"]] = {
                        "id": delta["id"],
                        "type": "function",
                        "function": {"name": function["name"], "arguments": ""},
                    }
                else:
                    assert "name" not in function, delta
                calls[delta["index"]]["function"]["arguments"] += function.get("arguments", "")
    return text, calls


async def test_a_call_to_a_missing_tool_is_corrected_by_a_reask(qwen: EmbeddedServer) -> None:
    """(d) the first reply calls a tool that does not exist; the real model is re-asked with
    the correction and answers with valid calls (this model tends to add a second call
    after a correction, so parallel calls stay allowed)."""
    upstream = Recording(
        OpenAIUpstream(qwen.base_url),
        first_reply='<tool_call>\n{"name": "get_wether", "arguments": {"city": "Paris"}}\n</tool_call>',
    )
    body = request(qwen, NEEDS_A_TOOL, tool_choice="required")
    data = await _complete(product_engine(qwen, upstream), body)
    rejected, correction = upstream.bodies[1]["messages"][-2:]
    assert (rejected["role"], rejected["content"]) == ("assistant", upstream.first_reply)
    assert correction["role"] == "user"
    assert "'get_wether'" in correction["content"]
    assert "'get_weather'" in correction["content"]
    meta = data["toolshim"]
    assert meta["reasks"] >= 1
    continued = [b for b in upstream.bodies if b["messages"][-1]["role"] == "assistant"]
    assert meta["llm_calls"] == len(upstream.bodies) == 1 + meta["reasks"] + len(continued)
    choice = data["choices"][0]
    assert choice["finish_reason"] == "tool_calls", choice["message"]
    assert choice["message"]["tool_calls"]
    for call in choice["message"]["tool_calls"]:
        assert call["id"].startswith("emulated_")
        assert_valid_call(call)


@pytest.mark.parametrize("stream", [False, True])
async def test_two_cities_asked_for_get_two_calls_by_continuing_the_reply(
    qwen: EmbeddedServer, stream: bool
) -> None:
    """The 0.5B writes one ``<tool_call>`` block for two cities; handed its reply back with
    the opening of another block, it writes the second city's call, and the third
    continuation (a repeat) is dropped."""
    upstream = Recording(OpenAIUpstream(qwen.base_url))
    engine = product_engine(qwen, upstream)
    body = request(qwen, "What is the weather in Paris and in London right now?", max_tokens=120)
    if stream:
        chunks = await _stream(engine, body)
        text, streamed = reassemble(chunks)
        assert text == ""
        calls = [streamed[i] for i in sorted(streamed)]
    else:
        data = await _complete(engine, body)
        calls = data["choices"][0]["message"]["tool_calls"]
    cities = [assert_valid_call(call)[1]["city"] for call in calls]
    assert cities == ["Paris", "London"]
    assert upstream.bodies[1]["messages"][-1]["role"] == "assistant"


@pytest.mark.parametrize("mode", ["force", "auto"])
async def test_a_question_without_tool_need_gets_a_text_answer(
    qwen: EmbeddedServer, mode: str
) -> None:
    """(e)"""
    engine = product_engine(qwen, mode=mode)
    data = await _complete(engine, request(qwen, NEEDS_NO_TOOL, max_tokens=20))
    choice = data["choices"][0]
    assert choice["finish_reason"] == "stop"
    assert not choice["message"].get("tool_calls")
    assert isinstance(choice["message"]["content"], str) and choice["message"]["content"].strip()
    assert data["toolshim"]["emulated"] is True
    assert data["toolshim"]["llm_calls"] == 1


@pytest.mark.parametrize(
    ("dialect", "strategy"),
    [("hermes", "single"), ("hermes", "decision"), ("json", "single"), ("json", "decision")],
)
async def test_constrained_emulation_with_the_registry_fact(
    qwen: EmbeddedServer, dialect: str, strategy: str
) -> None:
    """Where the registry says structured output works, json emulation sends a json_schema
    that llama.cpp enforces, and the constrained reply parses into a valid call. Constraining
    is the json dialect's: hermes (whose calls sit in tags) emulates unconstrained, and still
    returns a valid call."""
    upstream = Recording(OpenAIUpstream(qwen.base_url))
    engine = product_engine(qwen, upstream, dialect=dialect, strategy=strategy)
    body = request(qwen, NEEDS_A_TOOL, tool_choice="required")
    constrained = dialect == "json"
    assert ("response_format" in emulation_request(engine.turn(body)).params) is constrained
    data = await _complete(engine, body)
    if constrained:
        assert upstream.bodies[0]["response_format"]["type"] == "json_schema"
    else:
        assert "response_format" not in upstream.bodies[0]
    assert "tools" not in upstream.bodies[0]
    choice = data["choices"][0]
    assert choice["finish_reason"] == "tool_calls", choice["message"]
    for call in choice["message"]["tool_calls"]:
        assert_valid_call(call)
    assert data["toolshim"]["emulated"] is True


async def test_a_server_without_jinja_rejects_tools_and_auto_learns(
    qwen_without_jinja: EmbeddedServer,
) -> None:
    """llama-server without --jinja: the 500 is matched, learned, and the turn emulated."""
    server = qwen_without_jinja
    assert server.capabilities()["native_tools"] == "no"
    body = request(server, NEEDS_A_TOOL, max_tokens=40)
    async with httpx.AsyncClient(timeout=300) as client:
        raw = await client.post(f"{server.base_url}/chat/completions", json=body)
    assert raw.status_code == 500
    assert raw.json()["error"]["message"] == "tools param requires --jinja flag"

    registry = Registry(None)
    upstream = OpenAIUpstream(server.base_url)
    data = await _complete(Engine(upstream, mode="auto", registry=registry), body)
    meta = data["toolshim"]
    assert meta["emulated"] is True
    assert meta["llm_calls"] >= 2
    assert "upstream rejected tools (tools param requires --jinja flag)" in meta["warnings"]
    fact = registry.fact(upstream.key, server.model, "native_tools")
    assert fact is not None
    assert (fact.support, fact.source) == (Support.NO, Source.RUNTIME_ERROR)
    assert data["choices"][0]["finish_reason"] in ("tool_calls", "stop", "length")


SENTIMENT = {  # BFCL's irrelevance_119, as the eval sends it
    "type": "function",
    "function": {
        "name": "sentiment_analysis",
        "description": "Perform sentiment analysis on a given text. Note that the provided "
        "function is in Python 3 syntax.",
        "parameters": {
            "type": "object",
            "properties": {
                "text": {"type": "string", "description": "The text to be analyzed."},
                "model": {
                    "type": "string",
                    "description": "The model to be used for sentiment analysis.",
                },
                "language": {
                    "type": "string",
                    "description": "The language of the text. Default is English.",
                },
            },
            "required": ["text", "model"],
        },
    },
}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_call_the_model_opened_unsure_of_is_answered_without_tools(
    qwen: EmbeddedServer, stream: bool
) -> None:
    """BFCL's ``irrelevance_119``: offered only ``sentiment_analysis`` and asked for a quote,
    the 0.5B writes ``sentiment_analysis(text=…)``, but opens it about 0.2 likely (measured):
    with the ``doubt`` fact set, the served engine reads its doubt and answers in prose."""
    upstream = Recording(OpenAIUpstream(qwen.base_url))
    engine = product_engine(qwen, upstream)
    engine.registry.learn(upstream.key, qwen.model, "doubt", "yes", Source.USER)  # opt-in
    body = {
        "model": qwen.model,
        "messages": [{"role": "user", "content": "Tell me a famous quote about life."}],
        "tools": [SENTIMENT],
        "temperature": 0,
        "max_tokens": 192,
    }
    if stream:
        chunks = await _stream(engine, body)
        text, calls = reassemble(chunks)
        meta = chunks[-1]["toolshim"]
    else:
        data = await _complete(engine, body)
        text = data["choices"][0]["message"]["content"]
        calls = data["choices"][0]["message"].get("tool_calls") or {}
        meta = data["toolshim"]
        assert "logprobs" not in data["choices"][0]  # asked for by toolshim, not the caller
    assert not calls and text.strip()
    assert any("unsure a tool was needed" in w for w in meta["warnings"]), meta["warnings"]
    assert upstream.bodies[0]["logprobs"] is True and "logprobs" not in upstream.bodies[1]
