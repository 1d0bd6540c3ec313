"""Streaming decode of the JSON string in ``{"answer": "…"}``, the constrained json dialect's text.

A model held to the constrained json schema answers in text as ``{"answer": "…"}``. The
answer is sent on as it is generated: :class:`AnswerString` decodes the string piece by
piece, holding back only an escape that is cut in half (``\\``, ``\\u00``, the first half of a
``\\uD83D\\uDE00`` surrogate pair), so any split of the text decodes to the same string. It is
lenient where a model is sloppy: raw newlines and control characters are kept, an unknown
escape (``\\q``) gives its character, a lone surrogate becomes U+FFFD (it could not be sent as
UTF-8), and a reply cut off inside the string ends it. :func:`answer_end` reads what follows
the string.
"""

from __future__ import annotations

import re

from toolshim.dialects._scan import OPEN, TOO_DEEP
from toolshim.dialects._tags import NEED, Host, Resolution
from toolshim.dialects.interpret import interpret_value
from toolshim.dialects.segments import Segment, calls_segment

__all__ = ["ANSWER_OPEN", "AnswerString", "answer_end"]

ANSWER_OPEN = re.compile(r'\{\s*"answer"\s*:\s*"')
"""How a text answer of the constrained json dialect begins."""

_IN_STRING = re.compile(r'[\\"]')
_SIMPLE = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")
_HEX_PREFIX = re.compile(r"[0-9a-fA-F]{0,3}")
_LOW_SURROGATE = re.compile(r"\\u([dD][c-fC-F][0-9a-fA-F]{2})")
_LOW_SURROGATE_PREFIX = re.compile(r"(?:\\(?:u(?:[dD](?:[c-fC-F][0-9a-fA-F]{0,1})?)?)?)?")
_REPLACEMENT = "\ufffd"
_SPACE = re.compile(r"\s*")


class AnswerString:
    """The answer string of a reply that began with ``{"answer": "``, at ``start`` (the brace)."""

    __slots__ = ("ended", "start")

    def __init__(self, start: int) -> None:
        self.start = start
        self.ended = False
        """True once the string is over (what follows it is read by the parser)."""

    def read(self, buf: str, pos: int, final: bool) -> tuple[str, int, bool]:
        """Decode from ``pos``: the text, where decoding stopped, and whether the string ended
        (at its closing quote, then ``pos`` is just past it; or at the end of a final reply)."""
        out: list[str] = []
        n = len(buf)
        while pos < n:
            m = _IN_STRING.search(buf, pos)
            if m is None:
                out.append(buf[pos:])
                pos = n
                break
            i = m.start()
            if i > pos:
                out.append(buf[pos:i])
            if buf[i] == '"':
                return "".join(out), i + 1, True
            text, size = _escape(buf, i, final)
            if size == 0:
                pos = i  # the rest of the escape has not arrived yet
                break
            out.append(text)
            pos = i + size
        return "".join(out), pos, final


def _escape(buf: str, i: int, final: bool) -> tuple[str, int]:
    """The escape at ``buf[i]`` (a backslash) decoded, and its length; length 0 while it is
    incomplete and more text may come."""
    n = len(buf)
    if i + 1 >= n:
        return ("", n - i) if final else ("", 0)
    c = buf[i + 1]
    if c != "u":
        return _SIMPLE.get(c, c), 2
    digits = buf[i + 2 : i + 6]
    if len(digits) < 4 and not final and _HEX_PREFIX.fullmatch(digits):
        return "", 0
    if not _HEX4.fullmatch(digits):
        return "\\u", 2  # not an escape after all: kept as written
    code = int(digits, 16)
    if 0xDC00 <= code <= 0xDFFF:
        return _REPLACEMENT, 6
    if not 0xD800 <= code <= 0xDBFF:
        return chr(code), 6
    rest = buf[i + 6 : i + 12]
    low = _LOW_SURROGATE.match(rest)
    if low is not None:
        second = int(low.group(1), 16)
        return chr(0x10000 + ((code - 0xD800) << 10) + (second - 0xDC00)), 12
    if len(rest) < 6 and not final and _LOW_SURROGATE_PREFIX.fullmatch(rest):
        return "", 0
    return _REPLACEMENT, 6


def answer_end(host: Host, start: int, pos: int, final: bool) -> Resolution:
    """What follows the answer's closing quote (at ``pos``; the object opened at ``start``):
    ``}`` ends it; further members are the rest of the object (a call there is a call);
    anything else is parsed as usual from ``pos``."""
    buf = host.buf
    m = _SPACE.match(buf, pos)
    k = m.end() if m is not None else pos
    if k == len(buf):
        return NEED if not final else (None, k)
    if buf[k] == "}":
        return Segment("marker", buf[pos : k + 1]), k + 1
    if buf[k] != ",":
        return None, pos
    close = host.close_of(start)
    if close == OPEN and not final:
        return NEED
    if close == TOO_DEEP:
        return None, pos
    end = close if close >= 0 else len(buf)
    decoded = host.decode(start, end)
    if decoded is not None and isinstance(decoded[0], dict):
        members = {key: v for key, v in decoded[0].items() if key != "answer"}
        meaning = interpret_value(
            members, host.index, buf[start:end], decoded[1], budget=host.budget
        )
        if meaning.is_call:
            return calls_segment(buf[pos:end], meaning), end
    return None, pos
