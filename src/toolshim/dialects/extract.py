"""The tolerant extraction layer: find tool calls in model text, whole or streamed (sans-IO).

:class:`ReplyParser` splits a reply into segments: prose (``text``), ``calls`` and ``marker``
tokens that are dropped (``<|python_tag|>``, ``[TOOL_CALLS]``). It recognises every dialect's
shape, so a model that drifts from the format it was asked for is still understood:

* bare JSON objects and arrays, several concatenated, inside prose;
* ```` ```json ```` / ```` ```tool_code ```` / ```` ```python ```` fences;
* ``<tool_call>…</tool_call>`` (Hermes, Qwen), ``<function=name>…</function>`` (Llama 3.1,
  Qwen3-Coder's ``<parameter=…>``), ``[TOOL_CALLS]`` (Mistral, with ``name[ARGS]{…}``);
* Python-style calls ``[f(a=1), g(b=2)]`` and bare ``f(a=1)`` for an offered tool;
* ``<think>…</think>`` blocks and fences of other languages are kept as prose, never parsed.

The parser is incremental: :meth:`ReplyParser.feed` returns what is already certain, holding
back only text that might still become a call, and :meth:`ReplyParser.finish` resolves the
rest. Whole-text parsing is ``feed(text) + finish()``, so streamed and whole parses agree at
every chunk split by construction (and property tests check it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from toolshim.dialects._scan import decode_value, find_close
from toolshim.dialects.interpret import (
    Interpretation,
    ParsedCall,
    ToolIndex,
    interpret_python,
    interpret_value,
)
from toolshim.types import ToolSpec

__all__ = ["ParsedReply", "ReplyParser", "Segment", "parse_reply"]

# Fence languages whose body may be a call; any other fence is code in an answer.
_CALL_LANGS = frozenset(
    {
        "",
        "json",
        "json5",
        "jsonc",
        "tool_call",
        "tool_calls",
        "tool_code",
        "function_call",
        "python",
        "py",
        "xml",
        "javascript",
        "js",
    }
)
_PYTHON_LANGS = frozenset({"tool_code", "python", "py"})
_MARKERS = (
    "<|python_tag|>",
    "<|tool_call|>",
    "<|tool_calls|>",
    "<function_call>",
    "</function_call>",
    "<functioncall>",
    "<tool_calls>",
    "</tool_calls>",
    "<|tool_calls_section_begin|>",
    "<|tool_calls_section_end|>",
    "<start_of_turn>",
    "<end_of_turn>",
    "<|im_end|>",
    "<|eot_id|>",
)
_TOOL_CALL_OPEN = "<tool_call>"
_TOOL_CALL_CLOSE = "</tool_call>"
_FUNCTION_TAG = re.compile(r"<function=([^>\s]+)\s*>", re.IGNORECASE)
_PARAMETER_TAG = re.compile(r"<parameter=([^>\s]+)\s*>(.*?)</parameter>", re.DOTALL | re.IGNORECASE)
_MISTRAL_ARGS = re.compile(r"\s*([A-Za-z_][\w.\-]*)\s*\[ARGS\]\s*")
_TAGS = (_TOOL_CALL_OPEN, "<function=", "<think>", *_MARKERS)
_NEED = None  # sentinel: cannot decide until more text arrives


@dataclass(frozen=True, slots=True)
class Segment:
    """A piece of a reply: prose, tool calls (or an explicit decline), or a dropped marker."""

    kind: Literal["text", "calls", "marker"]
    text: str
    calls: tuple[ParsedCall, ...] = ()
    declined: bool = False


@dataclass(frozen=True, slots=True)
class ParsedReply:
    """A whole reply, parsed."""

    segments: tuple[Segment, ...]

    @property
    def calls(self) -> tuple[ParsedCall, ...]:
        return tuple(c for s in self.segments for c in s.calls)

    @property
    def declined(self) -> bool:
        """True when the model explicitly said that no tool is needed (and called none)."""
        return not self.calls and any(s.declined for s in self.segments)

    @property
    def text(self) -> str:
        """All prose, exactly as written (calls and markers left out)."""
        return "".join(s.text for s in self.segments if s.kind == "text")


class ReplyParser:
    """Incremental tool-call extraction over a growing reply (no I/O)."""

    def __init__(self, tools: Sequence[ToolSpec] | ToolIndex, *, bare_calls: bool = True) -> None:
        self.index = tools if isinstance(tools, ToolIndex) else ToolIndex(tools)
        self._buf = ""
        self._pos = 0
        self._raw_until: str | None = None  # inside <think> or a code fence: prose until this
        names = sorted(self.index.names, key=len, reverse=True)
        self._call_re = (
            re.compile(
                r"(?<![\w.])(?:functions\.|default_api\.)?(?:"
                + "|".join(re.escape(n) for n in names)
                + r")\s*\("
            )
            if bare_calls and names
            else None
        )
        self._prefixes = [*_TAGS, "```", "[TOOL_CALLS]"]
        self._name_prefixes = (
            [f"{p}{n}" for n in names for p in ("", "functions.")] if self._call_re else []
        )

    def feed(self, delta: str) -> list[Segment]:
        """Add text; return the segments that are now certain."""
        self._buf += delta
        return self._scan(final=False)

    def finish(self) -> list[Segment]:
        """The reply is complete: resolve everything still held back."""
        return self._scan(final=True)

    @property
    def received(self) -> str:
        """All text fed so far."""
        return self._buf

    @property
    def pending(self) -> str:
        """Text received but not yet resolved."""
        return self._buf[self._pos :]

    # -- scanning ---------------------------------------------------------------------------

    def _scan(self, final: bool) -> list[Segment]:
        out: list[Segment] = []
        buf = self._buf
        while self._pos < len(buf):
            if self._raw_until is not None:
                if not self._scan_raw(out, final):
                    break
                continue
            start = self._pos
            t = self._next_trigger(start, final)
            if t > start:
                _text(out, buf[start:t])
                self._pos = t
            if t >= len(buf) or (not final and self._held_at(t)):
                break
            resolved = self._resolve(t, final)
            if resolved is _NEED:
                break
            segment, end = resolved
            if segment is None:
                _text(out, buf[t:end])
            else:
                out.append(segment)
            self._pos = end
        return _merge(out)

    def _scan_raw(self, out: list[Segment], final: bool) -> bool:
        closer = self._raw_until
        assert closer is not None
        buf = self._buf
        j = buf.lower().find(closer, self._pos)
        if j >= 0:
            _text(out, buf[self._pos : j + len(closer)])
            self._pos = j + len(closer)
            self._raw_until = None
            return True
        end = len(buf) if final else len(buf) - _partial_suffix(buf, self._pos, [closer])
        _text(out, buf[self._pos : end])
        self._pos = end
        if final:
            self._raw_until = None
        return False

    def _next_trigger(self, start: int, final: bool) -> int:
        buf = self._buf
        best = len(buf)
        for ch in "{[<`":
            j = buf.find(ch, start, best)
            if j >= 0:
                best = j
        if self._call_re is not None:
            m = self._call_re.search(buf, start, best)
            if m:
                best = m.start()
        if best == len(buf) and not final:
            best -= _partial_suffix(buf, start, self._name_prefixes, word=True)
        return best

    def _held_at(self, t: int) -> bool:
        """True when the text from ``t`` is only a partial trigger (wait for more)."""
        rest = self._buf[t:]
        return any(p.lower().startswith(rest.lower()) and p != rest for p in self._prefixes) or any(
            p.startswith(rest) for p in self._name_prefixes
        )

    def _resolve(self, t: int, final: bool) -> tuple[Segment | None, int] | None:
        buf = self._buf
        ch = buf[t]
        if ch == "`":
            return self._fence(t, final) if buf.startswith("```", t) else (None, t + 1)
        if ch == "<":
            return self._tag(t, final)
        if ch == "[" and buf.startswith("[TOOL_CALLS]", t):
            return self._mistral(t + len("[TOOL_CALLS]"), final)
        if ch in "{[":
            return self._bracketed(t, final)
        return self._bare_call(t, final)

    def _bracketed(self, t: int, final: bool) -> tuple[Segment | None, int] | None:
        buf = self._buf
        end = find_close(buf, t)
        if end < 0:
            if not final:
                return _NEED
            end = len(buf)
        candidate = buf[t:end]
        decoded = decode_value(candidate)
        if decoded is not None and isinstance(decoded[0], (dict, list)):
            meaning = interpret_value(decoded[0], self.index, candidate, decoded[1])
            if meaning.is_call:
                return _calls(candidate, meaning), end
            if not decoded[1]:
                return None, end  # valid JSON data: an answer that quotes data is an answer
        if buf[t] == "[":
            meaning = interpret_python(candidate, self.index, require_known=False)
            if meaning.calls:
                return _calls(candidate, meaning), end
        return None, t + 1

    def _fence(self, t: int, final: bool) -> tuple[Segment | None, int] | None:
        buf = self._buf
        newline = buf.find("\n", t + 3)
        if newline < 0:
            if not final:
                return _NEED
            return None, len(buf)
        lang = buf[t + 3 : newline].strip().lower()
        if lang not in _CALL_LANGS:
            self._raw_until = "```"
            return None, newline + 1
        close = buf.find("```", newline + 1)
        if close < 0:
            if not final:
                return _NEED
            body, end = buf[newline + 1 :], len(buf)
        else:
            body, end = buf[newline + 1 : close], close + 3
        meaning = self._inner(body, python=lang in _PYTHON_LANGS)
        if meaning is not None:
            return _calls(buf[t:end], meaning), end
        return None, end

    def _inner(self, body: str, *, python: bool) -> Interpretation | None:
        """Calls in the body of a fence or tag, if the body is nothing but calls."""
        if python:
            meaning = interpret_python(body, self.index, require_known=True)
            if meaning.calls:
                return meaning
        sub = parse_reply(body, self.index)
        if (sub.calls or sub.declined) and not sub.text.strip():
            return Interpretation(sub.calls, declined=sub.declined)
        return None

    def _tag(self, t: int, final: bool) -> tuple[Segment | None, int] | None:
        buf = self._buf
        low = buf[t : t + 40].lower()
        for marker in _MARKERS:
            if low.startswith(marker):
                return Segment("marker", buf[t : t + len(marker)]), t + len(marker)
        if low.startswith("<think>"):
            self._raw_until = "</think>"
            return None, t + len("<think>")
        if low.startswith(_TOOL_CALL_OPEN):
            return self._tool_call_tag(t, final)
        m = _FUNCTION_TAG.match(buf, t)
        if m:
            return self._function_tag(t, m, final)
        if not final and low.startswith("<function=") and ">" not in buf[t : t + 200]:
            return _NEED
        if not final and any(tag.startswith(low) for tag in _TAGS) and ">" not in low:
            return _NEED
        return None, t + 1

    def _tool_call_tag(self, t: int, final: bool) -> tuple[Segment | None, int] | None:
        buf = self._buf
        low = buf.lower()
        start = t + len(_TOOL_CALL_OPEN)
        close = low.find(_TOOL_CALL_CLOSE, start)
        again = low.find(_TOOL_CALL_OPEN, start)
        if close < 0 and again < 0:
            if not final:
                return _NEED
            body, end = buf[start:], len(buf)
        elif close >= 0 and (again < 0 or close < again):
            body, end = buf[start:close], close + len(_TOOL_CALL_CLOSE)
        else:
            body, end = buf[start:again], again
        raw = buf[t:end]
        meaning = self._inner(body, python=True)
        if meaning is None:
            meaning = Interpretation(
                (
                    ParsedCall(
                        "",
                        None,
                        raw,
                        "the text inside <tool_call>…</tool_call> is not a call "
                        'of the form {"name": ..., "arguments": {...}}',
                    ),
                )
            )
        return _calls(raw, meaning), end

    def _function_tag(
        self, t: int, m: re.Match[str], final: bool
    ) -> tuple[Segment | None, int] | None:
        buf = self._buf
        close = buf.lower().find("</function>", m.end())
        if close < 0:
            if not final:
                return _NEED
            body, end = buf[m.end() :], len(buf)
        else:
            body, end = buf[m.end() : close], close + len("</function>")
        raw = buf[t:end]
        name = self.index.canonical(m.group(1))
        params = _PARAMETER_TAG.findall(body)
        if params:
            args = {k: _parameter_value(v) for k, v in params}
            return _calls(raw, Interpretation((ParsedCall(name, args, raw),))), end
        decoded = decode_value(body) if body.strip() else ({}, False)
        if decoded is None or not isinstance(decoded[0], dict):
            call = ParsedCall(name, None, raw, "the arguments are not a JSON object")
        else:
            call = ParsedCall(name, decoded[0], raw, None, decoded[1])
        return _calls(raw, Interpretation((call,))), end

    def _mistral(self, start: int, final: bool) -> tuple[Segment | None, int] | None:
        buf = self._buf
        m = _MISTRAL_ARGS.match(buf, start)
        if m and m.end() < len(buf) and buf[m.end()] == "{":
            end = find_close(buf, m.end())
            if end < 0 and not final:
                return _NEED
            end = len(buf) if end < 0 else end
            decoded = decode_value(buf[m.end() : end])
            args = decoded[0] if decoded is not None else None
            problem = None if isinstance(args, dict) else "the arguments are not a JSON object"
            call = ParsedCall(self.index.canonical(m.group(1)), args, buf[start:end], problem)
            return _calls(buf[start - 12 : end], Interpretation((call,))), end
        if not final and (
            (m is None and _could_be_mistral(buf[start:])) or (m and m.end() >= len(buf))
        ):
            return _NEED
        return Segment("marker", "[TOOL_CALLS]"), start

    def _bare_call(self, t: int, final: bool) -> tuple[Segment | None, int] | None:
        assert self._call_re is not None
        buf = self._buf
        m = self._call_re.match(buf, t)
        if m is None:  # only reachable for a held partial name at the very end
            return None, len(buf)
        end = find_close(buf, m.end() - 1)
        if end < 0:
            if not final:
                return _NEED
            return None, m.end()
        candidate = buf[t:end]
        meaning = interpret_python(candidate, self.index, require_known=True)
        if meaning.calls:
            return _calls(candidate, meaning), end
        return None, m.end()


def parse_reply(text: str, tools: Sequence[ToolSpec] | ToolIndex) -> ParsedReply:
    """Parse a whole reply (the same as feeding it in one piece and finishing)."""
    parser = ReplyParser(tools)
    return ParsedReply(tuple(_merge([*parser.feed(text), *parser.finish()])))


def _calls(raw: str, meaning: Interpretation) -> Segment:
    if meaning.calls:
        return Segment("calls", raw, meaning.calls)
    return Segment("marker", raw, declined=meaning.declined)


def _text(out: list[Segment], text: str) -> None:
    if text:
        out.append(Segment("text", text))


def _merge(segments: Iterable[Segment]) -> list[Segment]:
    out: list[Segment] = []
    for s in segments:
        if s.kind == "text" and out and out[-1].kind == "text":
            out[-1] = Segment("text", out[-1].text + s.text)
        else:
            out.append(s)
    return out


def _partial_suffix(buf: str, start: int, prefixes: Sequence[str], *, word: bool = False) -> int:
    """Length of the longest suffix of ``buf[start:]`` that is a proper prefix of a trigger."""
    low = buf.lower()
    longest = max((len(p) for p in prefixes), default=0)
    for size in range(min(longest, len(buf) - start), 0, -1):
        tail = low[len(buf) - size :]
        if (
            word
            and len(buf) - size > 0
            and (buf[len(buf) - size - 1].isalnum() or buf[len(buf) - size - 1] in "_.")
        ):
            continue
        if any(p.lower().startswith(tail) for p in prefixes):
            return size
    return 0


def _could_be_mistral(rest: str) -> bool:
    return bool(re.fullmatch(r"\s*[A-Za-z_][\w.\-]*\s*(\[A?R?G?S?)?", rest)) or not rest.strip()


def _parameter_value(text: str) -> object:
    stripped = text.strip()
    decoded = decode_value(stripped) if stripped[:1] in '{["0123456789-tfn' else None
    if decoded is not None and not decoded[1]:
        return decoded[0]
    return stripped
