"""Calls whose markup lost its family's keyword and kept only the tool's name.

* ``<shell>{"command": "ls"}</shell>``: a tag named after an offered tool around its JSON
  arguments (MiMo inside ``<toolcall>``);
* ``<name>task`` (a stray ``</name>`` or ``</parameter>`` may follow), then Qwen3-Coder's
  ``<parameter=k>v</parameter>`` children up to ``</function>``: the ``<function=`` opener
  written as a ``<name>`` tag;
* ``<start_function_call>NAME{…}`` / ``<|tool_call>NAME{…}``: Gemma's call without its
  ``call:`` keyword (read like ``call:NAME{…}``).

Only the names of offered tools count (compared without case), so that HTML and other tags
in prose stay prose.
"""

from __future__ import annotations

import re
from functools import partial

from toolshim.dialects._host import (
    NEED,
    Host,
    Resolution,
    json_arguments_call,
    one_call,
    read_tagged,
)
from toolshim.dialects._native import read_gemma
from toolshim.dialects._scan import OPEN, TOO_DEEP
from toolshim.dialects._tags import parameters_call, read_marker

__all__ = ["GEMMA_OPENERS", "NAME_TAG", "read_gemma_opener", "read_name_tag", "read_tool_tag"]

GEMMA_OPENERS = ("<start_function_call>", "<|tool_call>")
NAME_TAG = "<name>"

_NAME = r"[A-Za-z_][\w.\-]{0,127}"
_GEMMA_HEAD = re.compile(r"\s{0,8}(" + _NAME + r")\s{0,8}[{(]")
_GEMMA_PARTIAL = re.compile(r"\s{0,8}[\w.\-]{0,128}\s{0,8}")
_TOOL_TAG = re.compile(r"<(" + _NAME + r")>\s{0,16}")
_TOOL_TAG_PARTIAL = re.compile(r"([\w.\-]{0,128})(>\s{0,16})?")
_NAME_HEAD = re.compile(
    r"<name>\s{0,16}(" + _NAME + r")\s{0,16}(?:</(?:name|parameter)>\s{0,16})?(?=<parameter=)",
    re.IGNORECASE,
)
_NAME_PARTIAL = re.compile(
    r"<name>\s{0,16}[\w.\-]{0,128}\s{0,16}(?:<[/\w=]{0,12}>?\s{0,16}){0,2}", re.IGNORECASE
)
_FUNCTION_CLOSE = re.compile(r"</function>", re.IGNORECASE)


def _offered(host: Host, name: str) -> str | None:
    """The offered tool spelled ``name`` (case aside): tags are matched on exact names only."""
    low = name.lower()
    return next((n for n in host.index.names if n.lower() == low), None)


def read_gemma_opener(host: Host, t: int, opener: str, final: bool) -> Resolution:
    """``<start_function_call>NAME{…}``: an offered tool's name right after the opener is a
    Gemma call without ``call:``; anything else leaves the opener a marker token."""
    buf = host.buf
    start = t + len(opener)
    m = _GEMMA_HEAD.match(buf, start)
    if m is None:
        if not final and _GEMMA_PARTIAL.fullmatch(buf, start):
            return NEED
        return read_marker(host, t, opener, final)
    name = _offered(host, m.group(1))
    if name is None:
        return read_marker(host, t, opener, final)
    return read_gemma(host, t, name, m.end() - 1, final)


def read_tool_tag(host: Host, t: int, final: bool) -> Resolution:
    """``<NAME>{…}</NAME>`` for an offered tool NAME, or prose."""
    buf = host.buf
    m = _TOOL_TAG.match(buf, t)
    if m is None or m.end() == len(buf):
        if not final and _may_become_tool_tag(host, buf, t + 1):
            return NEED
        return None, t + 1
    name = _offered(host, m.group(1))
    if name is None or buf[m.end()] != "{":
        return None, t + 1
    j = m.end()
    close = host.close_of(j)
    if close == OPEN and not final:
        return NEED
    if close == TOO_DEEP:
        return None, t + 1
    close = len(buf) if close == OPEN else close
    closer = f"</{m.group(1)}>"
    rest = buf[close : close + len(closer) + 16]
    gap = len(rest) - len(rest.lstrip())
    if rest[gap : gap + len(closer)].lower() == closer.lower():
        end = close + gap + len(closer)
    elif not final and closer.lower().startswith(rest[gap:].lower()) and len(rest) < 16:
        return NEED  # the closing tag may still come
    else:
        end = close
    decoded = host.decode(j, close)
    if decoded is None or not isinstance(decoded[0], dict):
        return None, t + 1
    known = host.index.parameter_order(name)
    if known and not set(decoded[0]) <= set(known):
        return None, t + 1  # data inside a tag that merely shares the tool's name
    raw = buf[t:end]
    return one_call(raw, json_arguments_call(name, decoded, raw), end)


def _may_become_tool_tag(host: Host, buf: str, start: int) -> bool:
    m = _TOOL_TAG_PARTIAL.fullmatch(buf, start)
    if m is None:
        return False
    part = m.group(1).lower()
    if m.group(2) is not None:
        return _offered(host, part) is not None  # the tag is whole: its ``{`` may follow
    return any(n.lower().startswith(part) for n in host.index.names)


def read_name_tag(host: Host, t: int, final: bool) -> Resolution:
    """``<name>NAME`` and ``<parameter=k>v</parameter>`` children up to ``</function>``."""
    buf = host.buf
    m = _NAME_HEAD.match(buf, t)
    if m is None:
        if not final and _NAME_PARTIAL.fullmatch(buf, t):
            return NEED
        return read_tool_tag(host, t, final)
    name = _offered(host, m.group(1))
    if name is None:
        return None, t + 1
    return read_tagged(
        host, _FUNCTION_CLOSE, t, m.end(), final, partial(parameters_call, host, name)
    )
