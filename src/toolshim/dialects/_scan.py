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
    "BracketScan",
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
    return BracketScan(start).run(text)


_SPECIAL = re.compile(r"""[{}\[\]()"']""")
_IN_DOUBLE = re.compile(r'[\\"]')
_IN_SINGLE = re.compile(r"[\\'\n]")


class BracketScan:
    """A resumable :func:`find_close`: call :meth:`run` again as the text grows.

    It jumps between interesting characters with regular expressions, so a long string
    argument streamed in many small pieces costs linear time overall, not quadratic.
    """

    __slots__ = ("depth", "end", "last", "pos", "quote", "start")

    def __init__(self, start: int) -> None:
        self.start = start
        self.end = -1
        self.pos = start
        self.depth = 0
        self.last = ""  # last non-space character outside strings
        self.quote = ""  # the quote of the string being scanned, if any

    def run(self, text: str) -> int:
        """Index just past the closing bracket, or -1 if ``text`` does not contain it yet."""
        if self.end >= 0:
            return self.end
        pos = self.pos
        n = len(text)
        while pos < n:
            if self.quote:
                m = (_IN_DOUBLE if self.quote == '"' else _IN_SINGLE).search(text, pos)
                if m is None:
                    pos = n
                    break
                i = m.start()
                ch = text[i]
                if ch == "\\":
                    if i + 1 >= n:
                        pos = i  # the escaped character has not arrived yet
                        break
                    pos = i + 2
                    continue
                # A closing quote; or a newline, which ends a single-quoted "string" that was an
                # apostrophe after all.
                self.last = self.quote
                self.quote = ""
                pos = i + 1 if ch != "\n" else i
                continue
            m = _SPECIAL.search(text, pos)
            end = m.start() if m is not None else n
            if end > pos:
                tail = text[pos:end].rstrip()
                if tail:
                    self.last = tail[-1]
            if m is None:
                pos = n
                break
            ch = text[end]
            pos = end + 1
            if ch == '"' or (ch == "'" and self.last in _VALUE_START):
                self.quote = ch
                continue
            self.last = ch
            if ch in _OPEN:
                self.depth += 1
            elif ch in _CLOSE:
                self.depth -= 1
                if self.depth <= 0:
                    self.pos = self.end = pos
                    return pos
        self.pos = pos
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
