"""Walking a nested JSON value (dicts, lists, tuples) without recursion, so that no depth of
nesting can overflow the stack."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["json_nodes", "json_values"]


def json_nodes(value: Any) -> Iterator[tuple[Any, int, bool]]:
    """Every value inside ``value`` (``value`` first, at depth 1), with its depth and whether
    it holds others (a mapping, list or tuple), depth first; stop iterating to stop the walk."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, Mapping):
            children: Any = node.values()
        elif isinstance(node, list | tuple):
            children = node
        else:
            yield node, depth, False
            continue
        yield node, depth, True
        stack.extend((child, depth + 1) for child in children)


def json_values(value: Any) -> Iterator[str | int | float]:
    """The strings and numbers inside ``value`` (not booleans, nulls or anything else), in the
    order they are written."""
    stack: list[Any] = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            stack.extend(reversed(list(node.values())))
        elif isinstance(node, list | tuple):
            stack.extend(reversed(node))
        elif isinstance(node, str | int | float) and not isinstance(node, bool):
            yield node
