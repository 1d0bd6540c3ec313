"""A tool's arguments from a Python signature: the JSON Schema a model reads, and the pydantic
model that validates what it sends.

Type hints (``str``, ``int``, ``float``, ``bool``, ``list[...]``, ``dict[...]``, ``X | None``,
``Literal``, ``Enum``, pydantic models, dataclasses, TypedDicts), defaults, descriptions given as
``Annotated[T, "text"]`` or ``Annotated[T, Field(description=...)]``, and the docstring's
parameter sections (Google, NumPy and reST styles). The schema is tidied for small models:
non-recursive ``$ref``s inlined, generated titles dropped, ``X | None`` a type list.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import docstring_parser
from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.errors import PydanticSchemaGenerationError, PydanticUserError
from pydantic.fields import FieldInfo
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaWarningKind

from toolshim.errors import ConfigError

__all__ = ["Parameter", "arguments_model", "description", "is_async", "schema"]


@dataclass(frozen=True, slots=True)
class Parameter:
    """One parameter of the function: its name, its field in the model, how it is passed."""

    name: str
    field: str
    positional_only: bool


def is_async(function: Callable[..., Any]) -> bool:
    """True for ``async def`` functions, partials of them, and objects with an async ``__call__``."""
    if inspect.iscoroutinefunction(function):
        return True
    return not inspect.isroutine(function) and inspect.iscoroutinefunction(type(function).__call__)


def description(doc: docstring_parser.Docstring) -> str:
    parts = [p.strip() for p in (doc.short_description, doc.long_description) if p and p.strip()]
    return "\n\n".join(parts)


def arguments_model(
    function: Callable[..., Any], tool_name: str, doc: docstring_parser.Docstring
) -> tuple[tuple[Parameter, ...], type[BaseModel]]:
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"cannot read the signature of tool {tool_name!r}: {exc}") from exc
    try:
        hints = typing.get_type_hints(_hint_source(function), include_extras=True)
    except (NameError, TypeError) as exc:
        raise ConfigError(
            f"cannot resolve the type hints of tool {tool_name!r}: {exc} (define the types it "
            "uses at module level)"
        ) from exc
    documented = {p.arg_name: (p.description or "").strip() for p in doc.params}
    parameters: list[Parameter] = []
    fields: dict[str, Any] = {}
    for i, (name, parameter) in enumerate(signature.parameters.items()):
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise ConfigError(
                f"tool {tool_name!r}: parameter {str(parameter).split(':')[0]!r}: *args and "
                "**kwargs cannot be described to a model; name each parameter"
            )
        annotation = hints.get(name, Any)
        description = _annotated_description(annotation) or documented.get(name) or None
        default = ... if parameter.default is inspect.Parameter.empty else parameter.default
        field = f"p{i}"
        fields[field] = (annotation, Field(default, alias=name, description=description))
        parameters.append(Parameter(name, field, parameter.kind is parameter.POSITIONAL_ONLY))
    try:
        model = create_model(
            f"{tool_name}_arguments",
            __config__=ConfigDict(extra="ignore", populate_by_name=False),
            **fields,
        )
    except (PydanticSchemaGenerationError, PydanticUserError, TypeError) as exc:
        raise ConfigError(_unsupported(tool_name, exc)) from exc
    return tuple(parameters), typing.cast(type[BaseModel], model)


def _hint_source(function: Callable[..., Any]) -> Any:
    """Where the type hints of ``function``'s parameters live (partials, classes, callables)."""
    while isinstance(function, functools.partial):
        function = function.func
    if inspect.isclass(function):
        return function.__init__
    if not inspect.isroutine(function):
        return type(function).__call__
    return function


def _annotated_description(annotation: Any) -> str | None:
    """The description in ``Annotated[T, "text"]`` or ``Annotated[T, Field(description=...)]``."""
    if typing.get_origin(annotation) is not typing.Annotated:
        return None
    for meta in annotation.__metadata__:
        if isinstance(meta, str) and meta.strip():
            return meta.strip()
        if isinstance(meta, FieldInfo) and meta.description:
            return meta.description
    return None


def _unsupported(tool_name: str, exc: Exception) -> str:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return (
        f"tool {tool_name!r} has a parameter type without a JSON Schema ({first}); use basic "
        "types, Literal, Enum, pydantic models, dataclasses or TypedDicts"
    )


class _ToolSchema(GenerateJsonSchema):
    """pydantic's generator, quiet about defaults that have no JSON form (they are left out)."""

    def emit_warning(self, kind: JsonSchemaWarningKind, detail: str) -> None:
        if kind != "non-serializable-default":
            super().emit_warning(kind, detail)


def schema(model: type[BaseModel], tool_name: str) -> dict[str, Any]:
    try:
        raw = model.model_json_schema(by_alias=True, schema_generator=_ToolSchema)
    except (PydanticSchemaGenerationError, PydanticUserError, TypeError) as exc:
        raise ConfigError(_unsupported(tool_name, exc)) from exc
    definitions = raw.pop("$defs", {})
    recursive: set[str] = set()
    schema = _tidy(raw, definitions, (), recursive)
    if not isinstance(schema, dict):
        raise ConfigError(f"tool {tool_name!r}: unexpected arguments schema {raw!r}")
    schema.pop("title", None)
    schema.setdefault("properties", {})
    if recursive:
        kept: dict[str, Any] = {}
        while len(kept) < len(recursive):
            for name in sorted(recursive - set(kept)):
                kept[name] = _tidy(definitions[name], definitions, (name,), recursive)
        schema["$defs"] = kept
    return schema


_LITERAL_KEYS = frozenset({"default", "enum", "const", "examples"})


def _tidy(
    node: Any, definitions: Mapping[str, Any], stack: Sequence[str], recursive: set[str]
) -> Any:
    """Inline non-recursive ``$ref``s, drop generated titles, collapse ``X | None`` to a type list.

    Small models read a flat schema far better than one with ``$defs`` and ``anyOf``.
    """
    if isinstance(node, list):
        return [_tidy(item, definitions, stack, recursive) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        name = ref.removeprefix("#/$defs/")
        if name in stack and name in definitions:
            recursive.add(name)
            return dict(node)
        if name not in definitions:
            return dict(node)
        merged = {**definitions[name], **{k: v for k, v in node.items() if k != "$ref"}}
        merged.pop("title", None)
        return _tidy(merged, definitions, (*stack, name), recursive)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in _LITERAL_KEYS:
            out[key] = value
        elif key == "properties" and isinstance(value, dict):
            out[key] = {k: _tidy(v, definitions, stack, recursive) for k, v in value.items()}
        else:
            out[key] = _tidy(value, definitions, stack, recursive)
    return _collapse_optional(out)


def _collapse_optional(node: dict[str, Any]) -> dict[str, Any]:
    """``{"anyOf": [{"type": "integer"}, {"type": "null"}]}`` → ``{"type": ["integer", "null"]}``."""
    options = node.get("anyOf")
    if not isinstance(options, list) or len(options) != 2:
        return node
    simple = [o for o in options if isinstance(o, dict) and set(o) == {"type"}]
    if len(simple) != 2 or {"type": "null"} not in simple:
        return node
    other = next(o["type"] for o in simple if o != {"type": "null"})
    if not isinstance(other, str):
        return node
    out = {k: v for k, v in node.items() if k != "anyOf"}
    out["type"] = [other, "null"]
    return out
