"""Caller tool schemas are checked safely: local references work, limits are named in a 400,
regexes run in linear time, and no schema makes a check run without bound."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from toolshim.dialects.interpret import ParsedCall
from toolshim.engine.validate import validate_calls
from toolshim.errors import InvalidRequestError
from toolshim.schemas import MAX_DEPTH, MAX_NODES, MAX_STEPS, inspect_schema, inspect_tools
from toolshim.types import ToolChoice, ToolSpec


def verdict(parameters: Any, arguments: Any, name: str = "f") -> Any:
    tool = ToolSpec(name, parameters=parameters)
    return validate_calls(
        [ParsedCall(name, arguments, json.dumps(arguments))], [tool], ToolChoice.AUTO
    )


def nested(levels: int) -> dict[str, Any]:
    """An object schema whose property ``x`` is nested ``levels`` objects deep."""
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"x": schema}}
    return schema


# -- local references ---------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["$defs", "definitions"])
def test_local_references_resolve_and_are_enforced(where: str) -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"$ref": f"#/{where}/city"}},
        where: {"city": {"type": "string", "enum": ["Paris", "Oslo"]}},
    }
    assert inspect_schema("f", schema) == ()
    assert verdict(schema, {"city": "Paris"}).ok
    bad = verdict(schema, {"city": "Rome"})
    assert not bad.ok and "'Rome' is not one of ['Paris', 'Oslo']" in bad.problems[0]


def test_anchors_and_nested_ids_resolve_locally() -> None:
    schema = {
        "$id": "https://example.com/root.json",
        "type": "object",
        "properties": {"a": {"$ref": "#city"}, "b": {"$ref": "#/$defs/inner"}},
        "$defs": {
            "city": {"$anchor": "city", "type": "string"},
            "inner": {
                "$id": "inner.json",
                "type": "object",
                "properties": {"n": {"$ref": "#/$defs/n"}},
                "$defs": {"n": {"type": "integer"}},
            },
        },
    }
    assert inspect_schema("f", schema) == ()
    assert verdict(schema, {"a": "x", "b": {"n": 3}}).ok
    assert not verdict(schema, {"a": 1, "b": {"n": "3x"}}).ok


def test_a_recursive_schema_that_consumes_the_value_is_fine() -> None:
    tree = {
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/node"}},
        "$defs": {
            "node": {
                "type": "object",
                "properties": {
                    "label": {"type": "string"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                },
            }
        },
    }
    assert inspect_schema("f", tree) == ()
    value = {"root": {"label": "a", "children": [{"label": "b", "children": []}]}}
    assert verdict(tree, value).ok
    assert not verdict(tree, {"root": {"label": "a", "children": [{"label": 2}]}}).ok


def test_a_reference_to_nothing_is_a_400() -> None:
    schema = {"type": "object", "properties": {"city": {"$ref": "#/$defs/missing"}}}
    with pytest.raises(
        InvalidRequestError, match=re.escape("$ref '#/$defs/missing', which points to nothing")
    ):
        inspect_schema("f", schema)


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "#"},
        {"properties": {"a": {"$ref": "#/$defs/a"}}, "$defs": {"a": {"$ref": "#/$defs/a"}}},
        {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}}},
        {"$defs": {"a": {"anyOf": [{"not": {"$ref": "#/$defs/a"}}]}}},
        {"definitions": {"a": {"if": {"$ref": "#/definitions/a"}}}},
    ],
)
def test_a_reference_cycle_on_the_same_value_is_a_400(schema: dict[str, Any]) -> None:
    with pytest.raises(InvalidRequestError, match="reference cycle") as info:
        inspect_tools([ToolSpec("f", parameters={"type": "object", **schema})])
    assert info.value.param == "tools.0.function.parameters"
    assert info.value.status == 400


# -- size and nesting ---------------------------------------------------------------------------


@pytest.mark.parametrize("levels", [MAX_DEPTH // 2, 500, 5000])
def test_a_schema_nested_too_deep_is_a_400_naming_the_limit(levels: int) -> None:
    with pytest.raises(InvalidRequestError, match=f"nested more than {MAX_DEPTH} levels deep"):
        inspect_schema("f", nested(levels))


def test_a_schema_just_under_the_depth_limit_is_checked() -> None:
    schema = nested(MAX_DEPTH // 2 - 1)
    assert inspect_schema("f", schema) == ()
    value: Any = "leaf"
    for _ in range(MAX_DEPTH // 2 - 1):
        value = {"x": value}
    assert verdict(schema, value).ok
    value = ["not a string"]
    for _ in range(MAX_DEPTH // 2 - 1):
        value = {"x": value}
    assert not verdict(schema, value).ok


def test_a_huge_schema_is_a_400_naming_the_limit() -> None:
    schema = {"type": "object", "properties": {"a": {"enum": list(range(MAX_NODES))}}}
    with pytest.raises(InvalidRequestError, match=f"more than {MAX_NODES} JSON values"):
        inspect_schema("f", schema)


def test_a_schema_that_takes_too_many_steps_to_check_is_a_400() -> None:
    # Each level applies the next one twice: 2**40 evaluations for one string.
    defs = {f"l{i}": {"allOf": [{"$ref": f"#/$defs/l{i + 1}"}] * 2} for i in range(40)}
    defs["l40"] = {"type": "string"}
    schema = {"type": "object", "properties": {"a": {"$ref": "#/$defs/l0"}}, "$defs": defs}
    assert inspect_schema("f", schema) == ()  # small, local and acyclic: accepted...
    with pytest.raises(InvalidRequestError, match=f"more than {MAX_STEPS} steps"):
        verdict(schema, {"a": "x"})  # ...and stopped at the step limit when a call is checked


# -- regexes ------------------------------------------------------------------------------------


def test_patterns_are_enforced_by_re2() -> None:
    schema = {
        "type": "object",
        "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}$"}},
        "patternProperties": {"^x-[a-z]+$": {"type": "integer"}},
        "additionalProperties": False,
    }
    assert verdict(schema, {"code": "ABC", "x-one": 1}).ok
    assert "'abc' does not match '^[A-Z]{3}$'" in verdict(schema, {"code": "abc"}).problems[0]
    assert "is not of type 'integer'" in verdict(schema, {"x-one": "1"}).problems[0]
    assert "'y' does not match any of the regexes" in verdict(schema, {"y": 1}).problems[0]


def test_a_catastrophic_pattern_is_checked_in_linear_time() -> None:
    schema = {
        "type": "object",
        "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}},
        "patternProperties": {"^(b+)+$": {"type": "integer"}},
    }
    # Python's backtracking engine needs about 2**n steps for these; RE2 a few hundred.
    result = verdict(schema, {"s": "a" * 5000 + "!", "b" * 5000 + "!": "not checked"})
    assert not result.ok and "does not match '^(a+)+$'" in result.problems[0]
    assert verdict(schema, {"s": "a" * 5000}).ok


def test_a_pattern_re2_cannot_run_is_not_enforced_and_named_in_a_warning() -> None:
    schema = {
        "type": "object",
        "properties": {"pair": {"type": "string", "pattern": r"^(\w)\1$"}},
        "patternProperties": {"^(?=x)": {"type": "integer"}},
        "additionalProperties": False,
    }
    notes = sorted(inspect_schema("twin", schema), key=len)
    assert notes[1] == (
        r"the pattern '^(\\w)\\1$' of tool 'twin' is not enforced: RE2 cannot run it "
        "(backreferences and lookaround are not supported)"
    )
    assert "'^(?=x)'" in notes[0]
    # Never the reason a call is rejected: neither the pattern nor additionalProperties.
    assert verdict(schema, {"pair": "ab", "xy": "z"}).ok
    assert not verdict(schema, {"pair": [1]}).ok  # the rest of the schema still holds


def test_unevaluated_properties_beside_pattern_properties_are_not_enforced() -> None:
    schema = {
        "type": "object",
        "patternProperties": {"^a": {"type": "integer"}},
        "unevaluatedProperties": False,
    }
    assert inspect_schema("f", schema) == (
        "the unevaluatedProperties of tool 'f' are not enforced: the schema also uses "
        "patternProperties",
    )
    assert verdict(schema, {"a1": 1, "b": 2}).ok
    assert not verdict({"type": "object", "unevaluatedProperties": False}, {"b": 2}).ok


def test_an_invalid_schema_is_still_only_a_warning() -> None:
    result = verdict({"type": "object", "properties": {"a": {"type": "nope"}}}, {"a": 1})
    assert result.ok
    assert result.warnings == ("the schema of 'f' is not a valid JSON Schema; not checked",)
