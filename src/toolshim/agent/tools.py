"""Tools: Python functions, or a JSON Schema with a callable; arguments checked before any call.

A function becomes a :class:`Tool` with :func:`tool` (a decorator, with or without options)
or :meth:`Tool.from_function`; its arguments schema comes from the signature
(:mod:`toolshim.agent.signature`). Arguments a model sends are validated by a pydantic model
generated from the same signature, in strict mode on their JSON: JSON ``true`` never reaches an
``int`` parameter, ``"7"`` never becomes ``7`` and an unknown argument is never dropped; only
what JSON cannot say is converted (an ISO date string for a ``date``, a value for an ``Enum``,
an array for a ``tuple``, a number for a ``float``). So a function is never called with
arguments that do not fit it; :meth:`Tool.check` returns the problem as data, worded for the
model (it goes back to the model as the call's error result).

A tool whose schema already exists (an MCP server's ``inputSchema``, an OpenAI ``tools[]``
entry) is built with :meth:`Tool.from_schema`: the schema reaches the model exactly as given,
the model's arguments are checked against it (:mod:`toolshim.schemas`: local references only,
bounded work), and the callable gets them as one ``dict``. A tool may return a
:class:`ToolResult` to say what the model reads, keep structured data beside it, or report an
error the model must see as one.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

import docstring_parser
from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError, to_json

import toolshim.agent.signature as signature
from toolshim.agent.signature import is_async
from toolshim.errors import ConfigError, ToolshimError
from toolshim.schemas import checker
from toolshim.types import ToolSpec

__all__ = ["CheckedArguments", "Tool", "ToolResult", "tool"]

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
class ToolResult:
    """A tool's result with its structure kept: the text the model reads, the data, an error.

    ``text`` is what the model reads; when it is empty, ``data`` as JSON is. ``is_error``
    makes the call an error result (the model is told the call failed and must say so).
    """

    text: str = ""
    data: Any = None
    """Structured content (JSON-ready), e.g. an MCP tool's ``structuredContent``."""
    is_error: bool = False

    @property
    def model_text(self) -> str:
        """The text the model reads for this result."""
        if self.text or self.data is None:
            return self.text
        return to_json(self.data, fallback=str).decode("utf-8")


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
        self.name: str = _checked_name(name or str(getattr(function, "__name__", "")))
        self.is_async = is_async(function)
        doc = docstring_parser.parse(inspect.getdoc(function) or "")
        self.description = description if description is not None else signature.description(doc)
        self._parameters, self._model = signature.arguments_model(function, self.name, doc)
        self.parameters: dict[str, Any] = signature.schema(self._model, self.name)

    @classmethod
    def from_function(cls, function: Callable[..., Any] | Tool, *, name: str | None = None) -> Tool:
        """``function`` as a tool (a Tool is returned as it is unless renamed)."""
        if isinstance(function, Tool):
            return function if name in (None, function.name) else function.renamed(str(name))
        if not callable(function):
            raise ConfigError(f"a tool must be a function, not {type(function).__name__}")
        return cls(function, name=name)

    @classmethod
    def from_schema(
        cls,
        name: str,
        parameters: Mapping[str, Any],
        function: Callable[[dict[str, Any]], Any],
        *,
        description: str = "",
    ) -> Tool:
        """A tool from a JSON Schema: ``function`` (sync or async) is called with the model's
        arguments as one ``dict``, after they were checked against ``parameters``.

        >>> echo = Tool.from_schema(
        ...     "echo",
        ...     {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        ...     lambda arguments: arguments["text"],
        ...     description="Say the text back.",
        ... )
        >>> echo.check({"text": 7}).problem.split(". Its")[0]
        "the arguments of 'echo' are invalid: text: 7 is not of type 'string'"
        """
        return SchemaTool(name, parameters, function, description=description)

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
        arguments = self._object(arguments)
        if isinstance(arguments, CheckedArguments):
            return arguments
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

    def _object(self, arguments: Any) -> Mapping[str, Any] | CheckedArguments:
        """A model's arguments decoded to the JSON object they must be (JSON text decoded,
        nothing read as no arguments), or the refusal that says what is wrong with them."""
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
        return arguments

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


class SchemaTool(Tool):
    """A tool whose JSON Schema is given (see :meth:`Tool.from_schema`); the schema is kept whole."""

    def __init__(
        self,
        name: str,
        parameters: Mapping[str, Any],
        function: Callable[[dict[str, Any]], Any],
        *,
        description: str = "",
    ) -> None:
        if not callable(function):
            raise ConfigError(f"tool {name!r}: the callable is {type(function).__name__}")
        if not isinstance(parameters, Mapping):
            raise ConfigError(
                f"tool {name!r}: its schema must be a JSON object, not {parameters!r}"
            )
        self.function = function
        self.name = _checked_name(name)
        self.description = description
        self.is_async = is_async(function)
        self.parameters = dict(parameters)
        self._parameters = ()

    def renamed(self, name: str) -> Tool:
        return SchemaTool(name, self.parameters, self.function, description=self.description)

    def __repr__(self) -> str:
        return f"Tool.from_schema({self.name!r})"

    @property
    def parameter_names(self) -> list[str]:
        properties = self.parameters.get("properties")
        return list(properties) if isinstance(properties, Mapping) else []

    def check(self, arguments: Any) -> CheckedArguments:
        """Decode the arguments and check them against the schema (an unusable schema, or one
        too costly to check, lets them through: the tool itself then judges them)."""
        arguments = self._object(arguments)
        if isinstance(arguments, CheckedArguments):
            return arguments
        normalized = _canonical(arguments)
        problems = self._problems(dict(arguments))
        if problems:
            return CheckedArguments(normalized=normalized, problem=self._worded(problems))
        return CheckedArguments((dict(arguments),), {}, normalized)

    def _problems(self, arguments: dict[str, Any]) -> list[str]:
        try:
            found = checker(json.dumps(self.parameters, sort_keys=True))
        except (TypeError, ValueError):
            return []
        if found is None:
            return []
        try:
            errors = found.errors(arguments, name=self.name)
        except (ToolshimError, RecursionError):
            return []
        problems = []
        for error in sorted(errors, key=lambda e: list(map(str, e.absolute_path))):
            where = ".".join(str(part) for part in error.absolute_path) or "arguments"
            problems.append(f"{where}: {error.message}")
        return problems

    def _worded(self, problems: Sequence[str]) -> str:
        shown = list(problems[:_MAX_REPORTED_ERRORS])
        if len(problems) > _MAX_REPORTED_ERRORS:
            shown.append(f"and {len(problems) - _MAX_REPORTED_ERRORS} more")
        return (
            f"the arguments of {self.name!r} are invalid: {'; '.join(shown)}. "
            f"Its arguments schema is {self._schema_text()}"
        )


def _checked_name(name: str) -> str:
    if not _NAME.match(name):
        raise ConfigError(
            f"cannot use {name!r} as a tool name: names may use only letters, digits, "
            "'_' and '-' (at most 64); pass name=... to tool()",
            param="name",
        )
    return name


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
