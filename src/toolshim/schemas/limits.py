"""The bounds every caller schema is held to, and the pieces both halves share: the registry that
fetches nothing, the size walk, RE2 and the walk over a schema's objects."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any

import re2
import referencing.exceptions
from referencing import Registry, Resource

from toolshim.json_walk import json_nodes

__all__ = [
    "CODE",
    "MAX_DEPTH",
    "MAX_NODES",
    "MAX_STEPS",
    "REF_COST",
    "REF_KEYWORDS",
    "REGISTRY",
    "TOO_DEEP",
    "compiled",
    "measure",
    "schema_objects",
]

MAX_DEPTH = 64
"""Objects and arrays nested deeper than this in one tool's schema are refused."""
MAX_NODES = 20_000
"""JSON values (objects, arrays, strings, numbers...) one tool's schema may hold."""
MAX_STEPS = 50_000
"""Keyword evaluations one check of a call may make, a reference counting as 10 (a normal call
takes a few dozen, a call with 2,000 objects of 5 fields 26,000): well under a second of CPU."""
REF_COST = 10

REF_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")
CODE = "invalid_tool_schema"
TOO_DEEP = f"is nested more than {MAX_DEPTH} levels deep (the limit)"


def _refuse(uri: str) -> Resource[Any]:
    """The registry's retrieval: nothing outside the schema itself is ever fetched."""
    raise referencing.exceptions.NoSuchResource(uri)


REGISTRY: Registry[Any] = Registry(retrieve=_refuse)  # type: ignore[call-arg]


def measure(schema: Any) -> str | None:
    """Size and nesting, without recursion (so that no depth can overflow the stack)."""
    for count, (_, depth, holds) in enumerate(json_nodes(schema), 1):
        if count > MAX_NODES:
            return f"holds more than {MAX_NODES} JSON values (the limit)"
        if holds and depth > MAX_DEPTH:
            return TOO_DEEP
    return None


_OPTIONS = re2.Options()
_OPTIONS.log_errors = False


@lru_cache(maxsize=1024)
def compiled(pattern: str) -> Any:
    """The pattern compiled by RE2, or None when RE2 cannot run it."""
    try:
        return re2.compile(pattern, _OPTIONS)
    except (re2.error, TypeError, ValueError):
        return None


_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples", "example"})
"""Keywords whose values are data, not schemas: a ``"type"`` key inside them is a value."""


def schema_objects(schema: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """Every object inside ``schema`` (itself first), walked without recursion; the values of
    the data keywords (:data:`_DATA_KEYWORDS`) are skipped."""
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, Mapping):
            yield node
            stack.extend(v for k, v in node.items() if k not in _DATA_KEYWORDS)
