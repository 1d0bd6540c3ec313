"""A reply that is nothing but a list, read as the call it meant: values without the tool's name
(``[2, 3, -4]``), or calls written as strings (``["get_color(blue)"]``).

Qwen2.5-Coder-1.5B, under the pythonic prompt, answered "What's the root of quadratic equation
with coefficients 2, 3 and -4?" with ``[2, 3, -4]``, "Sort this list of names: ['Sam',
'Alice', 'Jack']" with ``['Alice', 'Jack', 'Sam']`` and "disconnect wifi, using the command
netsh wlan disconnect" with ``[netsh wlan disconnect]``: 5 of its 300 BFCL replies, each
returned as the answer and each wrong. It wrote the arguments of the call it meant.

Such a reply is a call gone wrong when its values fit an offered tool: in order, as the tool's
leading parameters (every required one among them, each value of its parameter's type); or
as the items of one of its array parameters (the only required one, if any is). It is then
re-asked with the tools it fits and how (``'solve_quadratic_equation' with a=2, b=3, c=-4``),
and the model may still answer in text. A list that fits no tool stays the answer: ``[1.0]``
to "How many kilograms are in a pound?", with only ``portfolio_returns(initial_investment,
ending_value)`` offered (the 1.5B wrote three such answers to BFCL's no-tool questions, and no
offered tool fits any of them). The reply must be the list alone: a list inside prose is data.

A list whose every item is a call written as a string is those calls, whatever their names:
the 1.5B answered "What colour do blue and yellow make?", only ``get_weather`` offered, with
``["get_color(blue)", "get_color(yellow)"]``. A call to an offered tool reads as it; one to a
tool that is not offered is re-asked, the correction naming the tools there are (inside prose,
only calls to offered tools are read from strings: there a list of code is data).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from typing import Any

from toolshim.dialects.calls import ParsedCall, ToolIndex
from toolshim.dialects.python_calls import interpret_python

__all__ = ["lone_list_calls"]

MAX_LIST = 4096
"""Longer lists are data: a call's values are short."""

MAX_FITS = 3
"""Tools named in the re-ask, at most."""

_WORDS = re.compile(r"[^\[\]{}()<>=:\"'`\n]+")
"""Bare words in brackets: ``[netsh wlan disconnect]``, ``[link my account, hello]``."""

_QUOTED_CALL = re.compile(r"\s*[A-Za-z_][\w.\-]*\s*\(.*\)\s*", re.DOTALL)

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "float": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


def lone_list_calls(candidate: str, index: ToolIndex) -> tuple[ParsedCall, ...] | None:
    """The calls ``candidate`` (a whole reply, a closed ``[...]``) means: its quoted calls, or
    one nameless call whose problem says which offered tools its values fit; None for data."""
    items = _items(candidate)
    if not items:
        return None
    if all(isinstance(i, str) and _QUOTED_CALL.fullmatch(i) for i in items):
        return _quoted_calls(items, index)
    nameless = _nameless_call(candidate, items, index)
    return None if nameless is None else (nameless,)


def _quoted_calls(items: list[str], index: ToolIndex) -> tuple[ParsedCall, ...] | None:
    calls: list[ParsedCall] = []
    for item in items:
        meaning = interpret_python(item, index, require_known=False)
        if len(meaning.calls) != 1:
            return None
        call = meaning.calls[0]
        if index.resolve(call.name) is None:  # named as unknown, not as badly called
            call = ParsedCall(call.name, call.arguments or {}, item)
        calls.append(call)
    return tuple(calls)


def _nameless_call(candidate: str, items: list[Any], index: ToolIndex) -> ParsedCall | None:
    fits = [f for name in index.tools if (f := _fit(index, name, items)) is not None]
    if not fits:
        return None
    meant = " or ".join(
        f"{name!r} with " + ", ".join(f"{k}={_shown(v)}" for k, v in arguments.items())
        for name, arguments in fits[:MAX_FITS]
    )
    shown = " ".join(candidate.split())
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    problem = (
        f"your reply {shown} gives values but names no tool and no parameter; if you meant to "
        f"call {meant}, write that call the way the format below says"
    )
    return ParsedCall("", None, candidate, problem)


def _items(candidate: str) -> list[Any] | None:
    text = candidate.strip()
    if len(text) > MAX_LIST or not (text.startswith("[") and text.endswith("]")):
        return None
    for read in (json.loads, ast.literal_eval):
        try:
            value = read(text)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
        return value if isinstance(value, list) else None
    inner = text[1:-1].strip()
    if not inner or _WORDS.fullmatch(inner) is None:
        return None
    words = [w.strip() for w in inner.split(",")]
    return words if all(words) else None


def _fit(index: ToolIndex, name: str, items: list[Any]) -> tuple[str, dict[str, Any]] | None:
    """How ``items`` fill the tool's parameters: in order, or as one array's items."""
    order = index.parameter_order(name)
    required = set(index.tools[name].required)
    if required and len(required) <= len(items) <= len(order):
        leading = order[: len(items)]
        if required <= set(leading) and all(
            _accepts(index.parameter_type(name, p), v) for p, v in zip(leading, items, strict=True)
        ):
            return name, dict(zip(leading, items, strict=True))
    for parameter in order:
        if index.parameter_type(name, parameter) != "array" or not required <= {parameter}:
            continue
        spec = index.parameters(name).get(parameter)
        inner = spec.get("items") if isinstance(spec, Mapping) else None
        kind = inner.get("type") if isinstance(inner, Mapping) else None
        if all(_accepts(kind if isinstance(kind, str) else None, v) for v in items):
            return name, {parameter: items}
    return None


def _accepts(kind: str | None, value: Any) -> bool:
    """Whether ``value`` is of JSON-Schema type ``kind`` (any value when it is unknown)."""
    types = _TYPES.get(kind) if kind is not None else None
    if types is None:
        return True
    if isinstance(value, bool):
        return kind == "boolean"
    return isinstance(value, types)


def _shown(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
