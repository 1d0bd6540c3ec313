"""Hypothesis strategies for arbitrary, odd and hostile JSON Schemas (and values to check).

Shared by the bounded fuzz tests and the long run in ``benchmarks/bench_schema_safety.py``.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

REFS = [
    "#",
    "#/$defs/a",
    "#/$defs/b",
    "#/definitions/a",
    "#/properties/x",
    "#/nope",
    "#anchor",
    "",
    "s.json",
    "../s.json#/a",
    "http://127.0.0.1:9/s.json",
    "https://example.com/schema",
    "file:///etc/passwd",
    "file:///dev/zero",
    "urn:example:x",
    "//example.com/x",
]
PATTERNS = [
    "^[a-z]+$",
    "^(a+)+$",
    "(x+x+)+y",
    r"^(\w)\1$",
    "^(?=a)",
    "(?<!a)b",
    "(",
    "[",
    r"\Z",
    "a{1000}{1000}",
    "",
    ".*",
]
IDS = ["http://example.com/root.json", "inner.json", "#frag", "http://[bad", 5, None]
DIALECTS = [
    "https://json-schema.org/draft/2020-12/schema",
    "https://json-schema.org/draft/2019-09/schema",
    "http://json-schema.org/draft-07/schema#",
    "http://json-schema.org/draft-04/schema#",
    "http://json-schema.org/draft-03/schema#",
    "http://example.com/unknown",
    [],
    7,
]
TYPES = ["object", "array", "string", "integer", "number", "boolean", "null", "nope"]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
"""Any JSON value (also used for keyword values where a schema belongs)."""

_leaf: st.SearchStrategy[Any] = st.one_of(
    st.booleans(),
    st.builds(
        lambda t: {"type": t}, st.sampled_from(TYPES) | st.lists(st.sampled_from(TYPES), max_size=3)
    ),
    st.builds(lambda p: {"type": "string", "pattern": p}, st.sampled_from(PATTERNS)),
    st.builds(lambda r: {"$ref": r}, st.sampled_from(REFS)),
    st.builds(lambda r: {"$dynamicRef": r}, st.sampled_from(REFS)),
    st.builds(lambda v: {"enum": v}, st.lists(json_values, max_size=3)),
    st.builds(lambda v: {"const": v}, json_values),
    st.builds(lambda v: {"minLength": v}, json_values),
    st.just({"$anchor": "anchor"}),
    json_values,
)


def _extend(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    names = st.sampled_from(["a", "b", "x", "$ref", "pattern", ""])
    return st.one_of(
        st.builds(
            lambda p: {"type": "object", "properties": p}, st.dictionaries(names, inner, max_size=3)
        ),
        st.builds(lambda i: {"type": "array", "items": i}, inner),
        st.builds(
            lambda k, v: {k: v},
            st.sampled_from(["allOf", "anyOf", "oneOf", "prefixItems"]),
            st.lists(inner, max_size=3),
        ),
        st.builds(
            lambda k, v: {k: v},
            st.sampled_from(
                [
                    "not",
                    "if",
                    "then",
                    "else",
                    "additionalProperties",
                    "unevaluatedProperties",
                    "propertyNames",
                    "contains",
                ]
            ),
            inner,
        ),
        st.builds(
            lambda d: {"$defs": d}, st.dictionaries(st.sampled_from(["a", "b"]), inner, max_size=2)
        ),
        st.builds(
            lambda d: {"definitions": d},
            st.dictionaries(st.sampled_from(["a", "b"]), inner, max_size=2),
        ),
        st.builds(
            lambda d: {"patternProperties": d},
            st.dictionaries(st.sampled_from(PATTERNS), inner, max_size=2),
        ),
        st.builds(lambda d: {"dependentSchemas": d}, st.dictionaries(names, inner, max_size=2)),
        st.builds(
            lambda i, s: {"$id": i, **s} if isinstance(s, dict) else s, st.sampled_from(IDS), inner
        ),
        st.builds(
            lambda a, b: {**a, **b} if isinstance(a, dict) and isinstance(b, dict) else a,
            inner,
            inner,
        ),
    )


schemas: st.SearchStrategy[Any] = st.builds(
    lambda body, dialect: (
        {"$schema": dialect, **body} if dialect is not None and isinstance(body, dict) else body
    ),
    st.recursive(_leaf, _extend, max_leaves=12),
    st.none() | st.sampled_from(DIALECTS),
)
"""Nested, odd and hostile schemas: remote and dangling references, cycles, catastrophic and
unsupported patterns, wrong keyword types, several drafts."""


def deep(levels: int) -> dict[str, Any]:
    """A schema nested ``levels`` objects deep."""
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"x": schema}}
    return schema
