"""Readers for model families' own call markup: GLM, Kimi-K2, ``<invoke>`` (Anthropic-style,
DeepSeek V3.2 DSML, MiniMax), Gemma 4 / FunctionGemma.

* GLM-4.5/4.7/5: ``<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>``
  (no arguments: ``<tool_call>NAME</tool_call>``; the open tag may be missing before an
  offered tool's name);
* Kimi-K2: ``<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0
  <|tool_call_argument_begin|>{…}<|tool_call_end|>…`` with any of the tokens missing (servers
  that skip special tokens leave ``functions.NAME:0 {…}``);
* ``<function_calls><invoke name="NAME"><parameter name="K">V</parameter></invoke>…``, also
  with DeepSeek V3.2's ``｜DSML｜`` prefix (``string="true|false"`` says how to read a value;
  the bars come doubled or re-encoded too) and inside MiniMax's ``<minimax:tool_call>``; an
  ``<invoke>`` whose closing tag is missing ends where the next one or the section ends;
* Gemma 4: ``<|tool_call>call:NAME{key:<|"|>text<|"|>,n:42}<tool_call|>`` (FunctionGemma:
  ``<start_function_call>…<end_function_call>`` with ``<escape>`` quotes), and the bare
  ``call:NAME{…}`` / ``call:NAME(key: "v")`` left when the special tokens are stripped;
* ``<invoke_name>NAME</invoke_name><parameters><K>V</K></parameters>`` (DeepSeek V4 drifting
  into XML);
* ``[TOOL_CALL] {tool => "NAME", args => {--key "value"}} [/TOOL_CALL]`` (MiniMax under some
  agents).

Values are typed by the tool's schema (:mod:`._values`). The readers follow the contract of
:mod:`._tags`: a :data:`Resolution` from the text so far, :data:`NEED` to wait for more.
"""

from __future__ import annotations

import re
from functools import partial

from toolshim.dialects._host import (
    NEED,
    Host,
    Resolution,
    json_arguments_call,
    not_a_tag,
    one_call,
    read_tagged,
    too_deep,
)
from toolshim.dialects._scan import OPEN, TOO_DEEP, decode_value
from toolshim.dialects._values import gemma_arguments, typed_arguments
from toolshim.dialects.calls import ParsedCall
from toolshim.dialects.segments import Segment

__all__ = [
    "GLM_ARG_KEY",
    "INVOKE_PREFIXES",
    "KIMI_ARGUMENT",
    "KIMI_CALL",
    "glm_call",
    "is_glm_body",
    "read_arrow_call",
    "read_gemma",
    "read_glm_open_missing",
    "read_invoke",
    "read_invoke_name",
    "read_kimi",
]

GLM_ARG_KEY = "<arg_key>"
KIMI_CALL = "<|tool_call_begin|>"
KIMI_ARGUMENT = "<|tool_call_argument_begin|>"
DSML_BARS = ("｜", "｜｜", "|", "‖")
"""The bars around ``DSML`` in DeepSeek's tags (see ``_DSML``)."""
INVOKE_PREFIXES = ("<invoke ", *(f"<{bar}dsml{bar}invoke " for bar in DSML_BARS), "<invoke ")
"""Lower-case openings of an ``<invoke name=…>`` element."""

_NAME = r"[A-Za-z_][\w.\-]{0,127}"
_GLM_PAIR = re.compile(
    r"\s*(?:<arg_key>\s*)+(.*?)\s*(?:</arg_key>\s*)+(?:<arg_value>)?(.*?)"
    r"(?:</arg_value>(?=\s*(?:<arg_key>|</tool_call>|$))|(?=<arg_key>)|$)",
    re.DOTALL,
)
_GLM_NAME = re.compile(r"\s*(?:<tool_call>\s*)*(" + _NAME + r")\s*", re.IGNORECASE)
_TOOL_CALL_BOUND = re.compile(r"</tool_call>|<tool_call>", re.IGNORECASE)

_KIMI_HEAD = re.compile(
    r"\s*(?:functions\.)?(" + _NAME + r")(?::\d+)?\s*(?:<\|tool_call_argument_begin\|>)?\s*"
)
_KIMI_TAIL = re.compile(r"\s*<\|tool_call_end\|>")

_DSML = r"[｜|‖]{1,2}DSML[｜|‖]{1,2}"
"""DeepSeek's DSML tag prefix, ``｜DSML｜`` as its template writes it, doubled or with other
bars as servers and tokenizers re-encode it (``｜｜DSML｜｜``, ``|DSML|``, ``‖DSML‖``)."""
_INVOKE_OPEN = re.compile(
    r"<(?:" + _DSML + r"|antml:)?invoke\s+name\s*=\s*[\"']?([^\"'>\s]{1,128})[\"']?\s*>",
    re.IGNORECASE,
)
_INVOKE_CLOSE = re.compile(r"</(?:" + _DSML + r"|antml:)?invoke\s*>", re.IGNORECASE)
_INVOKE_END = re.compile(
    r"</(?:" + _DSML + r"|antml:)?(?:invoke|tool_calls|function_calls)\s*>"
    r"|<(?:" + _DSML + r"|antml:)?invoke\s",
    re.IGNORECASE,
)
"""Where an ``<invoke>``'s body ends: its closing tag, or (when that is missing, as in a reply
that elides with ``...``) the next ``<invoke`` or the end of the section."""
_INVOKE_PARAMETER = re.compile(
    r"<(?:" + _DSML + r"|antml:)?parameter\s+name\s*=\s*[\"']?([^\"'>\s]{1,128})[\"']?"
    r"(?:\s+string\s*=\s*[\"']?(true|false)[\"']?)?\s*>",
    re.IGNORECASE,
)
_INVOKE_PARAMETER_END = re.compile(
    r"</(?:" + _DSML + r"|antml:)?parameter\s*>|<(?:" + _DSML + r"|antml:)?parameter\s",
    re.IGNORECASE,
)

_GEMMA_END = re.compile(r"<tool_call\|>|</?end_function_call>", re.IGNORECASE)


# -- GLM ---------------------------------------------------------------------------------------


def is_glm_body(body: str) -> bool:
    """A ``<tool_call>`` body in GLM's form: ``NAME<arg_key>…`` or a bare name."""
    if GLM_ARG_KEY in body:
        return _GLM_NAME.match(body) is not None
    return re.fullmatch(r"\s*" + _NAME + r"\s*", body) is not None


def glm_call(host: Host, body: str, raw: str) -> ParsedCall:
    """The call in a GLM ``<tool_call>`` body (see :func:`is_glm_body`)."""
    head = _GLM_NAME.match(body)
    if head is None:
        return ParsedCall("", None, raw, "the GLM tool call has no function name")
    name = host.index.canonical(head.group(1))
    pairs: list[tuple[str, str]] = []
    pos = head.end()
    while pos < len(body):
        m = _GLM_PAIR.match(body, pos)
        if m is None or m.end() == pos:
            break
        key = m.group(1).strip()
        if key:
            pairs.append((key, m.group(2)))
        pos = m.end()
        pos = _skip_closers(body, pos)
    rest = body[pos:].strip()
    if rest and rest.lower() not in ("</tool_call>",):
        return ParsedCall(
            name, None, raw, "the GLM tool call has text outside <arg_key>/<arg_value>"
        )
    arguments = typed_arguments(pairs, name, host.index, host.budget, padded=False)
    return ParsedCall(name, arguments, raw)


def _skip_closers(body: str, pos: int) -> int:
    m = re.compile(r"\s*(?:</arg_value>\s*|</arg_key>\s*)*").match(body, pos)
    return m.end() if m else pos


def read_glm_open_missing(host: Host, t: int, final: bool) -> Resolution:
    """``NAME<arg_key>…</tool_call>``: a GLM call whose ``<tool_call>`` is missing (``t`` is
    where the offered tool's name starts)."""
    return read_tagged(
        host,
        _TOOL_CALL_BOUND,
        t,
        t,
        final,
        partial(glm_call, host),
        closes=lambda s: s.lower() == "</tool_call>",
    )


# -- Kimi-K2 -----------------------------------------------------------------------------------


def read_kimi(host: Host, t: int, head_start: int, final: bool) -> Resolution:
    """From ``head_start``: ``[functions.]NAME[:0] [<|tool_call_argument_begin|>] {…}
    [<|tool_call_end|>]`` (``t``: where the call's text starts, a token or the name)."""
    buf = host.buf
    m = _KIMI_HEAD.match(buf, head_start)
    if m is None or m.end() >= len(buf) or buf[m.end()] != "{":
        if not final and len(buf) - head_start < 200:
            rest = buf[m.end() :] if m is not None else ""
            if _kimi_partial(buf[head_start:]) or (
                m is not None and KIMI_ARGUMENT.startswith(rest)
            ):
                return NEED  # the name, its index or the argument token is still arriving
        return _kimi_marker(buf, t, head_start)
    j = m.end()
    name = host.index.canonical(m.group(1))
    close = host.close_of(j)
    if close == OPEN and not final:
        return NEED
    if close == TOO_DEEP:
        return too_deep(name, buf[t:j]), j
    close = len(buf) if close == OPEN else close
    tail = _KIMI_TAIL.match(buf, close)
    if tail is None and not final and KIMI_END_PARTIAL.fullmatch(buf, close):
        return NEED
    end = tail.end() if tail else close
    raw = buf[t:end]
    call = json_arguments_call(name, host.decode(j, close), raw)
    return one_call(raw, call, end)


KIMI_END_PARTIAL = re.compile(
    r"\s*(?:<(?:\|(?:t(?:o(?:o(?:l(?:_(?:c(?:a(?:l(?:l(?:_(?:e(?:n(?:d(?:\|)?)?)?)?)?)?)?)?)?)?)?)?)?)?)?)?"
)
"""What may still become ``<|tool_call_end|>``."""

_KIMI_PARTIAL = re.compile(r"\s*(?:functions\.?)?[\w.\-]*(?::\d*)?\s*(?:<[|\w]*)?")


def _kimi_partial(rest: str) -> bool:
    if _KIMI_PARTIAL.fullmatch(rest) is None:
        return False
    m = re.search(r"<[|\w]*$", rest)
    return m is None or KIMI_ARGUMENT.startswith(m.group())


def _kimi_marker(buf: str, t: int, head_start: int) -> Resolution:
    if buf.startswith(KIMI_CALL, t):
        return Segment("marker", KIMI_CALL), t + len(KIMI_CALL)
    return None, max(head_start, t + 1)  # prose that names a call id: read on past it


# -- <invoke name="…"> ---------------------------------------------------------------------------


def read_invoke(host: Host, t: int, final: bool) -> Resolution:
    """``<invoke name="NAME"><parameter name="K">V</parameter>…</invoke>`` (also ``｜DSML｜``)."""
    buf = host.buf
    m = _INVOKE_OPEN.match(buf, t)
    if m is None:
        return not_a_tag(host, t, final)
    name = host.index.canonical(m.group(1))
    return read_tagged(
        host,
        _INVOKE_END,
        t,
        m.end(),
        final,
        partial(_invoke_call, host, name),
        closes=lambda s: bool(_INVOKE_CLOSE.fullmatch(s)),
    )


def _invoke_call(host: Host, name: str, body: str, raw: str) -> ParsedCall:
    """The call ``<invoke name="NAME">`` with ``<parameter name="K">`` children in ``body``."""
    pairs: list[tuple[str, str]] = []
    verbatim: set[str] = set()
    json_values: set[str] = set()
    pos = 0
    while True:
        p = _INVOKE_PARAMETER.search(body, pos)
        if p is None:
            break
        stop = _INVOKE_PARAMETER_END.search(body, p.end())
        value = body[p.end() : stop.start() if stop else len(body)]
        key = p.group(1)
        pairs.append((key, value))
        flag = (p.group(2) or "").lower()
        (verbatim if flag == "true" else json_values if flag == "false" else set()).add(key)
        if stop is None:
            break
        pos = stop.end() if stop.group().startswith("</") else stop.start()
    arguments = typed_arguments(
        pairs, name, host.index, host.budget, verbatim=frozenset(verbatim), padded=False
    )
    for key in json_values:
        if isinstance(arguments.get(key), str) and host.index.parameter_type(name, key) is None:
            decoded = decode_value(arguments[key], budget=host.budget)
            if decoded is not None:
                arguments[key] = decoded[0]
    return ParsedCall(name, arguments, raw)


# -- Gemma 4 -------------------------------------------------------------------------------------


def read_gemma(host: Host, t: int, name: str, args_start: int, final: bool) -> Resolution:
    """``call:NAME{…}`` or ``call:NAME(…)`` from ``t``; the arguments open at ``args_start``,
    a closing ``<tool_call|>`` / ``<end_function_call>`` is taken along."""
    buf = host.buf
    close = host.close_of(args_start)
    if close == OPEN and not final:
        return NEED
    tool = host.index.canonical(name)
    if close == TOO_DEEP:
        return too_deep(tool, buf[t:args_start]), args_start
    close = len(buf) if close == OPEN else close
    end = close
    rest = buf[close : close + 24]
    tail = _GEMMA_END.match(rest.lstrip())
    if tail is not None:
        end = close + (len(rest) - len(rest.lstrip())) + tail.end()
    elif not final and _gemma_end_partial(rest):
        return NEED
    raw = buf[t:end]
    body = buf[args_start:close]
    arguments = gemma_arguments(body, tool, host.index)
    if arguments is None and body.startswith("{"):
        decoded = host.decode(args_start, close)  # JSON written after call:NAME
        return one_call(raw, json_arguments_call(tool, decoded, raw), end)
    if arguments is None:
        if host.index.resolve(name) is None:
            return None, args_start
        problem = f"the arguments of {tool!r} are not in the form {{key:value, ...}}"
        return one_call(raw, ParsedCall(tool, None, raw, problem), end)
    return one_call(raw, ParsedCall(tool, arguments, raw), end)


def _gemma_end_partial(rest: str) -> bool:
    s = rest.lstrip().lower()
    if not s:
        return len(rest) < 24  # only spaces so far: a closing token may follow
    ends = ("<tool_call|>", "<end_function_call>", "</end_function_call>")
    return any(token.startswith(s) for token in ends)


# -- <invoke_name> -------------------------------------------------------------------------------

INVOKE_NAME = "<invoke_name>"
_INVOKE_NAME = re.compile(r"<invoke_name>\s*(" + _NAME + r")\s*</invoke_name>\s*", re.IGNORECASE)
_PARAMETERS_END = re.compile(r"</parameters>|<invoke_name>", re.IGNORECASE)
_CHILD = re.compile(r"<([A-Za-z_][\w.\-]{0,127})>(.*?)</\1>", re.DOTALL)


def read_invoke_name(host: Host, t: int, final: bool) -> Resolution:
    """``<invoke_name>NAME</invoke_name>`` then ``<parameters><K>V</K>…</parameters>``."""
    buf = host.buf
    m = _INVOKE_NAME.match(buf, t)
    if m is None:
        return not_a_tag(host, t, final, "</invoke_name>")
    name = host.index.canonical(m.group(1))
    rest = buf[m.end() : m.end() + 12].lower()
    if not final and len(rest) < 12 and "<parameters>".startswith(rest):
        return NEED
    if not rest.startswith("<parameters>"):
        raw = buf[t : m.end()]
        return one_call(raw, ParsedCall(name, {}, raw), m.end())
    start = m.end() + len("<parameters>")

    def call(body: str, raw: str) -> ParsedCall:
        pairs = [(c.group(1), c.group(2)) for c in _CHILD.finditer(body)]
        return ParsedCall(name, typed_arguments(pairs, name, host.index, host.budget), raw)

    return read_tagged(
        host, _PARAMETERS_END, t, start, final, call, closes=lambda s: s.lower() == "</parameters>"
    )


# -- [TOOL_CALL] {tool => "NAME", args => {--key "value"}} [/TOOL_CALL] ---------------------------

ARROW_OPEN = "[TOOL_CALL]"
_ARROW_END = re.compile(r"\[/TOOL_CALL\]|\[TOOL_CALL\]", re.IGNORECASE)
_ARROW_TOOL = re.compile(r"\s*\{?\s*tool\s*=>\s*[\"']?(" + _NAME + r")[\"']?\s*,?", re.IGNORECASE)
_ARROW_ARG = re.compile(r"--([A-Za-z_][\w\-]{0,127})\s+(\"(?:[^\"\\]|\\.)*\"|'[^']*'|[^\s}]+)")


def read_arrow_call(host: Host, t: int, final: bool) -> Resolution:
    """``[TOOL_CALL] {tool => "NAME", args => {--key "value" …}} [/TOOL_CALL]``."""
    start = t + len(ARROW_OPEN)
    build = partial(_arrow_call, host)
    return read_tagged(host, _ARROW_END, t, start, final, build, lambda s: s.startswith("[/"))


def _arrow_call(host: Host, body: str, raw: str) -> ParsedCall:
    """The call in a ``[TOOL_CALL]`` block's ``body``."""
    head = _ARROW_TOOL.match(body)
    if head is None:
        problem = 'the [TOOL_CALL] block does not name a tool as tool => "name"'
        return ParsedCall("", None, raw, problem)
    name = host.index.canonical(head.group(1))
    pairs = []
    for arg in _ARROW_ARG.finditer(body, head.end()):
        value = arg.group(2)
        if value[:1] == '"':
            decoded = decode_value(value)
            value = decoded[0] if decoded is not None and isinstance(decoded[0], str) else value
        elif value[:1] == "'":
            value = value[1:-1]
        pairs.append((arg.group(1), value))
    return ParsedCall(name, typed_arguments(pairs, name, host.index, host.budget), raw)
