"""Decide what a decoded JSON value means: calls, a decline, or data.

This is where the shapes of every dialect meet: ``{"name", "arguments"}``, ``{"tool", "args"}``,
OpenAI's ``{"type": "function", "function": {...}}``, ``{"tool_calls": [...]}``, compact's flat
``{"tool": "get_weather", "city": "Paris"}`` and ``{"tool": "none"}``, seed 003's multi-tool
``{"tools": ["getWeather", "getLocation"]}``, and a Python call quoted in a list
(``["get_weather(city='Riga')"]``, read by :mod:`.python_calls`, which reads calls written as
Python). Names are matched to the offered tools despite ``functions.`` prefixes and case
drift; keys are matched regardless of case and spacing.
"""

from __future__ import annotations

import re
from typing import Any

from toolshim.dialects._scan import MAX_DEPTH, RepairBudget, decode_value
from toolshim.dialects.calls import NOT_A_CALL, Interpretation, ParsedCall, ToolIndex, fold_name
from toolshim.dialects.python_calls import quoted_call

__all__ = [
    "ARG_KEYS",
    "NAME_KEYS",
    "NAME_LIST_KEYS",
    "NOT_A_CALL",
    "Interpretation",
    "ParsedCall",
    "ToolIndex",
    "interpret_value",
]

NAME_KEYS = ("name", "function", "tool", "tool_name", "function_name", "toolname")
ARG_KEYS = ("arguments", "parameters", "args", "input", "params", "kwargs", "tool_input")
ENVELOPE_KEYS = ("tool_calls", "function_calls", "calls", "tools")
IGNORED_FLAT_KEYS = frozenset({"type", "id", "index", "call_id"})
"""Keys of a flat call object that are bookkeeping, never arguments."""
RESERVED_KEYS = frozenset(
    {*NAME_KEYS, *ARG_KEYS, *ENVELOPE_KEYS, *IGNORED_FLAT_KEYS, "function_call"}
)
"""Keys a flat call object cannot carry as arguments (they would be read as something else)."""

NAME_LIST_KEYS = (
    *NAME_KEYS,
    *ENVELOPE_KEYS,
    "functions",
    "names",
    "tool_names",
    "function_names",
)
"""Keys that may hold a list of bare tool names: ``{"tools": ["getWeather", "getLocation"]}``."""

_DECLINE_NAMES = frozenset({"none", "null", "no_tool", "no tool", "nothing", ""})
_CALL_ONLY_KEYS = ("tool", "tool_name", "toolname")
"""Name keys that make an object a call even without arguments and with an unknown name."""
_NAME_CHARS = re.compile(r"[\w.\-:/]{1,128}")
_SPOKEN_NAME = re.compile(r"[\w.\-:/' ]{1,64}")


def interpret_value(
    value: Any,
    index: ToolIndex,
    raw: str = "",
    repaired: bool = False,
    *,
    budget: RepairBudget | None = None,
    depth: int = 0,
) -> Interpretation:
    """Interpret a decoded JSON value as calls, a decline, or (NOT_A_CALL) plain data.

    ``budget`` limits json-repair on arguments given as strings (the reply's budget). Calls
    nested more than MAX_DEPTH levels deep in lists and envelopes are data.
    """
    if depth > MAX_DEPTH:
        return NOT_A_CALL
    deeper = depth + 1
    if isinstance(value, list):
        if not value:
            return NOT_A_CALL
        parts = [
            quoted_call(v, index)
            if isinstance(v, str)
            else interpret_value(v, index, raw, repaired, budget=budget, depth=deeper)
            for v in value
        ]
        if all(p.is_call for p in parts):
            return Interpretation(
                tuple(c for p in parts for c in p.calls), declined=all(p.declined for p in parts)
            )
        return NOT_A_CALL
    if not isinstance(value, dict):
        return NOT_A_CALL
    obj = {str(k).strip().lower(): v for k, v in value.items()}

    for key in ENVELOPE_KEYS:
        inner = obj.get(key)
        if isinstance(inner, list) and (key == "tool_calls" or (inner and _all_mappings(inner))):
            if not inner:
                return Interpretation(declined=True)
            sub = interpret_value(inner, index, raw, repaired, budget=budget, depth=deeper)
            if sub.is_call:
                return sub
    if isinstance(obj.get("function_call"), dict):
        return interpret_value(
            obj["function_call"], index, raw, repaired, budget=budget, depth=deeper
        )
    listed = _name_list(obj, index, raw, repaired)
    if listed.is_call:
        return listed

    present = [k for k in NAME_KEYS if k in obj]
    name_key = next(
        (k for k in present if isinstance(obj[k], str) and index.resolve(obj[k]) is not None),
        present[0] if present else None,
    )
    if name_key is None:
        named = obj.get("type")
        if not isinstance(named, str) or index.resolve(named) is None:
            return NOT_A_CALL
        name_key = "type"  # {"type": "calculator", "arguments": {...}} (Granite)
    name_value = obj[name_key]
    if isinstance(name_value, dict):  # OpenAI shape: {"type": "function", "function": {...}}
        inner = dict(name_value)
        beside = next((k for k in ARG_KEYS if k in obj), None)
        if beside is not None and not any(str(k).strip().lower() in ARG_KEYS for k in inner):
            inner[beside] = obj[beside]  # the arguments misplaced beside "function"
        return interpret_value(inner, index, raw, repaired, budget=budget, depth=deeper)
    if not isinstance(name_value, str):
        return NOT_A_CALL
    known = index.resolve(name_value)
    if known is None and name_key != "name" and name_value.strip().lower() in _DECLINE_NAMES:
        if repaired and not name_value.strip():
            return NOT_A_CALL  # json-repair made {"tool": ""} out of prose such as "{tool}"
        return Interpretation(declined=True)

    arg_key = next((k for k in ARG_KEYS if k in obj), None)
    name = index.canonical(name_value)
    if _NAME_CHARS.fullmatch(name) is None and not _named_call_shape(name, obj, arg_key):
        return NOT_A_CALL
    if arg_key is not None:
        arguments, problem = _arguments(obj[arg_key], budget)
        if problem is None and "description" in obj and _looks_like_schema(arguments):
            problem = (
                f"you repeated the definition of {name!r} instead of calling it; "
                "give the argument values, not their schema"
            )
        if known is not None and isinstance(arguments, dict):
            arguments = match_keys(arguments, index, known)
        return Interpretation((ParsedCall(name, arguments, raw, problem, repaired),))
    flat = {
        str(k).strip(): v
        for k, v in value.items()
        if str(k).strip().lower() not in (name_key, *IGNORED_FLAT_KEYS)
    }
    if known is not None:
        return Interpretation(
            (ParsedCall(known, match_keys(flat, index, known), raw, None, repaired),)
        )
    if name_key in _CALL_ONLY_KEYS:
        # {"tool": "x", ...} is only ever a call; {"name": "Ada", "age": 3} is data.
        return Interpretation((ParsedCall(name, flat, raw, None, repaired),))
    return NOT_A_CALL


def _named_call_shape(name: str, obj: dict[str, Any], arg_key: str | None) -> bool:
    """``{"name": "thank you", "arguments": {…}}``: a name no tool could have, in the exact
    shape of a call. It is one (with an unknown tool, for the re-ask): a small model asked
    something no tool fits writes this rather than an answer, and as text it would reach the
    user as call JSON."""
    return (
        arg_key is not None
        and isinstance(obj[arg_key], dict)
        and _SPOKEN_NAME.fullmatch(name) is not None
    )


def _name_list(obj: dict[str, Any], index: ToolIndex, raw: str, repaired: bool) -> Interpretation:
    """Seed 003's multi-tool syntax: an object whose only key (bookkeeping aside) holds a list
    of bare tool names, ``{"tools": ["getWeather", "getLocation"]}``: one call without
    arguments per name, in order.

    Data must stay data (``{"tools": ["hammer", "saw"]}``), so every item must be a name-shaped
    string and at least half of them offered tools; the others come back as calls with their
    unknown names, for the re-ask.
    """
    keys = [k for k in obj if k not in IGNORED_FLAT_KEYS]
    if len(keys) != 1 or keys[0] not in NAME_LIST_KEYS:
        return NOT_A_CALL
    items = obj[keys[0]]
    if not isinstance(items, list) or not items or not all(isinstance(i, str) for i in items):
        return NOT_A_CALL
    names = [index.canonical(item) for item in items]
    if any(_NAME_CHARS.fullmatch(name) is None for name in names):
        return NOT_A_CALL
    known = sum(index.resolve(item) is not None for item in items)
    if known == 0 or 2 * known < len(items):
        return NOT_A_CALL
    return Interpretation(tuple(ParsedCall(name, {}, raw, None, repaired) for name in names))


def match_keys(arguments: dict[str, Any], index: ToolIndex, tool: str) -> dict[str, Any]:
    """Rename argument keys that differ from the schema's only in case or ``-``/``_``."""
    names = index.parameter_order(tool)
    if not names or all(k in names for k in arguments):
        return arguments
    folded = {fold_name(n): n for n in names}
    out: dict[str, Any] = {}
    for key, value in arguments.items():
        target = key if key in names else folded.get(fold_name(key), key)
        if target in out or (target != key and target in arguments):
            target = key
        out[target] = value
    return out


def _all_mappings(items: list[Any]) -> bool:
    return all(isinstance(i, dict) for i in items)


def _looks_like_schema(arguments: Any) -> bool:
    return (
        isinstance(arguments, dict)
        and arguments.get("type") == "object"
        and isinstance(arguments.get("properties"), dict)
    )


def _arguments(value: Any, budget: RepairBudget | None) -> tuple[Any, str | None]:
    if value is None:
        return {}, None
    if isinstance(value, str):
        if not value.strip():
            return {}, None
        decoded = decode_value(value, budget=budget)
        if decoded is None or not isinstance(decoded[0], dict):
            return value, "the arguments are not a JSON object"
        return decoded[0], None
    if isinstance(value, dict):
        return dict(value), None
    return value, f"the arguments must be a JSON object, not {type(value).__name__}"
