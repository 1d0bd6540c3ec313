"""A caller's tool schemas inspected when a request is assembled, before any upstream call:
size and nesting, local references that resolve and never cycle on one value, the patterns
RE2 cannot run (named in warnings), and tool names the OpenAI and Anthropic APIs accept."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import lru_cache
from typing import Any

import referencing.exceptions
import referencing.jsonschema
from referencing import Resource

from toolshim.errors import InvalidRequestError
from toolshim.schemas.limits import (
    CODE,
    REF_KEYWORDS,
    REGISTRY,
    TOO_DEEP,
    compiled,
    measure,
    schema_objects,
)
from toolshim.types import ToolSpec

__all__ = ["TOOL_NAME", "check_tool_names", "inspect_schema", "inspect_tool", "inspect_tools"]

_SAME_VALUE = ("allOf", "anyOf", "oneOf", "not", "if", "then", "else", "extends")
_SAME_VALUE_MAPS = ("dependentSchemas", "dependencies")


def inspect_tools(tools: Sequence[ToolSpec]) -> tuple[str, ...]:
    """Check every function tool's schema; return warnings (patterns that are not enforced).

    Raises :class:`InvalidRequestError` (``param`` ``tools.<i>.function.parameters``) for a
    non-local ``$ref``, one that points nowhere, a reference cycle, or a schema over a limit.
    """
    notes: list[str] = []
    for index, tool in enumerate(tools):
        if tool.is_function:
            notes += inspect_tool(tool, index=index)
    return tuple(dict.fromkeys(notes))


def inspect_tool(tool: ToolSpec, *, index: int | None = None) -> tuple[str, ...]:
    """Check one tool's schema (see :func:`inspect_tools`), read as its spec's JSON text."""
    return _inspect(tool.name, lambda: tool.schema_text, index)


def inspect_schema(name: str, schema: Any, *, index: int | None = None) -> tuple[str, ...]:
    """Check one schema given as a value (see :func:`inspect_tools`)."""
    return _inspect(name, lambda: json.dumps(schema, sort_keys=True), index)


def _inspect(name: str, text_of: Callable[[], str], index: int | None) -> tuple[str, ...]:
    param = f"tools.{index}.function.parameters" if index is not None else None
    try:
        text = text_of()
    except RecursionError:  # far deeper than the limit: the encoder's own guard stopped it
        problem: str | None = TOO_DEEP
    except (TypeError, ValueError):
        return ()  # not JSON: the validator reports it as not checked
    else:
        problem, notes = _inspect_text(text)
        if problem is None:
            return tuple(n.format(name=name) for n in notes)
    raise InvalidRequestError(
        f"tool {name!r}: its parameters schema {problem}", param=param, code=CODE
    )


@lru_cache(maxsize=512)
def _inspect_text(text: str) -> tuple[str | None, tuple[str, ...]]:
    """(problem or None, notes with ``{name}`` left to fill) for one schema's JSON text."""
    try:
        schema = json.loads(text)
    except RecursionError:
        return TOO_DEEP, ()
    problem = measure(schema)
    if problem is not None:
        return problem, ()
    if not isinstance(schema, Mapping):
        return None, ()
    try:
        _check_references(schema)
    except _Refused as exc:
        return str(exc), ()
    except (TypeError, ValueError, AttributeError, KeyError) as exc:
        # A malformed $id or $schema that referencing cannot read.
        return f"cannot be read for its references ({type(exc).__name__}: {exc})", ()
    return None, tuple(_pattern_notes(schema))


class _Refused(Exception):
    pass


def _specification(schema: Mapping[str, Any]) -> Any:
    dialect = schema.get("$schema")
    default = referencing.jsonschema.DRAFT202012
    if not isinstance(dialect, str):
        return default
    return referencing.jsonschema.specification_with(dialect, default=default)


def _check_references(schema: Mapping[str, Any]) -> None:
    """Every reference reachable from the root is local and resolves; no reference cycle
    applies to the same value forever."""
    spec = _specification(schema)
    root = spec.create_resource(schema)
    uri = root.id() or ""
    registry = REGISTRY.with_resource(uri, root).crawl()
    seen: set[int] = set()
    visited: list[tuple[Any, Any]] = []
    pending: list[tuple[Any, Any]] = [(schema, registry.resolver(base_uri=uri))]
    while pending:
        contents, resolver = pending.pop()
        if id(contents) in seen or not isinstance(contents, Mapping):
            continue
        seen.add(id(contents))
        visited.append((contents, resolver))
        resource = Resource.from_contents(contents, default_specification=spec)
        inner = resolver.in_subresource(resource)
        for _, target in _references(contents, inner):
            pending.append(target)
        pending.extend((sub.contents, inner) for sub in resource.subresources())
    _check_cycles(visited, spec)


def _references(contents: Mapping[str, Any], resolver: Any) -> Iterator[tuple[str, Any]]:
    for keyword in REF_KEYWORDS:
        ref = contents.get(keyword)
        if not isinstance(ref, str):
            continue
        if not ref.startswith("#"):
            raise _Refused(
                f"has {keyword} {ref!r}: only local references ('#/$defs/...', "
                "'#/definitions/...') are allowed; nothing is fetched"
            )
        try:
            resolved = resolver.lookup(ref)
        except referencing.exceptions.Unresolvable as exc:
            raise _Refused(f"has {keyword} {ref!r}, which points to nothing in it") from exc
        yield keyword, (resolved.contents, resolved.resolver)


def _check_cycles(nodes: Sequence[tuple[Any, Any]], spec: Any) -> None:
    """Depth-first, from every subschema, over the edges that apply a subschema to the *same*
    value (references, ``allOf``/``anyOf``/``oneOf``/``not``/``if``...): a cycle there never
    ends. Iterative, so that no chain of references can overflow the stack."""
    on_path: set[int] = set()
    done: set[int] = set()
    for start, start_resolver in nodes:
        if id(start) in done:
            continue
        # Each frame: a node on the current path and the iterator over its same-value children.
        path = [(id(start), _same_value_children(start, start_resolver, spec))]
        on_path.add(id(start))
        while path:
            node, children = path[-1]
            step = next(children, None)
            if step is None:
                path.pop()
                on_path.discard(node)
                done.add(node)
                continue
            child, resolver = step
            if not isinstance(child, Mapping) or id(child) in done:
                continue
            if id(child) in on_path:
                raise _Refused(
                    "has a reference cycle that never reaches a property or item "
                    "(a $ref that leads back to itself)"
                )
            path.append((id(child), _same_value_children(child, resolver, spec)))
            on_path.add(id(child))


def _same_value_children(
    contents: Mapping[str, Any], resolver: Any, spec: Any
) -> Iterator[tuple[Any, Any]]:
    resource = Resource.from_contents(contents, default_specification=spec)
    resolver = resolver.in_subresource(resource)
    for _, target in _references(contents, resolver):
        yield target
    for keyword in _SAME_VALUE:
        value = contents.get(keyword)
        for child in value if isinstance(value, list) else [value]:
            if isinstance(child, Mapping):
                yield child, resolver
    for keyword in _SAME_VALUE_MAPS:
        value = contents.get(keyword)
        if isinstance(value, Mapping):
            for child in value.values():
                if isinstance(child, Mapping):
                    yield child, resolver


def _pattern_notes(schema: Mapping[str, Any]) -> Iterator[str]:
    """Warnings for what RE2 cannot enforce (``{name}`` is filled in by the caller)."""
    uses_pattern_properties = False
    uses_unevaluated = False
    for node in schema_objects(schema):
        patterns = []
        if isinstance(node.get("pattern"), str):
            patterns.append(node["pattern"])
        if isinstance(node.get("patternProperties"), Mapping):
            uses_pattern_properties = True
            patterns += [p for p in node["patternProperties"] if isinstance(p, str)]
        uses_unevaluated = uses_unevaluated or "unevaluatedProperties" in node
        for pattern in patterns:
            if compiled(pattern) is None:
                yield (
                    "the pattern " + _braces(repr(pattern)) + " of tool {name!r} is not enforced: "
                    "RE2 cannot run it (backreferences and lookaround are not supported)"
                )
    if uses_pattern_properties and uses_unevaluated:
        yield (
            "the unevaluatedProperties of tool {name!r} are not enforced: the schema also uses "
            "patternProperties"
        )


def _braces(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""What the OpenAI and Anthropic APIs accept as a tool name (letters, digits, ``_``, ``-``;
1 to 64 of them)."""


def check_tool_names(tools: Sequence[ToolSpec]) -> None:
    """InvalidRequestError naming the first function tool whose name OpenAI and Anthropic would
    refuse: such a name (100,000 characters, a NUL, a right-to-left mark, a ``<``) would reach
    an emulated prompt verbatim."""
    for i, tool in enumerate(tools):
        if tool.is_function and not TOOL_NAME.fullmatch(tool.name):
            shown = tool.name if len(tool.name) <= 80 else tool.name[:80] + "…"
            raise InvalidRequestError(
                f"tools[{i}]: the tool name {shown!r} ({len(tool.name)} characters) is not one "
                "the OpenAI and Anthropic APIs accept: use 1 to 64 letters, digits, '_' or '-'",
                param=f"tools.{i}.function.name",
                code="invalid_tool_name",
            )
