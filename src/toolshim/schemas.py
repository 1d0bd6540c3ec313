"""Caller JSON Schemas made safe to check: local references only, bounded size, nesting and work.

A tool's ``parameters`` schema comes from whoever calls the proxy, so it is data, never an
instruction to fetch or compute without bound:

* ``$ref`` (and ``$dynamicRef``/``$recursiveRef``) may only point inside the schema itself
  (``#...``: ``#/$defs/...``, ``#/definitions/...``, an anchor); nothing is ever fetched —
  the :class:`referencing.Registry` behind the validator refuses every retrieval;
* a schema holds at most :data:`MAX_NODES` JSON values nested at most :data:`MAX_DEPTH`
  deep, and a chain of references that applies to the same value without consuming any of
  it (``{"$ref": "#"}``) is refused;
* ``pattern`` and ``patternProperties`` run on RE2, in linear time. A pattern RE2 cannot run
  (backreferences, lookaround, ``\\Z``) is *not enforced*: it is never the reason a call is
  rejected, and the turn carries a warning naming it. ``unevaluatedProperties`` in a schema
  that also uses ``patternProperties`` is not enforced either (jsonschema would run those
  patterns on Python's backtracking engine);
* one check of a call against a schema evaluates at most :data:`MAX_STEPS` keywords.

:func:`inspect_tools` runs when a request is assembled (before any upstream call) and raises
:class:`~toolshim.errors.InvalidRequestError` (HTTP 400) naming the tool and the limit or
reference; :func:`checker` builds the bounded validator that checks calls.
"""

from __future__ import annotations

import contextvars
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import jsonschema
import re2
import referencing.exceptions
import referencing.jsonschema
from jsonschema.exceptions import SchemaError, UndefinedTypeCheck, ValidationError
from referencing import Registry, Resource

from toolshim.errors import InvalidRequestError
from toolshim.json_walk import json_nodes
from toolshim.types import ToolSpec

__all__ = [
    "MAX_DEPTH",
    "MAX_NODES",
    "MAX_STEPS",
    "TOOL_NAME",
    "Checker",
    "check_tool_names",
    "checker",
    "inspect_schema",
    "inspect_tool",
    "inspect_tools",
]

MAX_DEPTH = 64
"""Objects and arrays nested deeper than this in one tool's schema are refused."""
MAX_NODES = 20_000
"""JSON values (objects, arrays, strings, numbers...) one tool's schema may hold."""
MAX_STEPS = 50_000
"""Keyword evaluations one check of a call may make, a reference counting as 10 (a normal call
takes a few dozen, a call with 2,000 objects of 5 fields 26,000): well under a second of CPU."""
_REF_COST = 10

_REF_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")
_SAME_VALUE = ("allOf", "anyOf", "oneOf", "not", "if", "then", "else", "extends")
_SAME_VALUE_MAPS = ("dependentSchemas", "dependencies")
_CODE = "invalid_tool_schema"
_TOO_DEEP = f"is nested more than {MAX_DEPTH} levels deep (the limit)"


class SchemaBudgetError(Exception):
    """Raised inside a check that evaluated more than its budget of keywords."""


def _refuse(uri: str) -> Resource[Any]:
    """The registry's retrieval: nothing outside the schema itself is ever fetched."""
    raise referencing.exceptions.NoSuchResource(uri)


_REGISTRY: Registry[Any] = Registry(retrieve=_refuse)  # type: ignore[call-arg]


# -- inspection when a request is assembled -----------------------------------------------------


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
        problem: str | None = _TOO_DEEP
    except (TypeError, ValueError):
        return ()  # not JSON: the validator reports it as not checked
    else:
        problem, notes = _inspect_text(text)
        if problem is None:
            return tuple(n.format(name=name) for n in notes)
    raise InvalidRequestError(
        f"tool {name!r}: its parameters schema {problem}", param=param, code=_CODE
    )


def _measure(schema: Any) -> str | None:
    """Size and nesting, without recursion (so that no depth can overflow the stack)."""
    for count, (_, depth, holds) in enumerate(json_nodes(schema), 1):
        if count > MAX_NODES:
            return f"holds more than {MAX_NODES} JSON values (the limit)"
        if holds and depth > MAX_DEPTH:
            return _TOO_DEEP
    return None


@lru_cache(maxsize=512)
def _inspect_text(text: str) -> tuple[str | None, tuple[str, ...]]:
    """(problem or None, notes with ``{name}`` left to fill) for one schema's JSON text."""
    try:
        schema = json.loads(text)
    except RecursionError:
        return _TOO_DEEP, ()
    problem = _measure(schema)
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
    registry = _REGISTRY.with_resource(uri, root).crawl()
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
    for keyword in _REF_KEYWORDS:
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
    for node in _schema_objects(schema):
        patterns = []
        if isinstance(node.get("pattern"), str):
            patterns.append(node["pattern"])
        if isinstance(node.get("patternProperties"), Mapping):
            uses_pattern_properties = True
            patterns += [p for p in node["patternProperties"] if isinstance(p, str)]
        uses_unevaluated = uses_unevaluated or "unevaluatedProperties" in node
        for pattern in patterns:
            if _re2(pattern) is None:
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


# -- the bounded validator ----------------------------------------------------------------------


_OPTIONS = re2.Options()
_OPTIONS.log_errors = False


@lru_cache(maxsize=1024)
def _re2(pattern: str) -> Any:
    """The pattern compiled by RE2, or None when RE2 cannot run it."""
    try:
        return re2.compile(pattern, _OPTIONS)
    except (re2.error, TypeError, ValueError):
        return None


@dataclass
class _Budget:
    steps: int = 0


_BUDGET: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar(
    "toolshim_schema_budget", default=None
)

Keyword = Callable[[Any, Any, Any, Any], Any]


def _counted(function: Keyword, cost: int) -> Keyword:
    def keyword(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        budget = _BUDGET.get()
        if budget is not None:
            budget.steps += cost
            if budget.steps > MAX_STEPS:
                raise SchemaBudgetError
        return function(validator, value, instance, schema)

    return keyword


def _pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "string") or not isinstance(pattern, str):
        return
    regex = _re2(pattern)
    if regex is not None and not regex.search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        regex = _re2(pattern)
        if regex is None:
            continue
        for key, value in instance.items():
            if regex.search(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional(instance: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
    properties = schema.get("properties", {})
    regexes = [_re2(p) for p in schema.get("patternProperties", {})]
    # A pattern RE2 cannot run counts as matching: it is never why a call is rejected.
    return [
        key
        for key in instance
        if key not in properties and not any(r is None or r.search(key) for r in regexes)
    ]


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    extras = _additional(instance, schema)
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        joined = ", ".join(repr(e) for e in sorted(extras))
        if "patternProperties" in schema:
            patterns = ", ".join(repr(p) for p in sorted(schema["patternProperties"]))
            verb = "does" if len(extras) == 1 else "do"
            yield ValidationError(f"{joined} {verb} not match any of the regexes: {patterns}")
        else:
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(
                f"Additional properties are not allowed ({joined} {verb} unexpected)"
            )


def _not_enforced(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
    return iter(())


_CLASSES: dict[tuple[type[Any], bool], type[Any]] = {}


def _safe_class(base: type[Any], pattern_properties: bool) -> type[Any]:
    """``base`` with every keyword counted and every regex on RE2."""
    key = (base, pattern_properties)
    if key not in _CLASSES:
        replaced: dict[str, Keyword] = {
            "pattern": _pattern,
            "patternProperties": _pattern_properties,
            "additionalProperties": _additional_properties,
        }
        if pattern_properties:
            replaced["unevaluatedProperties"] = _not_enforced
        keywords = {
            name: _counted(replaced.get(name, function), _REF_COST if name in _REF_KEYWORDS else 1)
            for name, function in base.VALIDATORS.items()
        }
        _CLASSES[key] = jsonschema.validators.extend(  # type: ignore[no-untyped-call]
            base, validators=keywords
        )
    return _CLASSES[key]


class Checker:
    """A caller's schema compiled for checking calls, bounded in work (see the module doc)."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        base = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        base.check_schema(dict(schema))
        unknown = _unknown_type(schema, base.TYPE_CHECKER)
        if unknown is not None:
            # Draft 3's meta-schema takes any string as a type (``"type": ["nope"]``), which
            # the validator then cannot check: jsonschema raised UnknownType mid-turn.
            raise SchemaError(f"{unknown!r} is not a type this schema's draft knows")
        uses = '"patternProperties"' in json.dumps(schema)
        self._validator = _safe_class(base, uses)(schema, registry=_REGISTRY)

    def errors(self, instance: Any, *, name: str) -> list[ValidationError]:
        """The ways ``instance`` breaks the schema. Raises :class:`InvalidRequestError` when the
        check needs more than :data:`MAX_STEPS` steps or a reference cannot be resolved;
        RecursionError when the instance is nested too deeply to check."""
        token = _BUDGET.set(_Budget())
        try:
            return list(self._validator.iter_errors(instance))
        except SchemaBudgetError:
            raise InvalidRequestError(
                f"tool {name!r}: checking a call against its parameters schema takes more than "
                f"{MAX_STEPS} steps (the limit); simplify the schema",
                code=_CODE,
            ) from None
        except referencing.exceptions.Unresolvable as exc:
            raise InvalidRequestError(
                f"tool {name!r}: its parameters schema has a reference that cannot be resolved "
                f"({type(exc).__name__}); only local references are allowed",
                code=_CODE,
            ) from None
        finally:
            _BUDGET.reset(token)


_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples", "example"})
"""Keywords whose values are data, not schemas: a ``"type"`` key inside them is a value."""


def _unknown_type(schema: Mapping[str, Any], types: Any) -> str | None:
    """The first type name ``schema`` uses that ``types`` (a jsonschema type checker) does not
    know, or None."""
    for node in _schema_objects(schema):
        named = node.get("type")
        for name in named if isinstance(named, list) else [named]:
            if isinstance(name, str) and not _known(types, name):
                return name
    return None


def _schema_objects(schema: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
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


def _known(types: Any, name: str) -> bool:
    try:
        types.is_type(None, name)
    except UndefinedTypeCheck:
        return False
    return True


@lru_cache(maxsize=512)
def checker(schema_text: str, transform: Callable[[Any], Any] | None = None) -> Checker | None:
    """The :class:`Checker` for a schema's JSON text (``transform`` applied first), or None
    when it is not a valid JSON Schema (a call is then not checked against it)."""
    schema = json.loads(schema_text)
    if transform is not None:
        schema = transform(schema)
    if not isinstance(schema, Mapping) or _measure(schema) is not None:
        return None
    try:
        return Checker(schema)
    except (SchemaError, TypeError, ValueError, RecursionError):
        return None


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
