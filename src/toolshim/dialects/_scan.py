"""Low-level, I/O-free scanning: bracket matching that understands strings, and value decoding.

The common regex of prompt-tool designs (``\\{[^{}]*(?:\\{[^{}]*\\}[^{}]*)*\\}``) cannot see
objects nested deeper than one level, nor braces inside strings. :func:`find_close` walks the
text once, keeping a stack of open brackets and skipping over quoted strings, so it finds the
true end of ``{"a": {"b": {"c": "}"}}}``.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

import json_repair

__all__ = [
    "IDENTIFIER",
    "decode_value",
    "find_close",
    "literal",
]

_OPEN = {"{": "}", "[": "]", "(": ")"}
_CLOSE = frozenset("}])")
# After one of these (ignoring spaces) a single quote opens a string rather than being prose.
_VALUE_START = frozenset("{[(,:=")
IDENTIFIER = re.compile(r"[A-Za-z_][\w.\-]*")


def find_close(text: str, start: int) -> int:
    """Index just past the bracket that closes ``text[start]``, or -1 if it is not closed yet.

    ``text[start]`` must be one of ``{ [ (``. Strings in double quotes are always skipped;
    single-quoted strings are skipped where a value may start (after ``{ [ ( , : =``), so an
    apostrophe in a word does not open a string. A closer of the wrong kind closes the
    innermost bracket anyway (models mismatch brackets; json-repair cleans up afterwards).
    """
    depth = 0
    i = start
    n = len(text)
    last = ""  # last non-space character outside strings
    while i < n:
        ch = text[i]
        if ch == '"' or (ch == "'" and last in _VALUE_START):
            i = _skip_string(text, i)
            if i < 0:
                return -1
            last = ch
            continue
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
            if depth == 0:
                return i + 1
        if not ch.isspace():
            last = ch
        i += 1
    return -1


def _skip_string(text: str, start: int) -> int:
    """Index just past the string opened at ``start``, or -1 if it is not closed."""
    quote = text[start]
    i = start + 1
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == quote:
            return i + 1
        if ch == "\n" and quote == "'":
            # A single-quoted string does not span lines: it was an apostrophe after all.
            return i
        i += 1
    return -1


def decode_value(text: str) -> tuple[Any, bool] | None:
    """Decode a JSON-ish value; returns ``(value, repaired)`` or None when nothing sensible came out.

    Tries strict JSON, then a Python literal (single quotes, True/None), then json-repair
    (trailing commas, unclosed braces, missing quotes).
    """
    stripped = text.strip()
    if not stripped:
        return None
    try:
        return json.loads(stripped), False
    except ValueError:
        pass
    try:
        value = ast.literal_eval(stripped)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    else:
        if isinstance(value, (dict, list)):
            return _jsonable(value), True
    try:
        repaired = json_repair.loads(stripped)
    except Exception:  # json-repair has no exception contract of its own
        return None
    if repaired == "" or repaired is None:
        return None
    return repaired, True


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v) for v in value]
    return value


_NAME_LITERALS = {"true": True, "false": False, "null": None, "none": None}


def literal(node: ast.AST) -> Any:
    """The value of a literal expression node; JSON's true/false/null are accepted as names.

    Raises ValueError for anything that is not a literal (a variable, a call, an operator).
    """
    if isinstance(node, ast.Name):
        key = node.id.lower()
        if key in _NAME_LITERALS:
            return _NAME_LITERALS[key]
        raise ValueError(f"{node.id!r} is a name, not a value")
    if isinstance(node, ast.Dict):
        return {
            str(literal(k)) if k is not None else "": literal(v)
            for k, v in zip(node.keys, node.values, strict=True)
        }
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [literal(e) for e in node.elts]
    try:
        return _jsonable(ast.literal_eval(node))
    except (ValueError, SyntaxError, TypeError) as exc:
        raise ValueError(f"not a literal value: {ast.unparse(node)}") from exc
