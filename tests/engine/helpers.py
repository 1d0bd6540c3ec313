"""Shared scripting for engine tests: a model that behaves by what it is sent."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolshim.capabilities.facts import Source
from toolshim.engine import Engine
from toolshim.testing import FakeUpstream, FunctionUpstream, Reply, call

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["c", "f"]},
            },
            "required": ["city"],
        },
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Current time in a timezone",
        "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}},
    },
}
TOOLS = [WEATHER, TIME]
CALL_TEXT = '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}'
ANSWER = "Paris is the capital of France."


def request(**extra: Any) -> dict[str, Any]:
    return {
        "model": "m",
        "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
        "tools": TOOLS,
        **extra,
    }


def emulating_engine(upstream: FakeUpstream, facts: Mapping[str, str], **options: Any) -> Engine:
    """An engine that emulates with hermes (unless ``options`` say otherwise), its in-memory
    registry holding ``facts`` about model ``m`` at ``upstream``, as the upstream said them."""
    options.setdefault("mode", "force")
    options.setdefault("dialect", "hermes")
    built = Engine(upstream, registry=":memory:", **options)
    for name, value in facts.items():
        built.registry.learn(upstream.key, "m", name, value, Source.UPSTREAM)
    return built


def called(name: str, arguments: str, result: str, call_id: str = "c1") -> list[dict[str, Any]]:
    """An assistant message with one tool call, and the tool message with its result."""
    function = {"name": name, "arguments": arguments}
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": call_id, "type": "function", "function": function}],
        },
        {"role": "tool", "tool_call_id": call_id, "content": result},
    ]


async def text_and_warnings(
    engine: Engine, body: dict[str, Any], stream: bool
) -> tuple[str, list[str]]:
    """The answer's text and warnings, the request served whole or streamed."""
    if not stream:
        completion = await engine.acomplete(body)
        assert completion.meta is not None
        return completion.text, list(completion.meta.warnings)
    text, warnings = "", []
    async for chunk in engine.astream({**body, "stream": True}):
        text += chunk.content or ""
        if chunk.meta is not None:
            warnings = list(chunk.meta.warnings)
    return text, warnings


def system_text(body: dict[str, Any]) -> str:
    return "\n".join(
        m["content"]
        for m in body["messages"]
        if m["role"] == "system" and isinstance(m["content"], str)
    )


@dataclass
class Scripted:
    """What a scripted model does: ``kind`` is how it treats native tools, ``needed`` whether
    the question needs a tool."""

    kind: str  # native | reject | ignore
    needed: bool
    decision: bool = False

    def __call__(self, body: dict[str, Any]) -> Any:
        if body.get("tools"):  # a native attempt (reject is handled by FunctionUpstream)
            choice = body.get("tool_choice")
            if (
                self.kind == "native"
                and choice != "none"
                and (self.needed or choice not in (None, "auto"))
            ):
                return Reply(None, [call("get_weather", {"city": "Paris"})])
            return Reply("I would need a weather service for that.")
        system = system_text(body)
        if "get_weather" in system:  # tool instructions in the prompt: emulation
            must = "must call" in system
            if self.needed or must:
                return CALL_TEXT
            return '{"tool_calls": []}' if self.decision else ANSWER
        return ANSWER

    def upstream(self) -> FunctionUpstream:
        tools = {"native": "native", "reject": "reject", "ignore": "ignore"}[self.kind]
        return FunctionUpstream(self, tools=tools)  # type: ignore[arg-type]


def outcome(completion: Any) -> str:
    message = completion.message
    if message.tool_calls:
        assert completion.finish_reason == "tool_calls"
        assert message.content is None
        names = {c.name for c in message.tool_calls}
        assert names == {"get_weather"}
        assert json.loads(message.tool_calls[0].arguments) == {"city": "Paris"}
        return "call"
    assert message.content
    return "text"
