"""Tools built from a JSON Schema (Tool.from_schema) and structured results (ToolResult)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.agent.conftest import Kind, calls_reply, fake_for
from toolshim.agent import Agent, Tool, ToolResult
from toolshim.errors import ConfigError

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "to": {
            "type": "object",
            "description": "The delivery address",
            "properties": {
                "city": {"type": "string", "description": "City name"},
                "country": {"type": "string", "enum": ["FR", "DE"]},
            },
            "required": ["city", "country"],
        },
        "speed": {"type": "string", "enum": ["economy", "express"]},
    },
    "required": ["to"],
}


def test_the_schema_is_kept_whole_and_arguments_arrive_as_one_dict() -> None:
    received: list[dict[str, Any]] = []
    ship = Tool.from_schema(
        "ship", SCHEMA, lambda arguments: received.append(arguments) or "ok", description="Ship."
    )
    assert ship.parameters == SCHEMA
    assert ship.spec.parameters == SCHEMA
    assert ship.to_openai()["function"]["description"] == "Ship."
    assert ship.parameter_names == ["to", "speed"]
    checked = ship.check('{"to": {"city": "Lyon", "country": "FR"}}')
    assert checked.ok
    assert checked.normalized == '{"to":{"city":"Lyon","country":"FR"}}'


def test_arguments_that_break_the_schema_are_a_problem_for_the_model() -> None:
    ship = Tool.from_schema("ship", SCHEMA, lambda arguments: "ok")
    problem = ship.check({"to": {"city": "Lyon", "country": "IT"}, "speed": "fast"}).problem
    assert problem is not None
    assert "to.country: 'IT' is not one of ['FR', 'DE']" in problem
    assert "speed: 'fast' is not one of ['economy', 'express']" in problem
    assert "Its arguments schema is" in problem
    assert "not valid JSON" in str(ship.check("{to:").problem)
    assert "must be a JSON object" in str(ship.check([1]).problem)


def test_bad_names_and_schemas_are_refused() -> None:
    with pytest.raises(ConfigError, match="as a tool name"):
        Tool.from_schema("a.b", SCHEMA, lambda arguments: "ok")
    with pytest.raises(ConfigError, match="must be a JSON object"):
        Tool.from_schema("ship", [], lambda arguments: "ok")  # type: ignore[arg-type]


async def test_sync_and_async_callables() -> None:
    def sync(arguments: dict[str, Any]) -> str:
        return f"sync {arguments['to']['city']}"

    async def later(arguments: dict[str, Any]) -> ToolResult:
        return ToolResult(data={"city": arguments["to"]["city"]})

    arguments = {"to": {"city": "Lyon", "country": "FR"}}
    one = Tool.from_schema("one", SCHEMA, sync)
    two = Tool.from_schema("two", SCHEMA, later)
    assert not one.is_async and two.is_async
    assert await one.invoke(one.check(arguments)) == "sync Lyon"
    result = await two.invoke(two.check(arguments))
    assert result.model_text == '{"city":"Lyon"}'
    assert two.renamed("three").parameters == SCHEMA


def test_an_error_result_reaches_the_model_as_an_error(kind: Kind) -> None:
    def lookup(arguments: dict[str, Any]) -> ToolResult:
        if arguments["key"] == "missing":
            return ToolResult("no entry for 'missing'", is_error=True)
        return ToolResult("", data={"key": arguments["key"], "value": 42})

    schema = {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}
    upstream = fake_for(
        kind,
        calls_reply(kind, ("lookup", {"key": "missing"}), ("lookup", {"key": "answer"})),
        "There is no 'missing' entry; 'answer' is 42.",
    )
    agent = Agent([Tool.from_schema("lookup", schema, lookup)], upstream=upstream, model="m")
    result = agent.run("Look up missing and answer")
    missing, found = result.tool_runs
    assert missing.status == "error"
    assert missing.error_type == "ToolError"
    assert missing.result == "Error: no entry for 'missing'"
    assert found.status == "ok"
    assert json.loads(found.result) == {"key": "answer", "value": 42}
    assert found.value == ToolResult("", data={"key": "answer", "value": 42})
