"""The bounded validator that checks calls against a caller's schema: every keyword counted
against :data:`~toolshim.schemas.limits.MAX_STEPS`, every regex on RE2, references only
inside the schema."""

from __future__ import annotations

import contextvars
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import jsonschema
import referencing.exceptions
from jsonschema.exceptions import SchemaError, UndefinedTypeCheck, ValidationError

from toolshim.errors import InvalidRequestError
from toolshim.schemas.limits import (
    CODE,
    MAX_STEPS,
    REF_COST,
    REF_KEYWORDS,
    REGISTRY,
    compiled,
    measure,
    schema_objects,
)

__all__ = ["Checker", "SchemaBudgetError", "checker"]


class SchemaBudgetError(Exception):
    """Raised inside a check that evaluated more than its budget of keywords."""


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
    regex = compiled(pattern)
    if regex is not None and not regex.search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        regex = compiled(pattern)
        if regex is None:
            continue
        for key, value in instance.items():
            if regex.search(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional(instance: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
    properties = schema.get("properties", {})
    regexes = [compiled(p) for p in schema.get("patternProperties", {})]
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
            name: _counted(replaced.get(name, function), REF_COST if name in REF_KEYWORDS else 1)
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
        self._validator = _safe_class(base, uses)(schema, registry=REGISTRY)

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
                code=CODE,
            ) from None
        except referencing.exceptions.Unresolvable as exc:
            raise InvalidRequestError(
                f"tool {name!r}: its parameters schema has a reference that cannot be resolved "
                f"({type(exc).__name__}); only local references are allowed",
                code=CODE,
            ) from None
        finally:
            _BUDGET.reset(token)


def _unknown_type(schema: Mapping[str, Any], types: Any) -> str | None:
    """The first type name ``schema`` uses that ``types`` (a jsonschema type checker) does not
    know, or None."""
    for node in schema_objects(schema):
        named = node.get("type")
        for name in named if isinstance(named, list) else [named]:
            if isinstance(name, str) and not _known(types, name):
                return name
    return None


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
    if not isinstance(schema, Mapping) or measure(schema) is not None:
        return None
    try:
        return Checker(schema)
    except (SchemaError, TypeError, ValueError, RecursionError):
        return None
