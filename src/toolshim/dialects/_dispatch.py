"""Which reader a ``<`` or a fence starts: the tagged markup of every family, marker
tokens, ``<think>`` blocks and fences (read raw unless their language may hold a call)."""

from __future__ import annotations

import re
from typing import Protocol

from toolshim.dialects._host import NEED, Host, Resolution
from toolshim.dialects._named import (
    GEMMA_OPENERS,
    NAME_TAG,
    read_gemma_opener,
    read_name_tag,
    read_tool_tag,
)
from toolshim.dialects._native import (
    INVOKE_NAME,
    INVOKE_PREFIXES,
    KIMI_CALL,
    read_invoke,
    read_invoke_name,
    read_kimi,
)
from toolshim.dialects._scan import OPEN
from toolshim.dialects._tags import (
    DEEPSEEK_OPEN,
    MARKERS,
    TOOL_CALL_OPEN,
    read_deepseek,
    read_function_name_tag,
    read_function_tag,
    read_marker,
    read_parameter_as_function,
    read_tool_call,
)
from toolshim.dialects.segments import calls_segment

__all__ = ["TagHost", "read_fence", "read_tag"]

# Fence languages whose body may be a call; any other fence is code in an answer.
_CALL_LANGS = frozenset(
    {"", "json", "json5", "jsonc", "tool_call", "tool_calls", "tool_code", "function_call"}
    | {"python", "py", "xml", "javascript", "js"}
)
_PYTHON_LANGS = frozenset({"tool_code", "python", "py"})
_RAW_BLOCKS = {"<think>": "</think>", "<thinking>": "</thinking>"}
_FENCE_HEAD = re.compile(r"```([\w+\-.]*)[ \t]*\n?")
_FENCE_CLOSE = re.compile(r"```")
_MARKERS_LOW = tuple((m, m.lower()) for m in MARKERS)


class TagHost(Host, Protocol):
    def raw_until(self, closer: str) -> None:
        """Read what follows as prose, up to and including ``closer``."""


def read_fence(host: TagHost, t: int, final: bool) -> Resolution:
    """A fence: its body's calls, or prose (a fence of another language, read raw)."""
    buf = host.buf
    head = _FENCE_HEAD.match(buf, t)
    assert head is not None
    if head.end() >= len(buf) and not final:
        return NEED
    lang = head.group(1).lower()
    if lang not in _CALL_LANGS:
        host.raw_until("```")
        return None, head.end()
    j = head.end()
    while j < len(buf) and buf[j].isspace():
        j += 1
    after = j
    if j < len(buf) and buf[j] in "{[":
        close = host.close_of(j)
        if close == OPEN and not final:
            return NEED
        # A fence closer inside the JSON's strings is not the fence's end.
        after = close if close >= 0 else (len(buf) if close == OPEN else j)
    m = host.find(_FENCE_CLOSE, t, after)
    if m is None:
        if not final:
            return NEED
        body, end = buf[head.end() :], len(buf)
    else:
        body, end = buf[head.end() : m.start()], m.end()
    meaning = host.inner(body, python=lang in _PYTHON_LANGS)
    if meaning is not None:
        return calls_segment(buf[t:end], meaning), end
    return None, end


def read_tag(host: TagHost, t: int, final: bool) -> Resolution:
    """The reader of the tag at ``t``, or prose."""
    buf = host.buf
    low = buf[t : t + 48].lower()
    if low.startswith(TOOL_CALL_OPEN):
        return read_tool_call(host, t, final)
    if low.startswith(KIMI_CALL):
        return read_kimi(host, t, t + len(KIMI_CALL), final)
    if low.startswith(INVOKE_PREFIXES):
        return read_invoke(host, t, final)
    for opener in GEMMA_OPENERS:
        if low.startswith(opener):
            return read_gemma_opener(host, t, opener, final)
    for marker, lowered in _MARKERS_LOW:
        if low.startswith(lowered):
            return read_marker(host, t, marker, final)
    for opener, closer in _RAW_BLOCKS.items():
        if low.startswith(opener):
            host.raw_until(closer)
            return None, t + len(opener)
    if low.startswith("<function="):
        return read_function_tag(host, t, final)
    if low.startswith("<function>"):
        return read_function_name_tag(host, t, final)
    if low.startswith("<parameter="):
        return read_parameter_as_function(host, t, final)
    if low.startswith(INVOKE_NAME):
        return read_invoke_name(host, t, final)
    if low.startswith(DEEPSEEK_OPEN):
        return read_deepseek(host, t, final)
    if low.startswith(NAME_TAG):
        return read_name_tag(host, t, final)
    return read_tool_tag(host, t, final)
