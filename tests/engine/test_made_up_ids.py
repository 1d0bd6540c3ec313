"""A call written beside others with an identifier nobody said is held back: the model wrote
``list_orders(user_id="12345")`` next to the ``find_user`` call whose result holds the real id
(Qwen2.5-Coder-1.5B on the agent suite's two-dependent tasks)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolshim.engine import Engine
from toolshim.testing import FakeUpstream


def tool(name: str, **properties: Any) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": name,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": list(properties),
            },
        },
    }


TOOLS = [
    tool("find_user", username={"type": "string"}),
    tool("list_orders", user_id={"type": "string"}),
    tool("add", a={"type": "integer"}, b={"type": "integer"}),
]


def reply(*calls: tuple[str, dict[str, Any]]) -> str:
    return json.dumps({"tool_calls": [{"name": n, "arguments": a} for n, a in calls]})


def ask(question: str, **extra: Any) -> dict[str, Any]:
    return {
        "model": "m",
        "messages": [{"role": "user", "content": question}],
        "tools": TOOLS,
        **extra,
    }


async def run(engine: Engine, request: dict[str, Any], stream: bool) -> tuple[list[str], list[str]]:
    """The names of the calls returned, and the turn's warnings."""
    if not stream:
        completion = await engine.acomplete(request)
        assert completion.meta is not None
        return [c.name for c in completion.tool_calls], list(completion.meta.warnings)
    names: dict[int, str] = {}
    warnings: list[str] = []
    async for chunk in engine.astream({**request, "stream": True}):
        for delta in chunk.tool_calls:
            names[delta.index] = names.get(delta.index, "") + (delta.name or "")
        if chunk.meta is not None:
            warnings = list(chunk.meta.warnings)
    return list(names.values()), warnings


DEPENDENT = reply(("find_user", {"username": "alice"}), ("list_orders", {"user_id": "12345"}))


@pytest.mark.parametrize("stream", [False, True])
async def test_a_made_up_id_beside_the_call_that_finds_it_is_held_back(stream: bool) -> None:
    upstream = FakeUpstream([DEPENDENT])
    engine = Engine(upstream, mode="force", registry=":memory:")
    names, warnings = await run(engine, ask("Which orders does user alice have?"), stream)
    assert names == ["find_user"]
    assert upstream.calls == 1
    assert any("held back list_orders(user_id='12345')" in w for w in warnings)


@pytest.mark.parametrize(
    "request_",
    [
        ask("Which orders do alice and the user with id 12345 have?"),  # the id was said
        ask("Orders of alice?", tool_choice="required"),  # a forced choice is not second-guessed
    ],
    ids=["said", "required"],
)
async def test_an_id_the_conversation_holds_or_a_forced_choice_keeps_every_call(
    request_: dict[str, Any],
) -> None:
    engine = Engine(FakeUpstream([DEPENDENT]), mode="force", registry=":memory:")
    names, warnings = await run(engine, request_, False)
    assert names == ["find_user", "list_orders"]
    assert not any("held back" in w for w in warnings)


async def test_a_lone_call_and_plain_numbers_are_not_held_back() -> None:
    alone = FakeUpstream([reply(("list_orders", {"user_id": "12345"}))])
    names, _ = await run(Engine(alone, mode="force", registry=":memory:"), ask("My orders?"), False)
    assert names == ["list_orders"]  # nothing else to wait for: it may be meant
    sums = FakeUpstream([reply(("find_user", {"username": "bob"}), ("add", {"a": 1, "b": 2}))])
    names, _ = await run(Engine(sums, mode="force", registry=":memory:"), ask("Find bob."), False)
    assert names == ["find_user", "add"]


async def test_the_id_found_in_a_result_grounds_the_next_call() -> None:
    request = ask("Which orders does user alice have?")
    request["messages"] += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "find_user", "arguments": '{"username": "alice"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "User alice has id u-17"},
    ]
    both = reply(("list_orders", {"user_id": "u-17"}), ("find_user", {"username": "carol"}))
    engine = Engine(FakeUpstream([both]), mode="force", registry=":memory:")
    names, _ = await run(engine, request, False)
    assert names == ["list_orders", "find_user"]
