"""The tracing upstream used by ``--verbose``, tool time limits, result text, partial tools."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from typing import Any

import pytest

from toolshim.agent import Agent, Tool
from toolshim.agent.executor import error_text, result_text
from toolshim.agent.trace import TracingUpstream
from toolshim.errors import UpstreamError, UpstreamStatusError
from toolshim.testing import FakeUpstream, Reply, call
from toolshim.types import ChatRequest, ToolSpec
from toolshim.wire.openai_chat import parse_request


async def test_tracing_reports_bodies_replies_and_errors() -> None:
    seen: list[tuple[str, Any]] = []
    fake = FakeUpstream(
        [Reply("Hello there, traveller", tool_calls=[call("f", {"x": 1}, id="c1")])],
        tools="native",
    )
    traced = TracingUpstream(
        fake,
        on_request=lambda body: seen.append(("request", body["messages"][-1]["content"])),
        on_reply=lambda body, reply: seen.append(("reply", reply["choices"][0])),
    )
    assert traced.key == fake.key
    chunks = [
        c
        async for c in traced.stream(
            parse_request(
                {
                    "model": "m",
                    "messages": [{"role": "user", "content": "hi"}],
                    "tools": [{"type": "function", "function": {"name": "f"}}],
                }
            )
        )
    ]
    assert len(chunks) > 2  # the stream was relayed chunk by chunk
    kind, first = seen[0]
    assert (kind, first) == ("request", "hi")
    kind, choice = seen[1]
    assert kind == "reply" and choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] == "Hello there, traveller"
    assert choice["message"]["tool_calls"] == [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}
    ]
    models = await traced.list_models()
    assert models["data"][0]["id"] == "fake-model"
    await traced.aclose()
    assert fake.closed


async def test_tracing_reports_upstream_errors_and_re_raises() -> None:
    errors: list[UpstreamError] = []
    fake = FakeUpstream(tools="reject")
    traced = TracingUpstream(fake, on_error=lambda body, exc: errors.append(exc))
    request = ChatRequest("m", (), tools=(ToolSpec("f"),))
    with pytest.raises(UpstreamStatusError, match="does not support tools"):
        await traced.complete(request)
    assert len(errors) == 1 and "does not support tools" in errors[0].message


async def test_a_slow_tool_gets_a_timeout_result_and_the_run_goes_on() -> None:
    async def slow() -> str:
        """Never finishes in time."""
        await asyncio.sleep(30)
        return "late"

    def quick() -> str:
        """Finishes."""
        return "fast"

    fake = FakeUpstream([Reply(tool_calls=[call("slow", {}), call("quick", {})]), "partial"])
    agent = Agent([slow, quick], upstream=fake, model="m", tool_timeout=0.05)
    result = await agent.arun("?")
    slow_run, quick_run = result.tool_runs
    assert slow_run.status == "error" and slow_run.error_type == "TimeoutError"
    assert slow_run.result == "Error: TimeoutError: 'slow' did not finish within 0.05 s"
    assert quick_run.result == "fast"
    assert result.output == "partial"


@dataclasses.dataclass
class Point:
    x: int
    y: int


def test_result_text_and_error_text() -> None:
    assert result_text("as is") == "as is"
    assert result_text({"a": [1, 2.5, None]}) == '{"a":[1,2.5,null]}'
    assert result_text(Point(1, 2)) == '{"x":1,"y":2}'
    assert result_text(None) == "null"
    assert result_text(object).startswith("\"<class 'object'>")
    assert error_text(KeyError("k")) == "Error: KeyError: 'k'"
    assert error_text(RuntimeError()) == "Error: RuntimeError"


def test_partials_and_classes_as_tools() -> None:
    def scale(value: float, factor: float) -> float:
        """Scale a value."""
        return value * factor

    double = Tool(functools.partial(scale, factor=2.0), name="double")
    assert list(double.parameters["properties"]) == ["value", "factor"]
    assert double.parameters["properties"]["factor"]["default"] == 2.0
    assert asyncio.run(double.invoke(double.check({"value": 4}))) == 8.0

    class Greeting:
        """Make a greeting."""

        def __init__(self, name: str) -> None:
            self.text = f"hello {name}"

    greeting = Tool(Greeting)
    assert greeting.parameters["required"] == ["name"]
    assert asyncio.run(greeting.invoke(greeting.check({"name": "Ada"}))).text == "hello Ada"


async def test_turn_started_carries_a_snapshot_of_the_history() -> None:
    fake = FakeUpstream([Reply(tool_calls=[call("quick", {})]), "done"])

    def quick() -> str:
        """Quick."""
        return "fast"

    events = [e async for e in Agent([quick], upstream=fake, model="m").astream("go")]
    starts = [e for e in events if type(e).__name__ == "TurnStarted"]
    assert [len(s.messages) for s in starts] == [1, 3]
    assert starts[1].messages[-1] == {
        "role": "tool",
        "tool_call_id": starts[1].messages[1]["tool_calls"][0]["id"],
        "content": "fast",
    }
