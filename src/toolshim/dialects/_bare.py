"""Calls that open with a tool's name, not with a bracket or a tag.

* ``get_weather(city="Paris")`` standing alone on its line (a bare Python-style call);
* ``get_weather`` alone on its line, then ``{"city": "Paris"}`` alone on the next, with
  keys the tool has (GLM-4-0414 writes calls with no markup at all);
* an offered tool's name right before GLM's ``<arg_key>`` or Kimi-K2's
  ``<|tool_call_argument_begin|>``: the call's opening token is missing;
* ``get_weather{"city": "Paris"}</function>``: Llama's function tag without its
  ``<function=`` (Groq), wherever it stands, since the closing tag says what it is.

A name mentioned inside a sentence is prose: the call must start its line (after spaces and
marker tokens) and nothing but spaces or ``;`` may follow it there; a name next to braces
without ``</function>`` after them is prose too.
"""

from __future__ import annotations

import re
from typing import Protocol

from toolshim.dialects._host import NEED, Host, Resolution, json_arguments_call, one_call
from toolshim.dialects._native import (
    GLM_ARG_KEY,
    KIMI_ARGUMENT,
    read_glm_open_missing,
    read_kimi,
)
from toolshim.dialects._scan import OPEN
from toolshim.dialects.python_calls import interpret_python
from toolshim.dialects.segments import calls_segment

__all__ = ["LineHost", "name_before", "read_bare_call", "read_named"]

_AFTER_BARE_CALL = re.compile(r"[^\S\n]*;?[^\S\n]*")
_LINE_CLOSERS = ("</function_calls>", "</tool_call>", "<|tool_call_end|>", "<|python_end|>")
"""Closing tokens that may end a bare call's line (the call list's own wrapper closing)."""
_SPACES = re.compile(r"[^\S\n]*")
_FUNCTION_CLOSE = "</function>"


def _skip_spaces(buf: str, pos: int) -> int:
    m = _SPACES.match(buf, pos)
    return m.end() if m else pos


_NAME_BEFORE = re.compile(r"(?<![\w.])((?:functions\.)?[A-Za-z_][\w.\-]{0,127}?)(:\d+)?\s*$")
_LOOKBACK_TOKENS = (GLM_ARG_KEY, KIMI_ARGUMENT)


class LineHost(Host, Protocol):
    def line_lead(self, t: int) -> int:
        """Where the spaces and marker tokens that open the line of ``t`` end."""


def read_bare_call(host: LineHost, t: int, m: re.Match[str], final: bool) -> Resolution:
    """``name(…)`` or ``name {…}`` at ``t`` (matched by ``m``), alone on its line; or
    ``name{…}</function>`` anywhere (:func:`read_closed_function`)."""
    if m.group("glued_json") is not None:
        return read_closed_function(host, t, m, final)
    buf = host.buf
    if host.line_lead(t) != t:
        return None, m.end()
    named_json = m.group("named_json") is not None
    opener = m.end() if named_json else m.end() - 1
    end = host.close_of(opener)
    if end == OPEN and not final:
        return NEED
    if end < 0:
        return None, m.end()
    after = _AFTER_BARE_CALL.match(buf, end)
    stop = after.end() if after else end
    rest = buf[stop : stop + 24].lower()
    closer = next((c for c in _LINE_CLOSERS if rest.startswith(c)), None)
    if closer is not None:  # OLMo 3: <function_calls>get_weather(…)</function_calls>
        stop += len(closer)
        stop = _skip_spaces(buf, stop)
    elif not final and rest and any(c.startswith(rest) for c in _LINE_CLOSERS):
        return NEED  # a closing token may be arriving
    if stop < len(buf) and buf[stop] != "\n":
        return None, m.end()
    if stop == len(buf) and not final:
        return NEED  # the line may still go on
    raw = buf[t:end]
    if named_json:
        name = host.index.resolve(buf[t : m.start("named_json")])
        decoded = host.decode(opener, end)
        if name is None or decoded is None or not isinstance(decoded[0], dict):
            return None, m.end()
        known = host.index.parameter_order(name)
        if known and not set(decoded[0]) <= set(known):
            return None, m.end()  # data that merely follows the name
        call = json_arguments_call(name, decoded, raw)
        return one_call(raw, call, end)
    meaning = interpret_python(raw, host.index, require_known=True)
    if meaning.calls and not any(c.problem for c in meaning.calls):
        return calls_segment(raw, meaning), end
    return None, m.end()


def name_before(host: Host, start: int, token: int, final: bool) -> int | None:
    """Where an offered tool's name starts right before ``token`` when the text there is
    (or, before the reply is final, may become) ``<arg_key>`` or
    ``<|tool_call_argument_begin|>``: a GLM or Kimi-K2 call without its opening token."""
    buf = host.buf
    head = buf[token : token + 30].lower()
    if not any(
        head.startswith(tok) or (not final and tok.startswith(head)) for tok in _LOOKBACK_TOKENS
    ):
        return None
    m = _NAME_BEFORE.search(buf, max(start, token - 160), token)
    if m is None:
        return None
    name = m.group(1)
    if host.index.resolve(name) is None and not name.lower().startswith("functions."):
        return None
    return m.start()


def read_named(host: Host, t: int, token: int, final: bool) -> Resolution:
    """A tool's name at ``t`` followed by the token at ``token`` (see :func:`name_before`)."""
    buf = host.buf
    if len(buf) - token < 30 and not final:
        tail = buf[token:].lower()
        if any(tok.startswith(tail) and tok != tail for tok in _LOOKBACK_TOKENS):
            return NEED  # the token is not complete yet
    if buf[token : token + len(GLM_ARG_KEY)].lower() == GLM_ARG_KEY:
        return read_glm_open_missing(host, t, final)
    if buf.startswith(KIMI_ARGUMENT, token):
        return read_kimi(host, t, t, final)
    return None, token


def read_closed_function(host: Host, t: int, m: re.Match[str], final: bool) -> Resolution:
    """``name{…}</function>``: Llama's ``<function=name>{…}</function>`` that lost its opener
    (Groq's ``failed_generation``). The closing tag is what makes it a call: a tool's name
    next to braces in a sentence, without it, is prose."""
    buf = host.buf
    opener = m.end()
    end = host.close_of(opener)
    if end == OPEN and not final:
        return NEED
    if end < 0:
        return None, opener
    k = end
    while k < len(buf) and buf[k].isspace():
        k += 1
    rest = buf[k : k + len(_FUNCTION_CLOSE)].lower()
    if rest != _FUNCTION_CLOSE:
        if not final and _FUNCTION_CLOSE.startswith(rest):
            return NEED  # the closing tag may be arriving
        return None, opener
    stop = k + len(_FUNCTION_CLOSE)
    name = host.index.canonical(buf[t : m.start("glued_json")])
    raw = buf[t:stop]
    call = json_arguments_call(name, host.decode(opener, end), raw)
    return one_call(raw, call, stop)
