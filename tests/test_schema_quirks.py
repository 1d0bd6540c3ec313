"""Tool schemas read as their authors meant them (toolshim.schema_quirks)."""

from __future__ import annotations

import copy

import pytest

from toolshim.schema_quirks import as_meant


def test_an_enum_of_scalars_beside_type_array_moves_onto_the_items() -> None:
    schema = {"type": "array", "items": {"type": "string", "maxLength": 9}, "enum": ["a", "b"]}
    before = copy.deepcopy(schema)
    assert as_meant(schema) == {
        "type": "array",
        "items": {"type": "string", "maxLength": 9, "enum": ["a", "b"]},
    }
    assert schema == before  # a copy, the caller's schema is untouched


def test_it_is_found_at_any_depth_and_without_items() -> None:
    nested = {"type": "object", "properties": {"tags": {"type": ["array"], "enum": [1, 2]}}}
    assert as_meant(nested)["properties"]["tags"] == {"type": ["array"], "items": {"enum": [1, 2]}}
    listed = {"anyOf": [{"type": "array", "enum": ["x"]}, {"type": "null"}]}
    assert as_meant(listed)["anyOf"][0] == {"type": "array", "items": {"enum": ["x"]}}


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "array", "enum": [["a"], ["b"]]},  # whole arrays as the allowed values: valid
        {"type": "array", "items": {"enum": ["a"]}},
        {"type": ["array", "string"], "enum": ["a"]},  # a string "a" is a real possibility
        {"type": "string", "enum": ["a", "b"]},
        {"type": "object", "properties": {"enum": {"type": "string"}, "type": {"type": "array"}}},
    ],
)
def test_schemas_that_mean_what_they_say_are_unchanged(schema: dict[str, object]) -> None:
    assert as_meant(schema) == schema


def test_a_deep_schema_does_not_recurse_without_end() -> None:
    deep: dict[str, object] = {"type": "array", "enum": ["a"]}
    for _ in range(5000):
        deep = {"items": deep}
    assert as_meant(deep) is not None
