"""Arbitrary JSON Schemas through tool validation and through the proxy: a 400 naming what is
wrong, or a checked call; never another exception, never a 500, never a fetch or a hang.

Bounded for CI (``max_examples``); the long run is
``python benchmarks/bench_schema_safety.py --examples N``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from hypothesis import HealthCheck, given, settings

from tests.security.helpers import calling_upstream, tool_body
from tests.security.schema_strategies import json_values, schemas
from tests.server.helpers import proxy
from toolshim.dialects.interpret import ParsedCall
from toolshim.engine.validate import validate_calls
from toolshim.errors import InvalidRequestError
from toolshim.schemas import inspect_tools
from toolshim.types import ToolChoice, ToolSpec


def as_parameters(schema: Any) -> dict[str, Any]:
    """The schema as a tool's parameters (an object schema, as the wire requires)."""
    if isinstance(schema, dict):
        return schema
    return {"type": "object", "properties": {"a": schema}}


def check(schema: Any, value: Any) -> str:
    """What happens to a call with ``value`` as arguments: "refused", "over budget" or
    "checked". Any other exception fails the test."""
    tool = ToolSpec("f", parameters=as_parameters(schema))
    refused: InvalidRequestError | None = None
    try:
        inspect_tools([tool])
    except InvalidRequestError as exc:
        refused = exc
    if refused is not None:
        assert refused.status == 400 and refused.code == "invalid_tool_schema"
        assert refused.param == "tools.0.function.parameters"
        assert refused.message.startswith("tool 'f': its parameters schema ")
        return "refused"
    arguments = value if isinstance(value, dict) else {"a": value}
    call = ParsedCall("f", arguments, json.dumps(arguments))
    try:
        verdict = validate_calls([call], [tool], ToolChoice.AUTO)
    except InvalidRequestError as exc:
        refused = exc
    if refused is not None:
        assert "steps (the limit)" in refused.message
        return "over budget"
    assert all(isinstance(p, str) for p in verdict.problems)
    return "checked"


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(schema=schemas, value=json_values)
def test_any_schema_is_refused_with_a_400_or_checks_calls(schema: Any, value: Any) -> None:
    assert check(schema, value) in ("refused", "over budget", "checked")


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(schema=schemas, value=json_values)
def test_any_schema_through_the_proxy_gets_a_defined_answer(schema: Any, value: Any) -> None:
    arguments = value if isinstance(value, dict) else {"a": value}
    upstream = calling_upstream(arguments, name="f")

    async def ask() -> Any:
        async with proxy(upstream, mode="auto") as p:
            body = tool_body(as_parameters(schema), name="f")
            return await p.client.post("/v1/chat/completions", json=body)

    response = asyncio.run(ask())
    assert response.status_code in (200, 400, 502), response.text
    if response.status_code == 400:
        error = response.json()["error"]
        assert error["type"] == "invalid_request_error" and error["message"]
        assert upstream.calls == 0 or "steps (the limit)" in error["message"]


def test_a_draft_3_schema_with_a_type_no_draft_knows_is_not_checked() -> None:
    """Found by the fuzz test above: draft 3's meta-schema takes any string as a type, and
    jsonschema raised ``UnknownType`` while checking the call. Such a schema checks no call
    (as any schema the validator cannot use); a draft-3 union with a schema in it still does."""
    draft3 = "http://json-schema.org/draft-03/schema#"
    assert check({"$schema": draft3, "type": ["nope"], "$anchor": "anchor"}, None) == "checked"
    assert check({"type": "object", "properties": {"a": {"type": "nope"}}}, {"a": 1}) == "checked"
    tool = ToolSpec("f", parameters={"$schema": draft3, "type": ["string", {"type": "integer"}]})
    wrong = validate_calls([ParsedCall("f", {"a": 1}, '{"a": 1}')], [tool], ToolChoice.AUTO)
    assert wrong.problems  # an object is neither a string nor an integer: still checked
