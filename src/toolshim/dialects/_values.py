"""Argument values written as text, typed by the tool's schema; Gemma's dicts; quote repair.

Markup formats (Qwen3-Coder's ``<parameter=…>``, GLM's ``<arg_value>``, ``<invoke>``'s
``<parameter name=…>``, Gemma's ``{key:value}``) carry every value as text. The schema says
what it is: a ``string`` parameter keeps its text verbatim (spaces and quotes included; in
formats whose template pads values, one newline or space at each end separates it from its
tags); ``integer``, ``number``,
``boolean``, ``array`` and ``object`` parameters are decoded from JSON or Python literals
(``['a', 'b']``, ``{'k': 1}``, ``True``, ``14``). Without a schema, text that reads as a JSON
value is that value and anything else stays a string.

:func:`repair_quotes` fixes a JSON object whose string values hold unescaped double quotes
(``{"command": "echo "hi""}``), when the schema names the keys, so the intent is clear.

Every function here is linear in its input and never raises on any text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from toolshim.dialects._scan import MAX_DEPTH, RepairBudget, decode_value
from toolshim.dialects.calls import ToolIndex

__all__ = ["gemma_arguments", "parameter_value", "repair_quotes", "typed_arguments"]

_TRUE = frozenset({"true", "yes", "1", "on"})
_FALSE = frozenset({"false", "no", "0", "off"})
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")


def parameter_value(
    text: str, kind: str | None, budget: RepairBudget | None = None, *, padded: bool = True
) -> Any:
    """One value written as text, read as the schema's ``kind`` says (None: unknown).

    ``padded``: the format separates a value from its tags with one newline or space at each
    end (Qwen3-Coder's template writes ``<parameter=k>\nvalue\n</parameter>``), dropped
    wherever it is. Formats that write ``<parameter name="k">value</parameter>`` (DSML,
    ``<invoke>``, GLM) keep a string as it is, unless both of its ends carry the same padding."""
    if kind == "string":
        pads = ("\n", " ")
        if not padded and not (len(text) >= 2 and text[0] == text[-1] and text[0] in pads):
            return text  # "print(1)\n\n\n" is the file's content, its last lines included
        if text[:1] in pads:
            text = text[1:]
        return text[:-1] if text[-1:] in pads else text
    stripped = text.strip()
    low = stripped.lower()
    if kind == "boolean" and (low in _TRUE or low in _FALSE):
        return low in _TRUE
    if kind in ("integer", "number") and _NUMBER.fullmatch(stripped):
        number = float(stripped)
        if kind == "integer" and number.is_integer() and abs(number) < 2**63:
            return int(number)
        return int(stripped) if stripped.lstrip("-").isdigit() else number
    if kind == "null" and low in ("null", "none", ""):
        return None
    if kind is None and stripped[:1] not in '{["0123456789-tfnTFN':
        return stripped
    if kind is None and low in ("true", "false", "null", "none"):
        return {"true": True, "false": False}.get(low)
    decoded = decode_value(stripped, budget=budget)
    if decoded is None or (kind is None and decoded[1]):
        if kind in ("integer", "number", "boolean", "null", None):
            return stripped
        return stripped
    value = decoded[0]
    if kind == "integer" and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def typed_arguments(
    pairs: list[tuple[str, str]],
    name: str,
    index: ToolIndex,
    budget: RepairBudget | None = None,
    *,
    verbatim: frozenset[str] = frozenset(),
    padded: bool = True,
) -> dict[str, Any]:
    """``(key, text)`` pairs as arguments, each value typed by the schema of tool ``name``
    (keys in ``verbatim`` are strings whatever the schema says; ``padded``: see
    :func:`parameter_value`)."""
    out: dict[str, Any] = {}
    for key, text in pairs:
        kind = "string" if key in verbatim else index.parameter_type(name, key)
        out[key] = parameter_value(text, kind, budget, padded=padded)
    return out


# -- Gemma's dicts: {key:<|"|>text<|"|>,n:42,flag:true,items:[...]} --------------------------------

GEMMA_QUOTES = ('<|"|>', "<escape>")
"""Gemma 4's string delimiter, and FunctionGemma's."""
_KEY = re.compile(
    r"\s*(?:<\|\"\|>|<escape>|[\"'])?([^\s:=,{}\[\]\"'<>()]{1,128})(?:<\|\"\|>|<escape>|[\"'])?\s*[:=]"
)
_SPACE = re.compile(r"\s*")


class _Bad(Exception):
    """Not a Gemma dict."""


def gemma_arguments(body: str, name: str, index: ToolIndex) -> dict[str, Any] | None:
    """The arguments in Gemma's call syntax, ``{key:value,…}`` or ``(key: value, …)``; None
    when ``body`` is not one. Strings are ``<|"|>…<|"|>``, quoted, or bare (the special tokens
    were stripped); a bare string of a ``string`` parameter runs over commas up to the next
    ``, key:`` of a known parameter."""
    text = body.strip()
    if len(text) < 2 or text[0] not in "{(" or text[-1] not in "})":
        return None
    known = set(index.parameter_order(name))
    try:
        value, end = _gemma_object(text, 0, 0, known, name, index)
    except (_Bad, RecursionError):
        return None
    if text[end:].strip():
        return None
    return value


def _gemma_object(
    text: str, pos: int, depth: int, known: set[str], name: str, index: ToolIndex
) -> tuple[dict[str, Any], int]:
    if depth > MAX_DEPTH:
        raise _Bad
    closer = "}" if text[pos] == "{" else ")"
    pos += 1
    out: dict[str, Any] = {}
    while True:
        pos = _skip(text, pos)
        if pos >= len(text):
            raise _Bad
        if text[pos] == closer:
            return out, pos + 1
        m = _KEY.match(text, pos)
        if m is None:
            raise _Bad
        key = m.group(1)
        kind = index.parameter_type(name, key) if depth == 0 else None
        value, pos = _gemma_value(text, m.end(), depth, closer, kind, known if depth == 0 else None)
        out[key] = value
        pos = _skip(text, pos)
        if pos < len(text) and text[pos] == ",":
            pos += 1
        elif pos >= len(text) or text[pos] != closer:
            raise _Bad


def _gemma_value(
    text: str,
    pos: int,
    depth: int,
    closer: str,
    kind: str | None,
    known: set[str] | None,
) -> tuple[Any, int]:
    pos = _skip(text, pos)
    for quote in GEMMA_QUOTES:
        if text.startswith(quote, pos):
            end = text.find(quote, pos + len(quote))
            if end < 0:
                raise _Bad
            raw = text[pos + len(quote) : end]
            return _typed(raw, kind, quoted=True), end + len(quote)
    if pos < len(text) and text[pos] == '"':
        try:
            raw, end = json.JSONDecoder().raw_decode(text, pos)
        except ValueError:
            raise _Bad from None
        return _typed(str(raw), kind, quoted=True), end
    if pos < len(text) and text[pos] in "{(":
        value, end = _gemma_object(text, pos, depth + 1, set(), "", ToolIndex(()))
        return value, end
    if pos < len(text) and text[pos] == "[":
        return _gemma_list(text, pos, depth + 1)
    end = pos
    while end < len(text):
        ch = text[end]
        if ch == closer or (ch in "}]" and closer != ")"):
            break
        if ch == ",":
            if kind != "string" or known is None:
                break
            nxt = _KEY.match(text, end + 1)
            if nxt is None or nxt.group(1) in known or not known:
                break
        end += 1
    raw = text[pos:end].strip()
    if kind == "string":
        if len(raw) >= 2 and raw[0] == raw[-1] == "'":
            raw = raw[1:-1]
        return raw, end
    return _typed(raw, kind, quoted=False), end


def _gemma_list(text: str, pos: int, depth: int) -> tuple[list[Any], int]:
    if depth > MAX_DEPTH:
        raise _Bad
    pos += 1
    out: list[Any] = []
    while True:
        pos = _skip(text, pos)
        if pos >= len(text):
            raise _Bad
        if text[pos] == "]":
            return out, pos + 1
        value, pos = _gemma_value(text, pos, depth, "]", None, None)
        out.append(value)
        pos = _skip(text, pos)
        if pos < len(text) and text[pos] == ",":
            pos += 1
        elif pos >= len(text) or text[pos] != "]":
            raise _Bad


def _typed(raw: str, kind: str | None, *, quoted: bool) -> Any:
    if quoted and kind in (None, "string"):
        return raw
    if not quoted and kind is None:
        low = raw.lower()
        if low in ("true", "false"):
            return low == "true"
        if low in ("null", "none"):
            return None
        if _NUMBER.fullmatch(raw):
            number = float(raw)
            return int(raw) if raw.lstrip("-").isdigit() else number
        if len(raw) >= 2 and raw[0] == raw[-1] == "'":
            return raw[1:-1]
        return raw
    return parameter_value(raw, kind)


def _skip(text: str, pos: int) -> int:
    m = _SPACE.match(text, pos)
    return m.end() if m else pos


# -- quotes inside strings ---------------------------------------------------------------------


_QUOTE_REPAIR_MAX = 64 * 1024


def repair_quotes(text: str, keys: Mapping[str, str | None]) -> dict[str, Any] | None:
    """A JSON object whose string values contain unescaped ``"``, read with the schema's keys.

    ``keys`` maps each expected key to its JSON-Schema type. A string value runs from the
    quote after ``"key":`` to the last quote before ``, "next_key":`` (the next expected key
    that follows) or before the object's closing brace. None unless every key found reads so
    and the result is a JSON object.
    """
    if not keys or len(text) > _QUOTE_REPAIR_MAX or '"' not in text:
        return None
    names = "|".join(re.escape(k) for k in sorted(keys, key=len, reverse=True))
    key_re = re.compile(r'([{,]\s*)"(' + names + r')"\s*:\s*')
    comma_missing = re.compile(r'"\s*"(?:' + names + r')"\s*:')
    found = list(key_re.finditer(text))
    if not found:
        return None
    parts: list[str] = []
    last = 0
    for i, m in enumerate(found):
        if m.start() < last:
            return None
        parts.append(text[last : m.end()])
        if keys.get(m.group(2)) != "string" or not text.startswith('"', m.end()):
            last = m.end()
            continue
        stop = found[i + 1].start() if i + 1 < len(found) else text.rfind("}")
        close = text.rfind('"', m.end() + 1, max(stop, m.end() + 1) + 1)
        if close <= m.end():
            return None
        inner = text[m.end() + 1 : close]
        if comma_missing.search(inner) is not None:
            return None  # ``"a" "key":``: another key, not a quote inside this value
        parts.append(json.dumps(_unescape(inner), ensure_ascii=False))
        last = close + 1
    parts.append(text[last:])
    try:
        value = json.loads("".join(parts), strict=False)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _unescape(inner: str) -> str:
    """The string a model meant: its valid escapes read, its bare quotes kept."""
    try:
        value = json.loads(
            '"' + inner.replace('\\"', "\x00").replace('"', '\\"') + '"', strict=False
        )
    except ValueError:
        return inner
    return str(value).replace("\x00", '"')
