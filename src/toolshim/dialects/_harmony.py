"""gpt-oss's harmony calls: ``to=functions.NAME [<|constrain|>]json<|message|>{…}[<|call|>]``.

The header between the recipient and the arguments is read loosely, because it is what leaks
worst: servers that drop the special tokens leave ``to=functions.NAME commentary json
{…}``, and gpt-oss (and the GPT-5 models that share its format) write stray tokens there,
often in other scripts: ``to=functions.exec_command code  全民彩票天天送钱{"cmd": …}``.
What may stand between the name and the ``{``: spaces, special tokens (``<|constrain|>``,
``<|channel|>``, ``<|message|>``, …), the header words (``commentary``, ``analysis``,
``json``, ``code``), and words that hold a character outside ASCII or no letter or digit at
all; at most :data:`HEADER_REACH` characters. Stray tokens may touch the recipient on either
side (``全民彩票to=functions.NAME``, ``to=functions.NAME全民彩票{``): the name is ASCII. An English word there (``to=functions.get_weather is how
gpt-oss names it: {…}``) makes it prose. Text after the arguments (and their ``<|call|>``)
is the reply's text, as any other.
"""

from __future__ import annotations

import re

from toolshim.dialects._host import NEED, Host, Resolution, json_arguments_call, one_call, too_deep
from toolshim.dialects._scan import OPEN, TOO_DEEP
from toolshim.dialects.calls import ToolIndex

__all__ = ["HEADER_REACH", "harmony_name", "read_harmony"]

HEADER_REACH = 96
"""Most characters between ``to=functions.NAME`` and the ``{`` of its arguments."""

_SPECIAL = re.compile(r"<\|\w{1,24}\|>")
"""A special token: ``<|constrain|>``, ``<|channel|>``, ``<|message|>`` and their kind."""
_SPECIAL_PARTIAL = re.compile(r"<(?:\|\w{0,24}\|?)?")
_WORDS = frozenset({"commentary", "analysis", "json", "code"})
_ENDS = frozenset(" \t\r\n{<")
_PUNCTUATION = "_.,:;-#+*=|/"
_UNDECIDED = -1
_PROSE = -2


def read_harmony(host: Host, t: int, name_end: int, name: str, final: bool) -> Resolution:
    """From ``t``, ``to=functions.NAME`` (the name ends at ``name_end``), its header and its
    JSON arguments; prose when no arguments follow the header (see the module docstring)."""
    buf = host.buf
    j = arguments_start(buf, name_end, final)
    if j == _UNDECIDED:
        return NEED
    if j == _PROSE:
        return None, name_end
    close = host.close_of(j)
    if close == OPEN and not final:
        return NEED
    if close == TOO_DEEP:
        return too_deep(harmony_name(host.index, name), buf[t:j]), j
    close = len(buf) if close == OPEN else close
    end = close
    for token in ("<|call|>", "<|end|>"):
        if buf.startswith(token, close):
            end = close + len(token)
            break
    raw = buf[t:end]
    call = json_arguments_call(harmony_name(host.index, name), host.decode(j, close), raw)
    return one_call(raw, call, end)


def arguments_start(buf: str, pos: int, final: bool) -> int:
    """Where the ``{`` of the arguments is, after the header from ``pos``; ``_PROSE`` when the
    header holds something no header does, ``_UNDECIDED`` while the text so far cannot tell
    (never once ``final``)."""
    j = pos
    n = len(buf)
    reach = pos + HEADER_REACH
    while True:
        if j > reach:
            return _PROSE
        if j >= n:
            return _PROSE if final else _UNDECIDED
        ch = buf[j]
        if ch == "{":
            return j
        if ch.isspace():
            j += 1
            continue
        if ch == "<":
            token = _SPECIAL.match(buf, j)
            if token is not None:
                j = token.end()
                continue
            if not final and _SPECIAL_PARTIAL.fullmatch(buf, j) is not None:
                return _UNDECIDED
            return _PROSE
        k = j
        limit = min(n, reach + 1)
        while k < limit and buf[k] not in _ENDS:
            k += 1
        if k > reach:
            return _PROSE  # a word longer than any header
        if k >= n and not final:
            return _UNDECIDED  # the word may go on
        if not _stray(buf[j:k]):
            return _PROSE
        j = k


def _stray(word: str) -> bool:
    """A header word (``json``, ``.json``, ``commentaries``), or a stray token: a character
    outside ASCII, or no letter or digit."""
    core = word.strip(_PUNCTUATION).lower()
    return (
        core in _WORDS
        or core.startswith("commentar")
        or any(ord(ch) > 127 for ch in word)
        or not any(ch.isalnum() for ch in word)
    )


def harmony_name(index: ToolIndex, name: str) -> str:
    """The tool a harmony header names; ``shelljson`` is ``shell`` with ``json`` glued on."""
    if index.resolve(name) is None and name.lower().endswith("json"):
        glued = index.resolve(name[:-4])
        if glued is not None:
            return glued
    return index.canonical(name)
