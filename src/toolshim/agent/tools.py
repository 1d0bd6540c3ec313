"""Tools from Python functions: name, description and JSON Schema from the signature, validation.

A function becomes a :class:`Tool` with :func:`tool` (a decorator, with or without options)
or :meth:`Tool.from_function`. The arguments schema comes from the signature: type hints
(``str``, ``int``, ``float``, ``bool``, ``list[...]``, ``dict[...]``, ``X | None``,
``Literal``, ``Enum``, pydantic models, dataclasses, TypedDicts), defaults, descriptions given
as ``Annotated[T, "text"]`` or ``Annotated[T, Field(description=...)]``, and the docstring's
parameter sections (Google, NumPy and reST styles). Arguments a model sends are validated by a
pydantic model generated from the same signature, in strict mode on their JSON: JSON ``true``
never reaches an ``int`` parameter, ``"7"`` never becomes ``7`` and an unknown argument is
never dropped; only what JSON cannot say is converted (an ISO date string for a ``date``, a
value for an ``Enum``, an array for a ``tuple``, a number for a ``float``). So a function is
never called with arguments that do not fit it; :meth:`Tool.check` returns the problem as data,
worded for the model (it goes back to the model as the call's error result).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import re
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

import docstring_parser
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.errors import PydanticSchemaGenerationError, PydanticUserError
from pydantic.fields import FieldInfo
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaWarningKind
from pydantic_core import PydanticSerializationError

from toolshim.errors import ConfigError
from toolshim.types import ToolSpec

__all__ = ["CheckedArguments", "Tool", "tool"]

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_MAX_REPORTED_ERRORS = 5


@dataclass(frozen=True, slots=True)
class CheckedArguments:
    """The outcome of checking a model's arguments: the call to make, or what was wrong."""

    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] | None = None
    normalized: str = "{}"
    """Canonical JSON of the arguments (defaults filled, keys sorted): equal calls compare equal."""
    problem: str | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None


@dataclass(frozen=True, slots=True)
class _Parameter:
    name: str
    field: str
    positional_only: bool


class Tool:
    """A Python function the model may call. Calling the tool calls the function unchanged."""

    def __init__(
        self,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
    ) -> None:
        self.function = function
        self.name: str = name or str(getattr(function, "__name__", ""))
        if not _NAME.match(self.name):
            raise ConfigError(
                f"cannot use {self.name!r} as a tool name: names may use only letters, digits, "
                "'_' and '-' (at most 64); pass name=... to tool()",
                param="name",
            )
        self.is_async = _is_async(function)
        doc = docstring_parser.parse(inspect.getdoc(function) or "")
        self.description = description if description is not None else _description(doc)
        self._parameters, self._model = _arguments_model(function, self.name, doc)
        self.parameters: dict[str, Any] = _schema(self._model, self.name)

    @classmethod
    def from_function(cls, function: Callable[..., Any] | Tool, *, name: str | None = None) -> Tool:
        """``function`` as a tool (a Tool is returned as it is unless renamed)."""
        if isinstance(function, Tool):
            return function if name in (None, function.name) else function.renamed(str(name))
        if not callable(function):
            raise ConfigError(f"a tool must be a function, not {type(function).__name__}")
        return cls(function, name=name)

    def renamed(self, name: str) -> Tool:
        return Tool(self.function, name=name, description=self.description)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)

    def to_openai(self) -> dict[str, Any]:
        """The tool as an OpenAI ``tools[]`` entry."""
        return self.spec.to_openai()

    @property
    def parameter_names(self) -> list[str]:
        return [p.name for p in self._parameters]

    def check(self, arguments: Any) -> CheckedArguments:
        """Validate and convert a model's arguments (a JSON object or JSON text)."""
        if isinstance(arguments, str):
            text = arguments.strip()
            try:
                arguments = json.loads(text) if text else {}
            except ValueError as exc:
                return CheckedArguments(
                    normalized=text,
                    problem=f"the arguments of {self.name!r} are not valid JSON ({exc}); "
                    f"send a JSON object that matches the schema {self._schema_text()}",
                )
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, Mapping):
            return CheckedArguments(
                normalized=_canonical(arguments),
                problem=f"the arguments of {self.name!r} must be a JSON object, not "
                f"{type(arguments).__name__}; its schema is {self._schema_text()}",
            )
        unknown = [key for key in arguments if key not in self.parameter_names]
        try:
            validated = self._validate(arguments)
            errors: list[Any] = []
        except ValidationError as exc:
            errors = list(exc.errors())
        if errors or unknown:
            return CheckedArguments(
                normalized=_canonical(arguments), problem=self._explain(errors, unknown)
            )
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for parameter in self._parameters:
            value = getattr(validated, parameter.field)
            if parameter.positional_only:
                args.append(value)
            else:
                kwargs[parameter.name] = value
        try:
            normalized = _canonical(validated.model_dump(mode="json", by_alias=True))
        except PydanticSerializationError:
            normalized = _canonical(arguments)
        return CheckedArguments(tuple(args), kwargs, normalized)

    async def invoke(self, checked: CheckedArguments) -> Any:
        """Call the function with checked arguments: async ones on the loop, sync ones in a thread."""
        if not checked.ok or checked.kwargs is None:
            raise ConfigError(f"{self.name!r} cannot be called: {checked.problem}")
        call = functools.partial(self.function, *checked.args, **checked.kwargs)
        result = call() if self.is_async else await asyncio.to_thread(call)
        if inspect.isawaitable(result):
            result = await result
        return result

    def _validate(self, arguments: Mapping[str, Any]) -> BaseModel:
        """Strict validation of the arguments' JSON (Python values that have no JSON form, from
        a direct call, are validated strictly as they are)."""
        try:
            text = json.dumps(dict(arguments))
        except (TypeError, ValueError):
            return self._model.model_validate(dict(arguments), strict=True)
        return self._model.model_validate_json(text, strict=True)

    def _explain(self, errors: Sequence[Any], unknown: Sequence[str]) -> str:
        problems = []
        for error in errors[:_MAX_REPORTED_ERRORS]:
            where = ".".join(str(part) for part in error["loc"]) or "arguments"
            if error["type"] == "missing":
                problems.append(f"{where}: required, but missing")
            else:
                problems.append(f"{where}: {error['msg']} (got {_shown(error['input'])})")
        more = len(errors) - _MAX_REPORTED_ERRORS
        if more > 0:
            problems.append(f"and {more} more")
        text = f"the arguments of {self.name!r} are invalid"
        if problems:
            text += ": " + "; ".join(problems)
        if unknown:
            text += (
                f"{'.' if problems else ':'} Unknown argument(s) "
                f"{', '.join(repr(k) for k in unknown)}; the parameters "
                f"are {', '.join(repr(n) for n in self.parameter_names) or '(none)'}"
            )
        return f"{text}. Its arguments schema is {self._schema_text()}"

    def _schema_text(self) -> str:
        return json.dumps(self.parameters, ensure_ascii=False)


@overload
def tool(function: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *, name: str | None = None, description: str | None = None
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a function a tool: ``@tool`` or ``@tool(name=..., description=...)``.

    >>> @tool
    ... def get_weather(city: str, units: Literal["c", "f"] = "c") -> str:
    ...     '''Current weather in a city.
    ...
    ...     Args:
    ...         city: The city name, e.g. "Paris".
    ...     '''
    ...     return f"18 degrees {units} in {city}"
    >>> get_weather("Paris")                                         # still a plain function
    '18 degrees c in Paris'
    >>> get_weather.parameters["properties"]["city"]["description"]
    'The city name, e.g. "Paris".'
    """
    if function is not None:
        return Tool(function, name=name, description=description)

    def decorate(fn: Callable[..., Any]) -> Tool:
        return Tool(fn, name=name, description=description)

    return decorate


def _is_async(function: Callable[..., Any]) -> bool:
    """True for ``async def`` functions, partials of them, and objects with an async ``__call__``."""
    if inspect.iscoroutinefunction(function):
        return True
    return not inspect.isroutine(function) and inspect.iscoroutinefunction(type(function).__call__)


# -- description and schema ---------------------------------------------------------------------


def _description(doc: docstring_parser.Docstring) -> str:
    parts = [p.strip() for p in (doc.short_description, doc.long_description) if p and p.strip()]
    return "\n\n".join(parts)


def _arguments_model(
    function: Callable[..., Any], tool_name: str, doc: docstring_parser.Docstring
) -> tuple[tuple[_Parameter, ...], type[BaseModel]]:
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
    parameters: list[_Parameter] = []
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
        parameters.append(_Parameter(name, field, parameter.kind is parameter.POSITIONAL_ONLY))
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


def _schema(model: type[BaseModel], tool_name: str) -> dict[str, Any]:
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


def _shown(value: Any) -> str:
    """A value as the model wrote it: JSON (``true``, ``"7"``), not Python's repr."""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def _canonical(value: Any) -> str:
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return repr(value)
