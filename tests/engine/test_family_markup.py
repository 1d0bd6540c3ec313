"""The engine reads a reply with the model family's own markup first (shipped profiles)."""

from __future__ import annotations

from toolshim.engine import Engine
from toolshim.testing import FakeUpstream

NOW = {
    "type": "function",
    "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}},
}


def test_the_turn_knows_the_family_markup() -> None:
    engine = Engine(FakeUpstream(), registry=":memory:")
    hi = [{"role": "user", "content": "hi"}]
    assert engine.turn({"model": "glm-4.6", "messages": hi}).markup == "glm"
    assert engine.turn({"model": "qwen2.5-coder:7b", "messages": hi}).markup == "hermes"
    assert engine.turn({"model": "my-own-model", "messages": hi}).markup is None


async def test_a_glm_model_s_bare_name_in_tool_call_tags_is_a_call() -> None:
    upstream = FakeUpstream(["<tool_call>get_time</tool_call>"])
    engine = Engine(upstream, mode="force", registry=":memory:")
    completion = await engine.acomplete(
        {"model": "glm-4.6", "messages": [{"role": "user", "content": "time?"}], "tools": [NOW]}
    )
    assert [(c.name, c.arguments) for c in completion.tool_calls] == [("get_time", "{}")]
