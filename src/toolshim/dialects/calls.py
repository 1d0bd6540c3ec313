"""What a parse yields: ParsedCall, Interpretation, and ToolIndex (tolerant lookup of offered tools)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolshim.dialects._scan import MAX_DEPTH
from toolshim.types import ToolSpec

__all__ = [
    "MARKUPS",
    "NAME_PREFIXES",
    "NOT_A_CALL",
    "Interpretation",
    "ParsedCall",
    "ToolIndex",
    "fold_name",
    "json_problem",
    "strip_prefix",
]

MARKUPS = frozenset(
    {
        "hermes",
        "qwen3-coder",
        "glm",
        "kimi-k2",
        "deepseek",
        "deepseek-dsml",
        "harmony",
        "llama3-json",
        "pythonic",
        "mistral",
        "function-tag",
        "invoke-xml",
        "gemma",
        "granite",
        "phi4",
        "json",
    }
)
"""The call markups of model families (``docs/formats.md``): every parser reads all of them;
a family's own is read first where a text could be read two ways (a bare name inside
``<tool_call>`` is a GLM call without arguments for ``glm``, a broken Hermes call otherwise)."""

NAME_PREFIXES = ("functions.", "function.", "tools.", "tool.", "default_api.", "api.")
"""Namespaces models put in front of a tool name (OpenAI's ``functions.`` above all)."""


@dataclass(frozen=True, slots=True)
class ParsedCall:
    """A call found in a reply. ``problem`` says what is wrong with it, for the re-ask.

    Arguments that are not JSON values (Python's ``...``, bytes, complex numbers, sets, NaN,
    infinities, nesting deeper than MAX_DEPTH) are a problem of the call, named by
    :func:`json_problem`, whoever builds it: a call without a problem always has JSON
    arguments.
    """

    name: str
    arguments: Any
    raw: str = ""
    problem: str | None = None
    repaired: bool = False
    waits_for: tuple[str, ...] = ()
    """The tools whose calls were written as its arguments (``convert(amount=price("TSLA"))``):
    it needs their results first. Its ``arguments`` are the others; the calls it waits for
    come before it in the reply (:func:`toolshim.dialects.python_calls.interpret_python`)."""

    def __post_init__(self) -> None:
        if self.problem is None:
            problem = json_problem(self.arguments)
            if problem is not None:
                object.__setattr__(self, "problem", problem)

    @property
    def arguments_json(self) -> str:
        """The arguments as strict JSON text (``{}`` for none).

        Raises ValueError when the call has a :attr:`problem` because its arguments are not
        JSON values; a call without a problem always serialises.
        """
        value = self.arguments if self.arguments is not None else {}
        try:
            return json.dumps(value, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            why = self.problem or str(exc)
            raise ValueError(f"the arguments of {self.name!r} are not JSON values: {why}") from exc


@dataclass(frozen=True, slots=True)
class Interpretation:
    """What a value means: calls (possibly none) and whether the model explicitly declined."""

    calls: tuple[ParsedCall, ...] = ()
    declined: bool = False

    @property
    def is_call(self) -> bool:
        return bool(self.calls) or self.declined


NOT_A_CALL = Interpretation()


class ToolIndex:
    """The offered tools, with tolerant name lookup (prefixes, case and ``-``/``.``/``_`` drift)."""

    def __init__(self, tools: Sequence[ToolSpec]) -> None:
        self.tools = {t.name: t for t in tools if t.is_function}
        self._folded: dict[str, str] = {}
        self._argument_types: dict[str, str | None] | None = None
        for name in self.tools:
            self._folded.setdefault(fold_name(name), name)

    @property
    def names(self) -> list[str]:
        return list(self.tools)

    def resolve(self, name: str) -> str | None:
        """The offered tool ``name`` refers to, or None."""
        name = name.strip().strip("`'\"")
        if name in self.tools:
            return name
        bare = strip_prefix(name)
        if bare in self.tools:
            return bare
        return self._folded.get(fold_name(name)) or self._folded.get(fold_name(bare))

    def canonical(self, name: str) -> str:
        """The offered tool's name if ``name`` refers to one, else ``name`` without prefixes."""
        resolved = self.resolve(name)
        if resolved is not None:
            return resolved
        return strip_prefix(name.strip().strip("`'\""))

    def parameters(self, name: str) -> Mapping[str, Any]:
        """The ``properties`` of a tool's parameter schema (empty when unknown)."""
        tool = self.tools.get(name)
        props = tool.parameters.get("properties") if tool else None
        return props if isinstance(props, Mapping) else {}

    def argument_types(self) -> dict[str, str | None]:
        """Every key a call of an offered tool may hold, with its JSON-Schema type (the first
        tool that names a key decides), and the keys of a call object itself."""
        if self._argument_types is None:
            found: dict[str, str | None] = {"name": "string", "arguments": "object"}
            found["parameters"] = "object"
            for tool in self.tools:
                for key in self.parameters(tool):
                    found.setdefault(key, self.parameter_type(tool, key))
            self._argument_types = found
        return self._argument_types

    def parameter_order(self, name: str) -> list[str]:
        return list(self.parameters(name))

    def parameter_type(self, name: str, parameter: str) -> str | None:
        """The JSON-Schema type of one parameter (the first non-null one of a union), if known."""
        spec = self.parameters(name).get(parameter)
        if not isinstance(spec, Mapping):
            return None
        kind = spec.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), None)
        if kind is None and isinstance(spec.get("enum"), list) and spec["enum"]:
            return "string" if all(isinstance(v, str) for v in spec["enum"]) else None
        return kind if isinstance(kind, str) else None


def json_problem(arguments: Any) -> str | None:
    """Why ``arguments`` is not made of JSON values, naming where; None when it is.

    JSON values are None, booleans, integers, finite floats, strings, lists and dicts with
    string keys, nested at most MAX_DEPTH levels. Checked without recursion.
    """
    todo: list[tuple[Any, str, int]] = [(arguments, "", 0)]
    while todo:
        value, path, depth = todo.pop()
        if value is None or isinstance(value, (bool, int, str)):
            continue
        where = f"the argument {path}" if path else "the arguments"
        if isinstance(value, float):
            if math.isfinite(value):
                continue
            return f"{where} is {_NON_FINITE[str(value)]}, {_NOT_JSON}"
        if not isinstance(value, (dict, list, tuple)):
            return f"{where} is {_describe(value)}, {_NOT_JSON}"
        if depth >= MAX_DEPTH:
            return f"{where} nests lists and objects more than {MAX_DEPTH} levels deep"
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    verb = "has" if path else "have"
                    return f"{where} {verb} the key {key!r}, which is not a string"
                todo.append((item, f"{path}[{key!r}]" if path else repr(key), depth + 1))
        else:
            todo.extend((item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value))
    return None


_NOT_JSON = "which is not a JSON value (use a string, number, true, false, null, list or object)"
_NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def _describe(value: Any) -> str:
    if value is Ellipsis:
        return "... (Python's Ellipsis)"
    if isinstance(value, (set, frozenset)):
        return "a set"
    shown = repr(value)
    if len(shown) > 40:
        shown = shown[:37] + "..."
    if isinstance(value, (bytes, bytearray)):
        return f"the bytes {shown}"
    if isinstance(value, complex):
        return f"the complex number {shown}"
    return f"a Python {type(value).__name__} ({shown})"


def strip_prefix(name: str) -> str:
    low = name.lower()
    for prefix in NAME_PREFIXES:
        if low.startswith(prefix) and len(name) > len(prefix):
            return name[len(prefix) :]
    return name


def fold_name(name: str) -> str:
    """A name less its drift: case, and ``-``, ``.`` or a space for ``_`` (BFCL's tools are
    ``us_economy.gdp_by_state_year`` renamed ``us_economy_gdp_by_state_year`` for the API,
    and the 1.5B writes the dotted name back, re-asked or not)."""
    return name.lower().replace("-", "_").replace(".", "_").replace(" ", "_")
