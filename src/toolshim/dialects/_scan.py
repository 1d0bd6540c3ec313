"""Low-level, I/O-free scanning: bracket matching that understands strings, and value decoding.

The common regex of prompt-tool designs (``\\{[^{}]*(?:\\{[^{}]*\\}[^{}]*)*\\}``) cannot see
objects nested deeper than one level, nor braces inside strings. :class:`BracketIndex` walks
the text once, keeping a stack of open brackets and skipping over quoted strings, so it finds
the true end of ``{"a": {"b": {"c": "}"}}}`` -- and the end of every bracket nested inside it
in the same pass.

Everything here is bounded so that no reply, however long or strange, costs more than linear
time or raises: brackets nested more than :data:`MAX_DEPTH` levels deep are data, never a
call (:data:`TOO_DEEP`); json-repair, whose own cost grows faster than the length of its
input, only sees short candidates and a limited amount of text per reply
(:class:`RepairBudget`).
"""

from __future__ import annotations

import ast
import json
import re
from bisect import bisect_left
from collections.abc import Callable
from typing import Any

import json_repair

from toolshim.json_walk import json_nodes

__all__ = [
    "IDENTIFIER",
    "MAX_DEPTH",
    "OPEN",
    "TOO_DEEP",
    "BracketIndex",
    "BracketScan",
    "RepairBudget",
    "closer_overlap",
    "decode_value",
    "find_ci",
    "find_close",
    "joined_surrogates",
    "literal",
    "nested_deeper_than",
]

MAX_DEPTH = 64
"""Brackets nested deeper than this are data, not a call (and never reach a recursive decoder)."""
OPEN = -1
""":meth:`BracketIndex.close_of`: the bracket is not closed in the text so far."""
TOO_DEEP = -2
""":meth:`BracketIndex.close_of`: the bracket holds more than :data:`MAX_DEPTH` levels, or sits
inside too many unclosed strings to be read; either way it is data, whatever follows."""
MAX_TANGLE = 8
"""Most bracket scans that may be open over one position. A bracket inside a string of every
open scan needs a scan of its own; past this many (escaped quotes inside escaped JSON, over
and over) the bracket is data."""
REPAIR_MAX_CHARS = 4096
"""Longest text given to json-repair at once (it takes seconds on some 64 KB inputs)."""
REPAIR_BUDGET_CHARS = 16384
"""Most text given to json-repair while parsing one reply."""
REPAIR_CUT_OFF = 4
"""Most json-repair attempts on text that runs to the end of a reply cut off in a bracket. Such
candidates are suffixes nested in one another; the outermost few are the ones a call would be
(a model looping until max_tokens leaves dozens of them)."""

_OPEN = {"{": "}", "[": "]", "(": ")"}
_CLOSE = frozenset("}])")
# After one of these (ignoring spaces) a single quote opens a string rather than being prose.
_VALUE_START = frozenset("{[(,:=")
IDENTIFIER = re.compile(r"[A-Za-z_][\w.\-]*")

_SPECIAL = re.compile(r"""[{}\[\]()"']""")
_IN_DOUBLE = re.compile(r'[\\"]')
_IN_SINGLE = re.compile(r"[\\'\n]")


class _Scan:
    """One walk over the text from a root bracket until the root closes (resumable)."""

    __slots__ = ("end", "last", "pos", "quote", "root", "stack")

    def __init__(self, root: int) -> None:
        self.root = root
        self.pos = root
        self.end = OPEN  # where the root closed
        self.stack: list[int] = []  # positions of the open brackets, innermost last
        self.last = ""  # last non-space character outside strings
        self.quote = ""  # the quote of the string being scanned, if any


class BracketIndex:
    """Where each bracket of a growing text closes (:meth:`close_of`), found by shared scans.

    A scan from a bracket records the end of every bracket it meets outside strings, so the
    brackets nested inside a long unclosed one cost nothing more. Strings in double quotes are
    always skipped; single-quoted strings are skipped where a value may start (after
    ``{ [ ( , : =``), so an apostrophe in a word does not open a string; a newline ends a
    single-quoted "string" that was an apostrophe after all. A closer of the wrong kind closes
    the innermost bracket anyway (models mismatch brackets; json-repair cleans up afterwards).

    Brackets must be asked about in increasing order of position (the parser's order), and the
    answers depend only on the text up to where they are decided, so feeding the text in any
    pieces gives the same answers as the whole text at once.
    """

    __slots__ = ("_active", "_close", "_owner", "max_depth")

    def __init__(self, max_depth: int = MAX_DEPTH) -> None:
        self.max_depth = max_depth
        self._close: dict[int, int] = {}  # bracket -> its end, or TOO_DEEP
        self._owner: dict[int, _Scan] = {}  # open bracket -> the scan that will close it
        self._active: list[_Scan] = []

    def close_of(self, text: str, start: int) -> int:
        """Index just past the bracket that closes ``text[start]`` (one of ``{ [ (``),
        :data:`OPEN` while it is not closed yet, or :data:`TOO_DEEP`."""
        known = self._close.get(start)
        if known is not None:
            return known
        scan = self._owner.get(start)
        if scan is None:
            for other in self._active:
                self._advance(other, text)
            known = self._close.get(start)
            if known is not None:
                return known
            scan = self._owner.get(start)
        if scan is None:
            # Inside a string of every scan so far (or outside them all): a scan of its own.
            self._active = [s for s in self._active if s.end == OPEN or s.end > start]
            if len(self._active) >= MAX_TANGLE:
                self._close[start] = TOO_DEEP
                return TOO_DEEP
            if text[start] not in _OPEN:
                raise ValueError(f"not a bracket at {start}: {text[start]!r}")
            scan = _Scan(start)
            self._active.append(scan)
        self._advance(scan, text)
        return self._close.get(start, OPEN)

    def completed(self, text: str, start: int) -> str:
        """``text[start:]`` with the still-open bracket at ``start`` closed: an escape cut in
        half dropped, the open string's quote, then the closers of every bracket open inside
        it, innermost first (``…"}]}``). Just ``text[start:]`` when the bracket is closed."""
        scan = self._owner.get(start)
        if scan is None or self._close.get(start) is not None:
            return text[start:]
        self._advance(scan, text)
        head = text[start : scan.pos] if scan.quote else text[start:]  # pos: a cut escape
        inside = scan.stack[bisect_left(scan.stack, start) :]
        return head + scan.quote + "".join(_OPEN[text[i]] for i in reversed(inside))

    def _advance(self, scan: _Scan, text: str) -> None:
        if scan.end != OPEN:
            return
        pos, n = scan.pos, len(text)
        last, quote, stack = scan.last, scan.quote, scan.stack
        close, owner, deepest = self._close, self._owner, self.max_depth
        while pos < n:
            if quote:
                m = (_IN_DOUBLE if quote == '"' else _IN_SINGLE).search(text, pos)
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
                last, quote = quote, ""
                pos = i + 1 if ch != "\n" else i
                continue
            m = _SPECIAL.search(text, pos)
            found = m.start() if m is not None else n
            if found > pos:
                gap = text[pos:found].rstrip()
                if gap:
                    last = gap[-1]
            if m is None:
                pos = n
                break
            ch = text[found]
            pos = found + 1
            if ch == '"' or (ch == "'" and last in _VALUE_START):
                quote = ch
                continue
            last = ch
            if ch in _OPEN:
                stack.append(found)
                owner.setdefault(found, scan)
                if len(stack) > deepest:
                    close.setdefault(stack[-1 - deepest], TOO_DEEP)
                continue
            if ch not in _CLOSE:
                continue  # an apostrophe
            opener = stack.pop()
            close.setdefault(opener, pos)
            owner.pop(opener, None)
            if not stack:
                scan.end = pos
                break
        scan.pos, scan.last, scan.quote = pos, last, quote


class BracketScan:
    """The end of one bracket as the text grows: call :meth:`run` again with more text."""

    __slots__ = ("_index", "start")

    def __init__(self, start: int) -> None:
        self.start = start
        self._index = BracketIndex()

    def run(self, text: str) -> int:
        """Index just past the closing bracket, :data:`OPEN` if ``text`` does not contain it
        yet, or :data:`TOO_DEEP`."""
        return self._index.close_of(text, self.start)


def find_close(text: str, start: int) -> int:
    """Index just past the bracket that closes ``text[start]`` (see :class:`BracketIndex`),
    :data:`OPEN` if it is not closed, or :data:`TOO_DEEP`."""
    return BracketIndex().close_of(text, start)


class RepairBudget:
    """How much text json-repair may still be given while parsing one reply."""

    __slots__ = ("cut_off", "remaining")

    def __init__(self, total: int = REPAIR_BUDGET_CHARS, cut_off: int = REPAIR_CUT_OFF) -> None:
        self.remaining = total
        self.cut_off = cut_off

    def take(self, size: int, *, cut_off: bool = False) -> bool:
        """Spend ``size`` characters if they fit (one attempt is at most REPAIR_MAX_CHARS);
        ``cut_off``: the text runs to the end of a reply that stopped inside a bracket."""
        if size > REPAIR_MAX_CHARS or size > self.remaining or (cut_off and self.cut_off <= 0):
            return False
        self.remaining -= size
        self.cut_off -= cut_off
        return True


def decode_value(
    text: str,
    *,
    completed: str = "",
    budget: RepairBudget | None = None,
    fixer: Callable[[str], Any] | None = None,
) -> tuple[Any, bool] | None:
    """Decode a JSON-ish value; returns ``(value, repaired)`` or None when nothing sensible came out.

    Tries strict JSON, then JSON with raw control characters in strings, then a Python literal
    (single quotes, True/None, trailing commas); for text cut off before its end, the same on
    ``completed``, the text with its brackets closed (:meth:`BracketIndex.completed`); then
    ``fixer`` (a repair that knows what is expected, such as the schema's keys; None when it
    cannot help), then json-repair (unquoted keys, missing commas, ...) on short text, within
    ``budget``. Values nested deeper than :data:`MAX_DEPTH` are not decoded.
    """
    stripped = text.strip()
    if not stripped:
        return None
    attempts = [stripped, completed.strip()] if completed else [stripped]
    for i, candidate in enumerate(attempts):
        for strict in (True, False):
            try:
                value = json.loads(candidate, strict=strict)
            except (ValueError, RecursionError):
                continue
            return _bounded(value, repaired=i > 0 or not strict, text=candidate)
        value = _python_literal(candidate)
        if isinstance(value, (dict, list)):
            return _bounded(_jsonable(value), repaired=True, text=candidate)
    if not (budget or RepairBudget()).take(len(stripped), cut_off=bool(completed)):
        return None
    fixed = fixer(stripped) if fixer is not None else None
    if fixed is not None:
        return _bounded(fixed, repaired=True)
    try:
        repaired, marks = _repair(stripped)
    except Exception:  # json-repair has no exception contract of its own
        return None
    if repaired == "" or repaired is None:
        return None
    bounded = _bounded(repaired, repaired=True)
    return None if bounded is None else (_restored(bounded[0], marks), True)


# json-repair trims the end of a string that ends in a line break (``"x\n\n\n"`` becomes
# ``"x"``), escaped or not, and misreads escapes next to quotes (``"\\\""``): a file's content
# would lose its last lines. Escapes only ever occur inside strings, so each is handed over as
# one character it has no reason to touch (from a private use plane) and put back after.
_ESCAPE = re.compile(r'\\(["\\/bfnrt]|u[0-9a-fA-F]{4})')
_MARK_BASE = 0xF0000
_MARKS = re.compile("[\U000f0000-\U000ffffd]")
_SURROGATE_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")


def _repair(text: str) -> tuple[Any, dict[str, str]]:
    """``json_repair.loads`` of ``text`` with its escapes marked, and what each mark stands
    for (nothing is marked when the text holds such characters itself)."""
    if _MARKS.search(text) is not None:
        return json_repair.loads(text), {}
    marks: dict[str, str] = {}
    by_escape: dict[str, str] = {}

    def mark(m: re.Match[str]) -> str:
        escape = m.group(1)
        found = by_escape.get(escape)
        if found is None:
            found = by_escape[escape] = chr(_MARK_BASE + len(by_escape))
            marks[found] = json.loads('"\\' + escape + '"')
        return found

    return json_repair.loads(_ESCAPE.sub(mark, text)), marks


def _restored(value: Any, marks: dict[str, str]) -> Any:
    """``value`` with the marks of :func:`_repair` turned back into the characters they stand
    for, in every string and key (the value nests at most MAX_DEPTH levels), and escaped
    surrogate pairs (``\\ud83d\\ude00``) joined into the character they encode, as JSON
    reads them."""
    if isinstance(value, str):
        if marks:
            value = _MARKS.sub(lambda m: marks.get(m.group(), m.group()), value)
        return joined_surrogates(value)
    if isinstance(value, dict):
        return {_restored(k, marks): _restored(v, marks) for k, v in value.items()}
    if isinstance(value, list):
        return [_restored(v, marks) for v in value]
    return value


def joined_surrogates(text: str) -> str:
    """``text`` with each pair of UTF-16 surrogates made the one character it encodes."""
    return _SURROGATE_PAIR.sub(_joined, text)


def _joined(pair: re.Match[str]) -> str:
    high, low = pair.group()[0], pair.group()[1]
    return chr(0x10000 + ((ord(high) - 0xD800) << 10) + (ord(low) - 0xDC00))


def _python_literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _bounded(value: Any, *, repaired: bool, text: str | None = None) -> tuple[Any, bool] | None:
    """``(value, repaired)``, or None when it nests deeper than :data:`MAX_DEPTH`. A value
    decoded from ``text`` nests no deeper than the brackets the text holds: counted first,
    the walk is needed only when they are many."""
    if text is not None and sum(text.count(b) for b in "[{(") <= MAX_DEPTH:
        return value, repaired
    return None if nested_deeper_than(value, MAX_DEPTH) else (value, repaired)


def nested_deeper_than(value: Any, limit: int) -> bool:
    """True when lists and dicts nest more than ``limit`` levels in ``value`` (no recursion)."""
    return any(holds and depth > limit for _, depth, holds in json_nodes(value))


def _jsonable(value: Any) -> Any:
    """Python literal containers as JSON ones (tuples become lists, keys strings); other
    values stay as they are, for :func:`toolshim.dialects.calls.json_problem` to judge."""
    if isinstance(value, str):
        return joined_surrogates(value)  # "\ud83d\ude00" in a Python literal: one emoji
    if isinstance(value, dict):
        return {joined_surrogates(str(k)): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


_NAME_LITERALS = {"true": True, "false": False, "null": None, "none": None}


def literal(node: ast.AST) -> Any:
    """The value of a literal expression node; JSON's true/false/null are accepted as names.

    Raises ValueError for anything that is not a literal (a variable, a call, an operator).
    Values that Python has but JSON has not (``...``, ``b""``, ``1j``, sets) come back as they
    are, for :func:`toolshim.dialects.calls.json_problem` to name.
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
    if isinstance(node, (ast.List, ast.Tuple)):
        return [literal(e) for e in node.elts]
    if isinstance(node, ast.Set):
        try:
            return set(literal(e) for e in node.elts)
        except TypeError as exc:
            raise ValueError(f"not a literal value: {_source(node)}") from exc
    try:
        return _jsonable(ast.literal_eval(node))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
        raise ValueError(f"not a literal value: {_source(node)}") from exc


def _source(node: ast.AST) -> str:
    try:
        text = ast.unparse(node)
    except (ValueError, RecursionError):
        return "(an expression too deep to show)"
    return text if len(text) <= 80 else text[:77] + "..."


def find_ci(text: str, needle: str, start: int) -> int:
    """Where ``needle`` first occurs in ``text`` from ``start``, ignoring case; -1 if nowhere."""
    m = re.compile(re.escape(needle), re.IGNORECASE).search(text, start)
    return m.start() if m else -1


def closer_overlap(buf: str, start: int, closer: str) -> int:
    """Length of the longest tail of ``buf[start:]`` that is a proper prefix of ``closer``."""
    low = closer.lower()
    for size in range(min(len(closer) - 1, len(buf) - start), 0, -1):
        if low.startswith(buf[len(buf) - size :].lower()):
            return size
    return 0
