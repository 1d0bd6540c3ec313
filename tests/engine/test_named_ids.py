"""An id parameter given a name: held back beside the call that looks the name up, re-asked
once when a lookup tool is offered, left alone otherwise (the 0.5B's
``list_orders(user_id="bob")``, the 1.5B's ``list_orders(user_id="carol")`` a turn after
"my username is carol")."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.engine.test_audit_gaps import serve
from toolshim.dialects.interpret import ParsedCall
from toolshim.engine import Engine
from toolshim.engine.checks.named_ids import named_ids
from toolshim.testing import FakeUpstream


def _tool(name: str, description: str, parameter: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {parameter: {"type": "string"}},
                "required": [parameter],
            },
        },
    }


FIND_USER = _tool("find_user", "Find a customer's user id from their username", "username")
LIST_ORDERS = _tool("list_orders", "The order ids of a customer, by user id", "user_id")
TOOLS = [FIND_USER, LIST_ORDERS]


def request(question: str, tools: list[dict[str, Any]] = TOOLS, **extra: Any) -> dict[str, Any]:
    return {
        "model": "m",
        "messages": [{"role": "user", "content": question}],
        "tools": tools,
        **extra,
    }


async def run(
    replies: list[str], body: dict[str, Any], stream: bool
) -> tuple[list[tuple[str, dict[str, Any]]], list[str], FakeUpstream]:
    upstream = FakeUpstream(replies)
    engine = Engine(upstream, mode="force", dialect="pythonic", registry=":memory:")
    out = await serve(engine, body, stream)
    assert out.meta is not None
    calls = [(c["name"], json.loads(c["arguments"])) for c in out.calls.values()]
    return calls, list(out.meta.warnings), upstream


@pytest.mark.parametrize(
    ("arguments", "found"),
    [
        ({"user_id": "carol"}, [("user_id", "user", "carol")]),
        ({"receiver_id": "John Levy"}, [("receiver_id", "receiver", "John Levy")]),
        ({"customerId": "O'Brien"}, [("customerId", "customer", "O'Brien")]),
        ({"user_id": "u-17"}, []),  # an id: it has a digit
        ({"user_id": "USR005"}, []),
        ({"id": "grgr"}, []),  # ``id`` alone names no kind of thing
        ({"username": "carol"}, []),  # not an id parameter
        ({"user_id": 17}, []),
    ],
)
def test_an_id_parameter_given_a_name(arguments: dict[str, Any], found: list[Any]) -> None:
    call = ParsedCall("list_orders", arguments, json.dumps(arguments))
    assert named_ids(call) == found


@pytest.mark.parametrize("stream", [False, True])
async def test_beside_the_lookup_of_the_same_name_it_waits_for_its_result(stream: bool) -> None:
    reply = '[find_user(username="bob"), list_orders(user_id="bob")]'
    calls, warnings, upstream = await run([reply], request("List the orders of bob."), stream)
    assert calls == [("find_user", {"username": "bob"})]
    assert any("held back list_orders(user_id='bob')" in w for w in warnings)
    assert upstream.calls == 1


@pytest.mark.parametrize("stream", [False, True])
async def test_alone_it_is_re_asked_once_naming_the_lookup(stream: bool) -> None:
    replies = ['[list_orders(user_id="carol")]', '[find_user(username="carol")]']
    body = request("My username is carol. Which order ids do I have?")
    calls, _, upstream = await run(replies, body, stream)
    assert calls == [("find_user", {"username": "carol"})]
    assert upstream.calls == 2
    reask = json.dumps(upstream.history[1]["messages"])
    assert "'find_user' looks the id up" in reask


@pytest.mark.parametrize("stream", [False, True])
async def test_written_again_it_goes_out(stream: bool) -> None:
    replies = ['[list_orders(user_id="carol")]'] * 2
    body = request("My username is carol. Which order ids do I have?")
    calls, _, upstream = await run(replies, body, stream)
    assert calls == [("list_orders", {"user_id": "carol"})]
    assert upstream.calls == 2


@pytest.mark.parametrize(
    ("reply", "body"),
    [
        # An id with a digit is an id.
        ('[list_orders(user_id="u-17")]', request("Orders of user u-17?")),
        # No tool offered looks a user id up: nothing to call first.
        ('[list_orders(user_id="carol")]', request("Orders of carol?", tools=[LIST_ORDERS])),
        # A name nobody gave is the made-up check's to judge, not this one's.
        ('[list_orders(user_id="dave")]', request("Orders of my account?")),
        # A forced call is wanted as written.
        (
            '[list_orders(user_id="carol")]',
            request(
                "Orders of carol?",
                tool_choice={"type": "function", "function": {"name": "list_orders"}},
            ),
        ),
    ],
)
async def test_left_alone(reply: str, body: dict[str, Any]) -> None:
    calls, warnings, upstream = await run([reply, reply], body, False)
    assert [name for name, _ in calls] == ["list_orders"]
    assert not any("looks the id up" in w or "held back" in w for w in warnings)
    if "dave" not in reply:
        assert upstream.calls == 1
