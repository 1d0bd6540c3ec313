"""Readers for tagged call formats: ``<tool_call>``, ``<function=…>``, Mistral, DeepSeek.

The formats: ``<tool_call>…</tool_call>``, ``<function=name>…</function>`` (with or without
``<parameter=…>`` children), ``<function>name</function>{…}``, Mistral's ``[TOOL_CALLS]`` and
DeepSeek's ``<｜tool▁call▁begin｜>`` tokens (gpt-oss's ``to=functions.name`` is :mod:`._harmony`).
Each reader gets the parser (:class:`Host`) and the index of the tag in its buffer and returns a
:data:`Resolution`: the segment found and where it ends, or :data:`NEED` when the text so far
cannot decide yet (only possible before the reply is final).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import partial
from typing import Any

from toolshim.dialects._host import (
    NEED,
    Host,
    Resolution,
    json_arguments_call,
    not_a_tag,
    one_call,
    read_tagged,
    tagged_body,
    too_deep,
)
from toolshim.dialects._native import (
    DSML_BARS,
    GLM_ARG_KEY,
    INVOKE_PREFIXES,
    KIMI_CALL,
    glm_call,
    is_glm_body,
)
from toolshim.dialects._scan import OPEN, TOO_DEEP, RepairBudget, decode_value
from toolshim.dialects._values import parameter_value, repair_quotes
from toolshim.dialects.calls import Interpretation, ParsedCall, ToolIndex
from toolshim.dialects.segments import Segment, calls_segment

__all__ = [
    "FUNCTION_CLOSE",
    "MARKERS",
    "NEED",
    "TAG_PREFIXES",
    "Host",
    "Resolution",
    "read_deepseek",
    "read_function_close",
    "read_function_name_tag",
    "read_function_tag",
    "read_inline_code",
    "read_marker",
    "read_mistral",
    "read_parameter_as_function",
    "read_tool_call",
]


MARKERS = (
    "<|python_tag|>",
    "<|python_start|>",
    "<|python_end|>",
    "<|tool_call|>",
    "<|/tool_call|>",
    "<|tool_calls|>",
    "<|/tool_calls|>",
    "<|tool_call_start|>",
    "<|tool_call_end|>",
    "<|tool_calls_section_begin|>",
    "<|tool_calls_section_end|>",
    "<function_call>",
    "</function_call>",
    "<functioncall>",
    "</functioncall>",
    "<tool_calls>",
    "</tool_calls>",
    "</tool_call>",
    "<tools>",
    "</tools>",
    "<|channel|>",
    "<|constrain|>",
    "<|message|>",
    "<|call|>",
    "<|start|>",
    "<|end|>",
    "<|return|>",
    "<start_of_turn>",
    "<end_of_turn>",
    "<|im_start|>",
    "<|im_end|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁calls▁end｜>",
    "<｜end▁of▁sentence｜>",
    "<|tool_call>",
    "<tool_call|>",
    "<start_function_call>",
    "<end_function_call>",
    "</end_function_call>",
    "<function_calls>",
    "</function_calls>",
    "</invoke>",
    *(
        f"{opening}{bar}DSML{bar}{tag}>"
        for bar in DSML_BARS
        for opening, tag in (
            ("<", "function_calls"),
            ("</", "function_calls"),
            ("<", "tool_calls"),
            ("</", "tool_calls"),
            ("</", "invoke"),
        )
    ),
    "<minimax:tool_call>",
    "</minimax:tool_call>",
    "<seed:tool_call>",
    "</seed:tool_call>",
    "<|tool_call_argument_begin|>",
    "<|action_start|>",
    "<|action_end|>",
    "<|plugin|>",
    "<|tool▁calls▁begin|>",
    "<tool_use>",
    "</tool_use>",
    "<toolcall>",
    "</toolcall>",
)
"""Tokens that carry no content of their own: dropped wherever they appear."""

FUNCTION_CLOSE = "</function>"
"""Not a marker: it closes a call (a model that closes it twice leaves one after the call,
dropped as a marker there), and anywhere else it is text (an answer that quotes it)."""
_CLOSER_GAP = 16
"""Most spaces between a call and a ``</function>`` that closes it again."""
TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"
DEEPSEEK_OPEN = "<｜tool▁call▁begin｜>"
DEEPSEEK_SEP = "<｜tool▁sep｜>"
DEEPSEEK_CLOSE = "<｜tool▁call▁end｜>"
TAG_PREFIXES = (
    TOOL_CALL_OPEN,
    "<function=",
    "<function>",
    FUNCTION_CLOSE,
    "<parameter=",
    "<think>",
    "<thinking>",
    DEEPSEEK_OPEN,
    KIMI_CALL,
    GLM_ARG_KEY,
    *INVOKE_PREFIXES,
    *MARKERS,
)
"""Every tag the parser reacts to (a buffer ending in a prefix of one must wait)."""

# Names are bounded: an unbounded ``[^>\s]+`` runs to the end of ``<function=<function=…``
# from every tag, which is quadratic.
_FUNCTION_TAG = re.compile(r"<function=([^>\s]{1,128})\s*>", re.IGNORECASE)
_FUNCTION_NAME_TAG = re.compile(r"<function>\s*([^<>\s]{1,128})\s*</function>", re.IGNORECASE)
_FUNCTION_CLOSE = re.compile(r"</function>", re.IGNORECASE)
_FUNCTION_GLUED = re.compile(
    r"<function=[\"']?([A-Za-z_][\w.\-]{0,127})[\"']?\s*(?:=\s*)?[{(]", re.I
)
_FUNCTION_TAIL = re.compile(
    r"\s*(?:\)\s*)?(?:>|</function>|</?(?:f(?:u(?:n(?:c(?:t(?:i(?:o(?:n(?:>)?)?)?)?)?)?)?)?)?$)?",
    re.I,
)
_TOOL_CALL_END = re.compile(r"<tool_call>|</tool_call>", re.IGNORECASE)
_PARAMETER = re.compile(r"<parameter=([^>\s]{1,128})\s*>", re.IGNORECASE)
_PARAMETER_END = re.compile(r"</parameter>|<parameter=", re.IGNORECASE)
_MISTRAL_HEAD = re.compile(r"\s*([A-Za-z_][\w.\-]*)\s*(?:\[CALL_ID\]\s*[\w\-]*\s*)?(\[ARGS\])?\s*")
_DEEPSEEK_END = re.compile(re.escape(DEEPSEEK_CLOSE) + "|" + re.escape(DEEPSEEK_OPEN))
_FENCE = re.compile(r"^\s*```[\w-]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)
_STRAY = re.compile(r"[\s}\]),;]*")


_INLINE_CODE_END = re.compile(r"[`\n]")
_HEADER_WORDS = {"<|channel|>": ("analysis", "commentary", "final"), "<|start|>": ("assistant",)}
"""gpt-oss header tokens and the word that follows them (a channel, a role): dropped together."""


def read_inline_code(host: Host, t: int, final: bool) -> Resolution:
    """A `span` of inline code on one line is prose, whatever it quotes."""
    m = host.find(_INLINE_CODE_END, t, t + 1)
    if m is None:
        return NEED if not final else (None, t + 1)
    if m.group() == "`":
        return None, m.end()
    return None, t + 1


def read_marker(host: Host, t: int, marker: str, final: bool) -> Resolution:
    """A token without content; gpt-oss's ``<|channel|>`` and ``<|start|>`` take the channel
    or role word after them along."""
    buf = host.buf
    end = t + len(marker)
    for word in _HEADER_WORDS.get(marker, ()):
        rest = buf[end : end + len(word) + 1]
        if not final and (word.startswith(rest) or rest == word):
            return NEED
        if rest[: len(word)].lower() == word and not rest[len(word) :].isalnum():
            end += len(word)
            break
    return Segment("marker", buf[t:end]), end


def read_function_close(buf: str, t: int, call_end: int) -> Resolution:
    """``</function>`` at ``t``: a marker within a few spaces after a call that ends at
    ``call_end`` (a model that closes it twice, or more); anywhere else, text."""
    end = t + len(FUNCTION_CLOSE)
    if call_end >= 0 and t - call_end <= _CLOSER_GAP and not buf[call_end:t].strip():
        return Segment("marker", buf[t:end]), end
    return None, end


def only_stray(text: str) -> bool:
    """True when ``text`` is nothing but spaces and stray closing brackets (``}}}``)."""
    return _STRAY.fullmatch(text) is not None


def read_tool_call(host: Host, t: int, final: bool) -> Resolution:
    """``<tool_call>{…}</tool_call>``; the closing tag may be missing."""
    buf = host.buf
    start = t + len(TOOL_CALL_OPEN)
    j = start
    while j < len(buf) and buf[j].isspace():
        j += 1
    if j >= len(buf) and not final:
        return NEED
    if j < len(buf) and buf[j] in "{[":
        close = host.close_of(j)
        if close == OPEN and not final:
            return NEED
        if close >= 0:
            k = close
            while k < len(buf) and buf[k].isspace():
                k += 1
            rest = buf[k : k + len(TOOL_CALL_CLOSE)]
            if not final and len(rest) < len(TOOL_CALL_CLOSE) and TOOL_CALL_CLOSE.startswith(rest):
                return NEED
            end = k + len(TOOL_CALL_CLOSE) if rest.lower() == TOOL_CALL_CLOSE else close
            return _tool_call_segment(host, buf[t:end], buf[j:close]), end
    found = tagged_body(
        host, _TOOL_CALL_END, t, start, final, closes=lambda s: s.lower() == TOOL_CALL_CLOSE
    )
    if found is None:
        return NEED
    body, end, _ = found
    return _tool_call_segment(host, buf[t:end], body), end


def _tool_call_segment(host: Host, raw: str, body: str) -> Segment:
    glm = is_glm_body(body)
    glm_first = glm and (GLM_ARG_KEY in body or host.markup == "glm")
    meaning = None if glm_first else host.inner(body, python=True)
    if meaning is None and glm:
        meaning = Interpretation((glm_call(host, body, raw),))
    if meaning is None:
        problem = (
            'the text inside <tool_call>…</tool_call> is not a call of the form {"name": ..., '
            '"arguments": {...}}'
        )
        meaning = Interpretation((ParsedCall("", None, raw, problem),))
    return calls_segment(raw, meaning)


def read_function_tag(host: Host, t: int, final: bool) -> Resolution:
    """``<function=name>{json}</function>`` (Llama) or with ``<parameter=k>v</parameter>``
    children (Qwen3-Coder); also the broken ``<function=name{…}>``, ``<function=name={…}``
    and ``<function=name({…})``, the closing tag optional."""
    buf = host.buf
    glued = _FUNCTION_GLUED.match(buf, t)
    if glued is not None:
        return _glued_function(host, t, glued, final)
    m = _FUNCTION_TAG.match(buf, t)
    if m is None:
        return not_a_tag(host, t, final)
    name = host.index.canonical(m.group(1))

    def call(body: str, raw: str) -> ParsedCall:
        if _PARAMETER.search(body):
            return parameters_call(host, name, body, raw)
        return json_arguments_call(name, _decode_body(body, host), raw)

    return read_tagged(host, _FUNCTION_CLOSE, t, m.end(), final, call)


def read_parameter_as_function(host: Host, t: int, final: bool) -> Resolution:
    """``<parameter=NAME>`` naming an offered tool, ``<parameter=k>v</parameter>`` children
    and ``</function>``: Qwen3-Coder's call with ``<function=`` written as ``<parameter=``."""
    buf = host.buf
    m = _PARAMETER.match(buf, t)
    if m is None:
        return not_a_tag(host, t, final)
    name = host.index.resolve(m.group(1))
    if name is None:
        return None, t + 1
    return read_tagged(
        host, _FUNCTION_CLOSE, t, m.end(), final, partial(parameters_call, host, name)
    )


def _glued_function(host: Host, t: int, m: re.Match[str], final: bool) -> Resolution:
    buf = host.buf
    j = m.end() - 1  # the { or ( that opens the arguments
    close = host.close_of(j)
    if close == OPEN and not final:
        return NEED
    name = host.index.canonical(m.group(1))
    if close == TOO_DEEP:
        return too_deep(name, buf[t:j]), j
    close = len(buf) if close == OPEN else close
    inside = buf[j + 1 : close - 1] if buf[j] == "(" else buf[j:close]
    tail = _FUNCTION_TAIL.match(buf, close)
    if not final and tail is not None and tail.end() == len(buf):
        return NEED  # a closing > or </function> may still come
    end = tail.end() if tail is not None else close
    raw = buf[t:end]
    call = json_arguments_call(name, _decode_body(inside, host), raw)
    return one_call(raw, call, end)


def read_function_name_tag(host: Host, t: int, final: bool) -> Resolution:
    """``<function>name</function>`` followed by the arguments as a JSON object."""
    buf = host.buf
    m = _FUNCTION_NAME_TAG.match(buf, t)
    if m is None:
        return not_a_tag(host, t, final, "</function>")
    j = m.end()
    while j < len(buf) and buf[j].isspace():
        j += 1
    if j >= len(buf) and not final:
        return NEED
    name = host.index.canonical(m.group(1))
    if j < len(buf) and buf[j] == "{":
        close = host.close_of(j)
        if close == OPEN and not final:
            return NEED
        if close == TOO_DEEP:
            return too_deep(name, buf[t : m.end()]), m.end()
        close = len(buf) if close == OPEN else close
        raw = buf[t:close]
        call = json_arguments_call(name, host.decode(j, close), raw)
        return one_call(raw, call, close)
    raw = buf[t : m.end()]
    return one_call(raw, ParsedCall(name, {}, raw), m.end())


def read_mistral(host: Host, start: int, final: bool) -> Resolution:
    """After ``[TOOL_CALLS]``: ``name[ARGS]{…}`` / ``name{…}`` (a JSON list is read as usual)."""
    buf = host.buf
    m = _MISTRAL_HEAD.match(buf, start)
    if m and m.end() < len(buf) and buf[m.end()] == "{":
        name = host.index.canonical(m.group(1))
        end = host.close_of(m.end())
        if end == OPEN and not final:
            return NEED
        if end == TOO_DEEP:
            return too_deep(name, buf[start - len("[TOOL_CALLS]") : m.end()]), m.end()
        end = len(buf) if end == OPEN else end
        decoded = host.decode(m.end(), end)
        args = decoded[0] if decoded is not None else None
        problem = None if isinstance(args, Mapping) else "the arguments are not a JSON object"
        raw = buf[start - len("[TOOL_CALLS]") : end]
        call = ParsedCall(name, args, raw, problem)
        return one_call(raw, call, end)
    if not final and _MISTRAL_PARTIAL.fullmatch(buf, start) is not None:
        return NEED
    return Segment("marker", "[TOOL_CALLS]"), start


_MISTRAL_PARTIAL = re.compile(
    r"\s*(?:[A-Za-z_][\w.\-]*\s*(?:\[C?A?L?L?_?I?D?\]?\s*[\w\-]*\s*)?(\[A?R?G?S?\]?)?\s*)?"
)
"""What may still become ``name[ARGS]{`` after ``[TOOL_CALLS]``."""


def read_deepseek(host: Host, t: int, final: bool) -> Resolution:
    """``<｜tool▁call▁begin｜>[function<｜tool▁sep｜>]name…<｜tool▁call▁end｜>`` (DeepSeek V3/R1/V3.1)."""
    start = t + len(DEEPSEEK_OPEN)
    build = partial(_deepseek_call, host)
    return read_tagged(host, _DEEPSEEK_END, t, start, final, build, DEEPSEEK_CLOSE.__eq__)


def _deepseek_call(host: Host, body: str, raw: str) -> ParsedCall:
    """The call in a DeepSeek tool call's ``body``."""
    head, sep, rest = body.partition(DEEPSEEK_SEP)
    if not sep:
        return ParsedCall("", None, raw, "the DeepSeek tool call has no <｜tool▁sep｜>")
    if head.strip() == "function":  # V3 / R1: function<sep>NAME\n```json\n{…}\n```
        name, _, args = rest.strip().partition("\n")
        decoded = _decode_body(_unfence(args), host)
        return json_arguments_call(host.index.canonical(name.strip()), decoded, raw)
    # V3.1: NAME<sep>{…}
    decoded = _decode_body(rest, host)
    return json_arguments_call(host.index.canonical(head.strip()), decoded, raw)


def _unfence(text: str) -> str:
    m = _FENCE.match(text)
    return m.group(1) if m else text


_EMPTY: tuple[object, bool] = ({}, False)


def _decode_body(body: str, host: Host) -> tuple[object, bool] | None:
    """A tag body's arguments (nothing at all is no arguments); quotes left unescaped inside
    string values are read with the schema's keys (:func:`._values.repair_quotes`)."""
    if not body.strip():
        return _EMPTY
    keys = host.index.argument_types()
    return decode_value(body, budget=host.budget, fixer=lambda text: repair_quotes(text, keys))


def parameters_call(host: Host, name: str, body: str, raw: str) -> ParsedCall:
    """The call of ``name`` whose ``<parameter=k>v</parameter>`` children are ``body``."""
    return ParsedCall(name, parameters(body, name, host.index, host.budget), raw)


def parameters(
    body: str, name: str, index: ToolIndex, budget: RepairBudget | None = None
) -> dict[str, Any]:
    """``<parameter=k>v</parameter>`` children, each value read according to the tool's schema."""
    out: dict[str, Any] = {}
    pos = 0
    while True:
        m = _PARAMETER.search(body, pos)
        if m is None:
            return out
        end = _PARAMETER_END.search(body, m.end())
        value = body[m.end() : end.start() if end else len(body)]
        key = m.group(1).strip("\"'")
        out[key] = parameter_value(value, index.parameter_type(name, key), budget)
        pos = (
            end.end()
            if end and end.group().lower() == "</parameter>"
            else (end.start() if end else len(body))
        )
