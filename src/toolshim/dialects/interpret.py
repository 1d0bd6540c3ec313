"""Decide what a decoded JSON value or a Python call expression means: calls, a decline, or data.

This is where the shapes of every dialect meet: ``{"name", "arguments"}``, ``{"tool", "args"}``,
OpenAI's ``{"type": "function", "function": {...}}``, ``{"tool_calls": [...]}``, compact's flat
``{"tool": "get_weather", "city": "Paris"}`` and ``{"tool": "none"}``, Python-style calls.
Names are matched to the offered tools despite ``functions.`` prefixes and case drift.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolshim.dialects._scan import decode_value, literal
from toolshim.types import ToolSpec

__all__ = ["Interpretation", "ParsedCall", "ToolIndex", "interpret_python", "interpret_value"]

NAME_KEYS = ("name", "function", "tool", "tool_name", "function_name", "toolname")
ARG_KEYS = ("arguments", "parameters", "args", "input", "params", "kwargs", "tool_input")
_ENVELOPE_KEYS = ("tool_calls", "function_calls", "calls", "tools")
_DECLINE_NAMES = frozenset({"none", "null", "no_tool", "no tool", "nothing", ""})
_PREFIXES = ("functions.", "function.", "tools.", "tool.", "default_api.", "api.")
_IGNORED_FLAT_KEYS = frozenset({"type", "id", "index", "call_id"})


@dataclass(frozen=True, slots=True)
class ParsedCall:
    """A call found in a reply. ``problem`` says what is wrong with it, for the re-ask."""

    name: str
    arguments: Any
    raw: str = ""
    problem: str | None = None
    repaired: bool = False

    @property
    def arguments_json(self) -> str:
        return json.dumps(self.arguments if self.arguments is not None else {}, ensure_ascii=False)


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
    """The offered tools, with tolerant name lookup."""

    def __init__(self, tools: Sequence[ToolSpec]) -> None:
        self.tools = {t.name: t for t in tools if t.is_function}
        self._folded: dict[str, str] = {}
        for name in self.tools:
            self._folded.setdefault(_fold(name), name)

    @property
    def names(self) -> list[str]:
        return list(self.tools)

    def resolve(self, name: str) -> str | None:
        """The offered tool ``name`` refers to, or None. Tolerates prefixes and case drift."""
        name = name.strip().strip("`'\"")
        if name in self.tools:
            return name
        for prefix in _PREFIXES:
            if name.lower().startswith(prefix) and name[len(prefix) :] in self.tools:
                return name[len(prefix) :]
        folded = _fold(name)
        for prefix in _PREFIXES:
            if folded.startswith(_fold(prefix)):
                folded = folded[len(_fold(prefix)) :]
                break
        return self._folded.get(folded)

    def canonical(self, name: str) -> str:
        """The offered tool's name if ``name`` refers to one, else ``name`` without prefixes."""
        resolved = self.resolve(name)
        if resolved is not None:
            return resolved
        name = name.strip().strip("`'\"")
        for prefix in _PREFIXES:
            if name.lower().startswith(prefix):
                return name[len(prefix) :]
        return name

    def parameter_order(self, name: str) -> list[str]:
        tool = self.tools.get(name)
        props = tool.parameters.get("properties") if tool else None
        return list(props) if isinstance(props, Mapping) else []


def _fold(name: str) -> str:
    return name.lower().replace("-", "_").replace(" ", "_")


def interpret_value(
    value: Any, index: ToolIndex, raw: str = "", repaired: bool = False
) -> Interpretation:
    """Interpret a decoded JSON value as calls, a decline, or (NOT_A_CALL) plain data."""
    if isinstance(value, list):
        if not value:
            return NOT_A_CALL
        parts = [interpret_value(v, index, raw, repaired) for v in value]
        if all(p.is_call for p in parts):
            return Interpretation(
                tuple(c for p in parts for c in p.calls), declined=all(p.declined for p in parts)
            )
        return NOT_A_CALL
    if not isinstance(value, Mapping):
        return NOT_A_CALL
    obj = {str(k).strip().lower(): v for k, v in value.items()}

    for key in _ENVELOPE_KEYS:
        inner = obj.get(key)
        if isinstance(inner, list) and (key == "tool_calls" or (inner and _all_mappings(inner))):
            if not inner:
                return Interpretation(declined=True)
            sub = interpret_value(inner, index, raw, repaired)
            if sub.is_call:
                return sub
    if isinstance(obj.get("function_call"), Mapping):
        return interpret_value(obj["function_call"], index, raw, repaired)

    present = [k for k in NAME_KEYS if k in obj]
    name_key = next(
        (k for k in present if isinstance(obj[k], str) and index.resolve(obj[k]) is not None),
        present[0] if present else None,
    )
    if name_key is None:
        return NOT_A_CALL
    name_value = obj[name_key]
    if isinstance(name_value, Mapping):  # OpenAI shape: {"type": "function", "function": {...}}
        return interpret_value(name_value, index, raw, repaired)
    if not isinstance(name_value, str):
        return NOT_A_CALL
    if (
        name_key in ("tool", "tool_name", "function")
        and name_value.strip().lower() in _DECLINE_NAMES
    ):
        return Interpretation(declined=True)

    arg_key = next((k for k in ARG_KEYS if k in obj), None)
    known = index.resolve(name_value)
    name = index.canonical(name_value)
    if not _looks_like_name(name):
        return NOT_A_CALL
    if arg_key is not None:
        arguments, problem = _arguments(obj[arg_key])
        if problem is None and "description" in obj and _looks_like_schema(arguments):
            problem = (
                f"you repeated the definition of {name!r} instead of calling it; "
                "give the argument values, not their schema"
            )
        return Interpretation((ParsedCall(name, arguments, raw, problem, repaired),))
    flat = {
        k: v
        for k, v in value.items()
        if str(k).strip().lower() not in (name_key, *_IGNORED_FLAT_KEYS)
    }
    if known is not None:
        return Interpretation((ParsedCall(known, flat, raw, None, repaired),))
    if name_key != "name":
        # {"tool": "x", ...} is only ever a call; {"name": "Ada", "age": 3} is data.
        return Interpretation((ParsedCall(name, flat, raw, None, repaired),))
    return NOT_A_CALL


def _all_mappings(items: list[Any]) -> bool:
    return all(isinstance(i, Mapping) for i in items)


def _looks_like_name(name: str) -> bool:
    return 0 < len(name) <= 128 and not any(c.isspace() for c in name)


def _looks_like_schema(arguments: Any) -> bool:
    return (
        isinstance(arguments, Mapping)
        and arguments.get("type") == "object"
        and isinstance(arguments.get("properties"), Mapping)
    )


def _arguments(value: Any) -> tuple[Any, str | None]:
    if value is None:
        return {}, None
    if isinstance(value, str):
        if not value.strip():
            return {}, None
        decoded = decode_value(value)
        if decoded is None or not isinstance(decoded[0], Mapping):
            return value, "the arguments are not a JSON object"
        return decoded[0], None
    if isinstance(value, Mapping):
        return dict(value), None
    return value, f"the arguments must be a JSON object, not {type(value).__name__}"


def interpret_python(source: str, index: ToolIndex, *, require_known: bool) -> Interpretation:
    """Interpret Python-style calls: ``[f(a=1), g(b="x")]``, ``f(a=1)``, ``print(f(a=1))``.

    With ``require_known`` every called function must be an offered tool (so that code in an
    answer is not mistaken for calls); otherwise unknown names come back for the re-ask.
    """
    try:
        tree = ast.parse(source.strip(), mode="exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return NOT_A_CALL
    nodes: list[ast.expr] = []
    for stmt in tree.body:
        if not isinstance(stmt, ast.Expr):
            return NOT_A_CALL
        expr = stmt.value
        if isinstance(expr, (ast.List, ast.Tuple)):
            nodes.extend(expr.elts)
        else:
            nodes.append(expr)
    if not nodes:
        return NOT_A_CALL
    calls = []
    for node in nodes:
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "print"
            and len(node.args) == 1
            and isinstance(node.args[0], ast.Call)
        ):
            node = node.args[0]  # Gemma's tool_code: print(get_weather(city="Paris"))
        if not isinstance(node, ast.Call):
            return NOT_A_CALL
        dotted = _dotted(node.func)
        if dotted is None:
            return NOT_A_CALL
        known = index.resolve(dotted)
        if require_known and known is None:
            return NOT_A_CALL
        calls.append(_python_call(node, index.canonical(dotted), index, source))
    return Interpretation(tuple(calls))


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _python_call(node: ast.Call, name: str, index: ToolIndex, raw: str) -> ParsedCall:
    arguments: dict[str, Any] = {}
    problem = None
    order = index.parameter_order(name)
    try:
        for i, arg in enumerate(node.args):
            if i >= len(order):
                problem = f"{name!r} got a positional argument it has no parameter for"
                break
            arguments[order[i]] = literal(arg)
        for kw in node.keywords:
            if kw.arg is None:
                value = literal(kw.value)
                if isinstance(value, Mapping):
                    arguments.update(value)
                continue
            arguments[kw.arg] = literal(kw.value)
    except ValueError as exc:
        problem = f"the arguments of {name!r} must be literal values: {exc}"
    return ParsedCall(name, arguments, raw, problem)
