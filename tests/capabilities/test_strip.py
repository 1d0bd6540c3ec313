"""strip mode uses the registry: a model without known tool support never receives tools."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from toolshim.capabilities.facts import Source
from toolshim.capabilities.registry import Registry
from toolshim.engine import Engine
from toolshim.engine.history import strip_note
from toolshim.testing import FakeUpstream, Reply, call
from toolshim.types import Completion, Metadata

KEY = "http://127.0.0.1:11434/v1"
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def meta(reply: Completion) -> Metadata:
    assert reply.meta is not None
    return reply.meta


def request(model: str, **extra: Any) -> dict[str, Any]:
    return {
        "model": model,
        "messages": [
            {"role": "system", "content": "You are a weather bot."},
            {"role": "user", "content": "Weather in Paris?"},
        ],
        "tools": [WEATHER],
        "tool_choice": "auto",
        **extra,
    }


def system_of(body: dict[str, Any]) -> str:
    return "\n".join(m["content"] for m in body["messages"] if m["role"] == "system")


def engine(tmp_path: Path, upstream: FakeUpstream) -> Engine:
    return Engine(upstream, mode="strip", registry=str(tmp_path / "caps.sqlite3"))


async def test_a_model_known_to_lack_tools_gets_none_and_a_one_line_note(tmp_path: Path) -> None:
    upstream = FakeUpstream(["I cannot look that up, but Paris is usually mild."], key=KEY)
    reply = await engine(tmp_path, upstream).acomplete(request("gemma3:1b"))  # profile: no
    body = upstream.history[0]
    assert "tools" not in body and "tool_choice" not in body
    system = system_of(body)
    assert system.startswith("You are a weather bot.")
    assert strip_note() in system and "\n" not in strip_note()
    assert reply.text.startswith("I cannot look that up")
    assert not meta(reply).emulated and meta(reply).llm_calls == 1
    assert any("tools dropped" in w for w in meta(reply).warnings)


async def test_an_unknown_model_is_not_sent_tools_either(tmp_path: Path) -> None:
    upstream = FakeUpstream(["Mild."], key=KEY)
    await engine(tmp_path, upstream).acomplete(request("custom-model"))
    assert "tools" not in upstream.history[0]


async def test_a_model_with_tools_keeps_them(tmp_path: Path) -> None:
    upstream = FakeUpstream([Reply(None, [call("get_weather", {"city": "Paris"})])], key=KEY)
    reply = await engine(tmp_path, upstream).acomplete(request("qwen2.5:7b"))  # profile: yes
    assert upstream.history[0]["tools"][0]["function"]["name"] == "get_weather"
    assert strip_note() not in system_of(upstream.history[0])
    assert reply.tool_calls[0].name == "get_weather"


async def test_strip_follows_what_is_learned_and_set(tmp_path: Path) -> None:
    registry = Registry.open(tmp_path / "caps.sqlite3")
    registry.learn(KEY, "qwen2.5:7b", "native_tools", "no", Source.RUNTIME_ERROR)
    registry.learn(KEY, "gemma3:1b", "native_tools", "yes", Source.USER)
    upstream = FakeUpstream(
        ["Mild.", Reply(None, [call("get_weather", {"city": "Paris"})])], key=KEY
    )
    strip = Engine(upstream, mode="strip", registry=registry)
    await strip.acomplete(request("qwen2.5:7b"))
    await strip.acomplete(request("gemma3:1b"))
    assert ["tools" in body for body in upstream.history] == [False, True]


async def test_a_streamed_strip_turn_drops_tools_and_keeps_the_note(tmp_path: Path) -> None:
    upstream = FakeUpstream(["Mild and sunny."], key=KEY)
    chunks = [
        c async for c in engine(tmp_path, upstream).astream(request("gemma3:1b", stream=True))
    ]
    assert "".join(c.content or "" for c in chunks) == "Mild and sunny."
    last = chunks[-1].meta
    assert last is not None and any("tools dropped" in w for w in last.warnings)
    assert "tools" not in upstream.history[0]
    assert strip_note() in system_of(upstream.history[0])


async def test_earlier_tool_turns_become_text_for_a_model_without_tools(tmp_path: Path) -> None:
    upstream = FakeUpstream(["It was 18 degrees."], key=KEY)
    history = request("gemma3:1b")
    history["messages"] += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "18 degrees"},
    ]
    await engine(tmp_path, upstream).acomplete(history)
    body = upstream.history[0]
    assert all(m["role"] != "tool" and not m.get("tool_calls") for m in body["messages"])
    assert any("18 degrees" in (m.get("content") or "") for m in body["messages"])
