"""The tolerant extraction layer: find tool calls in model text, whole or streamed (sans-IO).

:class:`ReplyParser` cuts a reply into segments: prose (``text``), ``calls`` and ``marker``
tokens that are dropped (``<|python_tag|>``, ``[TOOL_CALLS]``, a stray ``</tool_call>``). It
recognises every dialect's shape and every model family's own call markup (the table in
``docs/formats.md``), so a model that drifts from the format it was asked for, or writes its
native markup into ``content``, is still understood:

* JSON objects and arrays (several, inside prose, with single quotes, trailing commas,
  unclosed or stray braces), also in ``json`` / ``tool_code`` / ``python`` fences;
* tagged markup, read by :mod:`._tags` and :mod:`._native` (Hermes, Qwen3-Coder, GLM, Kimi-K2,
  DeepSeek, ``<invoke>``, gpt-oss, Mistral, Gemma, Granite, Phi-4, …);
* Python-style calls ``[f(a=1), g(b=2)]``, and calls that open with a tool's name
  (:mod:`._bare`);
* ``<think>`` blocks, fences of other languages and `inline code` are prose, never parsed.

What is not a call stays prose: JSON data without a tool-shaped name (``{"name": "Ada",
"age": 3}``), code in a ``bash`` fence, a tool mentioned inline in a sentence. A call to a
tool that is not offered is reported with that unknown name, so that the engine can re-ask.

The parser is incremental: :meth:`ReplyParser.feed` returns what is already certain, holding
back only text that might still become a call (the opener of any family), and
:meth:`ReplyParser.finish` resolves the rest. Whole-text parsing is ``feed(text) + finish()``;
every decision depends only on text already received, so streamed and whole parses agree at
every chunk split (property tests check it). Scans resume where they stopped, so feeding many
small chunks costs linear time; so does any reply, whatever it holds: one bracket scan serves
every bracket nested in it, brackets nested more than 64 levels deep are data, and json-repair
only sees short candidates, within a budget per reply (see :mod:`._scan`).

A reply that opens with ``{"answer": "`` (the text branch of the constrained json dialect)
streams the decoded string as it arrives (:mod:`._answer`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypedDict

from toolshim.dialects._answer import ANSWER_OPEN, AnswerString, answer_end
from toolshim.dialects._bare import name_before, read_bare_call, read_named
from toolshim.dialects._cut import cut_call_opening
from toolshim.dialects._dispatch import read_fence, read_tag
from toolshim.dialects._harmony import read_harmony
from toolshim.dialects._named import NAME_TAG
from toolshim.dialects._nameless import lone_list_calls
from toolshim.dialects._native import (
    ARROW_OPEN,
    INVOKE_NAME,
    read_arrow_call,
    read_gemma,
    read_kimi,
)
from toolshim.dialects._python_list import read_python_list
from toolshim.dialects._scan import (
    OPEN,
    TOO_DEEP,
    BracketIndex,
    RepairBudget,
    closer_overlap,
    decode_value,
    find_ci,
)
from toolshim.dialects._tags import (
    FUNCTION_CLOSE,
    MARKERS,
    NEED,
    TAG_PREFIXES,
    Resolution,
    only_stray,
    read_function_close,
    read_inline_code,
    read_mistral,
)
from toolshim.dialects._values import repair_quotes
from toolshim.dialects._words import held_word, word_triggers
from toolshim.dialects.calls import MARKUPS, Interpretation, ParsedCall, ToolIndex
from toolshim.dialects.interpret import interpret_value
from toolshim.dialects.python_calls import interpret_python
from toolshim.dialects.segments import ParsedReply, Segment, calls_segment, merge_segments
from toolshim.errors import ConfigError
from toolshim.types import ToolSpec

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "MARKUPS",
    "ParsedCall",
    "ParsedReply",
    "ParserOptions",
    "ReplyParser",
    "Segment",
    "parse_reply",
]

_BRACKET_MARKERS = ("[TOOL_CALLS]", "[TOOL_REQUEST]", "[END_TOOL_REQUEST]", "[/TOOL_CALL]")
_TRIGGER = re.compile(r"[{\[<`]")
_LEADING_SPACE = re.compile(r"\s*")
_MAYBE_CALL = re.compile(r"name|tool|function|calls|arguments|parameters|[<(`]", re.IGNORECASE)
_LINE_LEAD = re.compile(
    r"(?:[^\S\n]|" + "|".join(re.escape(m) for m in MARKERS) + ")*", re.IGNORECASE
)
"""What may precede a bare call on its line: spaces and marker tokens."""
_HOLD_PREFIXES = tuple(
    p.lower() for p in (*TAG_PREFIXES, "```", *_BRACKET_MARKERS, ARROW_OPEN, INVOKE_NAME, NAME_TAG)
)
_HOLD_PARTIALS = frozenset(p[:i] for p in _HOLD_PREFIXES for i in range(1, len(p)))
"""Every proper prefix of a tag, marker or fence: text ending in one must wait for more."""
_HOLD_SPAN = max(len(p) for p in _HOLD_PREFIXES)


class ReplyParser:
    """Incremental tool-call extraction over a growing reply (no I/O).

    ``python_unknown``: report Python-style calls to tools that are not offered
    (``[lookup(x=1)]``) as calls with an unknown name, instead of prose (the ``pythonic``
    dialect asks for that syntax, so there it is a wrong call rather than an example).
    ``empty_list_declines``: a reply that starts with ``[]`` declines to call a tool.
    """

    def __init__(
        self,
        tools: Sequence[ToolSpec] | ToolIndex,
        *,
        bare_calls: bool = True,
        python_unknown: bool = False,
        empty_list_declines: bool = False,
        budget: RepairBudget | None = None,
        markup: str | None = None,
    ) -> None:
        if markup is not None and markup not in MARKUPS:
            known = ", ".join(sorted(MARKUPS))
            raise ConfigError(f"unknown call markup {markup!r}; known: {known}", param="markup")
        self.markup = markup
        """The model family's own call markup, if known (see :data:`MARKUPS`)."""
        self.index = tools if isinstance(tools, ToolIndex) else ToolIndex(tools)
        self.budget = budget if budget is not None else RepairBudget()
        """json-repair's allowance for this reply (shared with the parses of tag bodies)."""
        self._buf = ""
        self._pos = 0
        self._raw_until: str | None = None  # inside <think> or a code fence: prose until this
        self._python_unknown = python_unknown
        self._empty_list_declines = empty_list_declines
        self._bare_calls = bare_calls
        names = tuple(sorted(self.index.names, key=len, reverse=True)) if bare_calls else ()
        self._word_re, self._word_literals, self._word_span = word_triggers(names)
        self._brackets = BracketIndex()
        self._searched: dict[tuple[str, int], int] = {}
        self._line_leads: dict[int, int] = {}  # line start -> end of its spaces and markers
        self._reply_start: int | None = None  # index of the first non-space character
        self._answer: AnswerString | None = None
        self._bracket_search = (0, -1, 0)  # (from, first trigger found or -1, buffer length)
        self._named_token: int | None = None  # the token after a name found by looking back
        self._call_end = -1  # where the last call read ends

    # -- public ---------------------------------------------------------------------------

    def feed(self, delta: str) -> list[Segment]:
        """Add text; return the segments that are now certain."""
        self._buf += delta
        return self._run(final=False)

    def finish(self, delta: str = "") -> list[Segment]:
        """The reply is complete (with ``delta`` as its last piece): resolve everything held."""
        self._buf += delta
        return self._run(final=True)

    @property
    def received(self) -> str:
        """All text fed so far."""
        return self._buf

    @property
    def pending(self) -> str:
        """Text received but not yet resolved."""
        return self._buf[self._pos :]

    # -- what the tag readers use (see _tags.Host) -------------------------------------------

    @property
    def buf(self) -> str:
        return self._buf

    def close_of(self, start: int) -> int:
        return self._brackets.close_of(self._buf, start)

    def decode(self, start: int, end: int) -> tuple[object, bool] | None:
        completed = ""
        if (
            end >= len(self._buf)
            and self._buf[start : start + 1] in ("{", "[", "(")
            and self.close_of(start) == OPEN
        ):
            # Cut off: the text runs to the end still inside the bracket. (A bracket that
            # closes exactly where a streamed piece ends is complete, not cut off.)
            completed = self._brackets.completed(self._buf, start)
        return decode_value(
            self._buf[start:end], completed=completed, budget=self.budget, fixer=self._fix_quotes
        )

    def _fix_quotes(self, text: str) -> dict[str, Any] | None:
        return repair_quotes(text, self.index.argument_types())

    def find(self, pattern: re.Pattern[str], key: int, begin: int) -> re.Match[str] | None:
        slot = (pattern.pattern, key)
        m = pattern.search(self._buf, max(begin, self._searched.get(slot, begin)))
        if m is None:
            self._searched[slot] = max(begin, len(self._buf) - 64)
        return m

    def raw_until(self, closer: str) -> None:
        self._raw_until = closer

    def line_lead(self, t: int) -> int:
        line_start = self._buf.rfind("\n", 0, t) + 1
        lead = self._line_leads.get(line_start)
        if lead is None:
            # It stops at a character of the call's name at the latest, so it stays true.
            lead = self._line_leads[line_start] = _skip(_LINE_LEAD, self._buf, line_start)
        return lead

    def inner(self, body: str, *, python: bool) -> Interpretation | None:
        if python:
            meaning = interpret_python(body, self.index, require_known=not self._python_unknown)
            if meaning.calls:
                return meaning
        sub = parse_reply(
            body,
            self.index,
            bare_calls=self._bare_calls,
            python_unknown=self._python_unknown,
            budget=self.budget,
            markup=self.markup,
        )
        if (sub.calls or sub.declined) and only_stray(sub.text):
            return Interpretation(sub.calls, declined=sub.declined)
        return None

    # -- scanning ---------------------------------------------------------------------------

    def _advance(self, pos: int) -> None:
        if pos != self._pos:
            self._pos = pos
            self._searched.clear()

    def _run(self, final: bool) -> list[Segment]:
        out: list[Segment] = []
        while self._pos < len(self._buf) or (final and self._answer is not None):
            if self._answer is not None:
                if not self._scan_answer(out, final):
                    break
                continue
            if self._raw_until is not None:
                if not self._scan_raw(out, final):
                    break
                continue
            start = self._pos
            t, word, held = self._next_trigger(start, final)
            if t > start:
                out.append(Segment("text", self._buf[start:t]))
                self._advance(t)
            if held or t >= len(self._buf):
                break
            if word is None and self._held_at(t):
                if not final:
                    break
                if self._buf.startswith(("<|", "<｜"), t):
                    # A special token cut off by the end of the reply: a marker all the same.
                    out.append(Segment("marker", self._buf[t:]))
                    self._advance(len(self._buf))
                    break
            resolved = self._resolve(t, word, final)
            if resolved is NEED:
                break
            segment, end = resolved
            out.append(Segment("text", self._buf[t:end]) if segment is None else segment)
            if segment is not None and (
                segment.kind == "calls" or segment.text.lower() == FUNCTION_CLOSE
            ):
                self._call_end = end  # a call, or a </function> that closed one again
            self._advance(end)
        return merge_segments(out)

    def _scan_answer(self, out: list[Segment], final: bool) -> bool:
        """Stream the string of ``{"answer": "…"}``; False while it needs more text."""
        answer = self._answer
        assert answer is not None
        if not answer.ended:
            text, pos, answer.ended = answer.read(self._buf, self._pos, final)
            if text:
                out.append(Segment("text", text))
            if pos > self._pos:
                self._advance(pos)
            if not answer.ended:
                return False
        rest = answer_end(self, answer.start, self._pos, final)
        if rest is NEED:
            return False  # what follows the string has not arrived yet
        self._answer = None
        segment, end = rest
        if segment is not None:
            out.append(segment)
        self._advance(end)
        return True

    def _starts_reply(self, t: int) -> bool:
        """True when only spaces come before ``t``."""
        if self._reply_start is None:
            first = _skip(_LEADING_SPACE, self._buf, 0)
            if first == len(self._buf):
                return False
            self._reply_start = first
        return t == self._reply_start

    def _scan_raw(self, out: list[Segment], final: bool) -> bool:
        closer = self._raw_until
        assert closer is not None
        buf = self._buf
        j = find_ci(buf, closer, self._pos)
        if j >= 0:
            out.append(Segment("text", buf[self._pos : j + len(closer)]))
            self._advance(j + len(closer))
            self._raw_until = None
            return True
        end = len(buf) if final else len(buf) - closer_overlap(buf, self._pos, closer)
        out.append(Segment("text", buf[self._pos : end]))
        self._advance(end)
        if final:
            self._raw_until = None
        return False

    def _next_bracket(self, start: int) -> int:
        """Index of the first ``{ [ < ` `` at or after ``start`` (the buffer's length if none),
        remembering the last search so that prose without any costs one pass, not one per
        word trigger."""
        searched_from, found, searched_to = self._bracket_search
        n = len(self._buf)
        if searched_from <= start and start <= found < searched_to:
            return found
        begin = max(start, searched_to) if searched_from <= start and found < 0 else start
        m = _TRIGGER.search(self._buf, begin)
        at = m.start() if m is not None else -1
        self._bracket_search = (start, at, n)
        return at if at >= 0 else n

    def _next_trigger(self, start: int, final: bool) -> tuple[int, re.Match[str] | None, bool]:
        buf = self._buf
        n = len(buf)
        best = self._next_bracket(start)
        word = None
        if self._word_re is not None:
            word = self._word_re.search(buf, start, min(n, best + 1))
            if word is not None and word.start() < best:
                best = word.start()
            else:
                word = None
        if best == n and not final:
            hold = held_word(self._buf, start, self._word_literals, self._word_span)
            if hold:
                return n - hold, None, True
        self._named_token = None
        if word is None and best < n and buf[best] == "<":
            named = name_before(self, start, best, final)
            if named is not None:
                self._named_token = best
                return named, None, False
        return best, word, False

    def _held_at(self, t: int) -> bool:
        """True when the text from ``t`` is only a partial tag, marker or fence (wait for more)."""
        return len(self._buf) - t < _HOLD_SPAN and self._buf[t:].lower() in _HOLD_PARTIALS

    def _resolve(self, t: int, word: re.Match[str] | None, final: bool) -> Resolution:
        buf = self._buf
        if word is not None:
            return self._word(t, word, final)
        token = self._named_token
        if token is not None and token > t:
            return read_named(self, t, token, final)
        ch = buf[t]
        if ch == "`":
            if buf.startswith("```", t):
                return read_fence(self, t, final)
            return read_inline_code(self, t, final)
        if ch == "<":
            if buf[t : t + len(FUNCTION_CLOSE)].lower() == FUNCTION_CLOSE:
                return read_function_close(buf, t, self._call_end)
            return read_tag(self, t, final)
        if ch == "[":
            head = buf[t : t + 20].upper()
            if head.startswith("[TOOL_CALLS]"):
                return read_mistral(self, t + len("[TOOL_CALLS]"), final)
            if head.startswith(ARROW_OPEN):
                return read_arrow_call(self, t, final)
            for marker in _BRACKET_MARKERS[1:]:
                if head.startswith(marker):
                    return Segment("marker", buf[t : t + len(marker)]), t + len(marker)
        return self._bracketed(t, final)

    def _word(self, t: int, m: re.Match[str], final: bool) -> Resolution:
        if m.group("functools"):
            return Segment("marker", m.group("functools")), m.start("functools") + 9
        if m.group("harmony") is not None:
            return read_harmony(self, t, m.end(), m.group("harmony"), final)
        if m.group("kimi") is not None:
            return read_kimi(self, t, t, final)
        if m.group("gemma") is not None:
            return read_gemma(self, t, m.group("gemma"), m.end() - 1, final)
        return read_bare_call(self, t, m, final)

    def _bracketed(self, t: int, final: bool) -> Resolution:
        buf = self._buf
        if buf[t] == "{" and self._starts_reply(t):
            opening = ANSWER_OPEN.match(buf, t)
            if opening is not None:
                # {"answer": "..."} opening a reply: the constrained json dialect's text branch.
                self._answer = AnswerString(t)
                return Segment("marker", opening.group()), opening.end()
        end = self.close_of(t)
        if end == TOO_DEEP:
            return None, t + 1  # deeper than any call: data (the brackets inside are read)
        cut_off = end == OPEN
        if cut_off:
            if not final:
                return NEED
            end = len(buf)
        candidate = buf[t:end]
        if cut_off and buf[t] == "{":
            cut_call = cut_call_opening(candidate, self.index)
            if cut_call is not None:
                return cut_call, end
        if buf[t] == "[":
            if self._empty_list_declines and candidate.strip() == "[]" and self._starts_reply(t):
                return Segment("marker", candidate, declined=True), end
            listed = read_python_list(
                self,
                t,
                end,
                cut_off=cut_off,
                starts_reply=self._starts_reply(t),
                python_unknown=self._python_unknown,
            )
            if listed is not None:
                return listed
            if not cut_off and self._starts_reply(t) and not buf[end:].strip():
                calls = lone_list_calls(candidate, self.index)
                if calls is not None:
                    # The whole reply so far: the calls it means, unless more follows.
                    return (Segment("calls", candidate, calls), end) if final else NEED
        if _MAYBE_CALL.search(candidate) is None:
            return None, end  # no name, tool or tag anywhere inside: data, or prose
        decoded = self.decode(t, end)
        if decoded is not None and isinstance(decoded[0], (dict, list)):
            meaning = interpret_value(
                decoded[0], self.index, candidate, decoded[1], budget=self.budget
            )
            if meaning.is_call:
                return calls_segment(candidate, meaning), end
            if not decoded[1]:
                return None, end  # valid JSON data: an answer that quotes data is an answer
        return None, t + 1


class ParserOptions(TypedDict, total=False):
    """The keyword options of :class:`ReplyParser`, which :func:`parse_reply` passes on."""

    bare_calls: bool
    python_unknown: bool
    empty_list_declines: bool
    budget: RepairBudget | None
    markup: str | None


def parse_reply(
    text: str, tools: Sequence[ToolSpec] | ToolIndex, **options: Unpack[ParserOptions]
) -> ParsedReply:
    """Parse a whole reply in one final pass, with :class:`ReplyParser`'s ``options``
    (property tests check that this equals feeding it piece by piece and finishing)."""
    parser = ReplyParser(tools, **options)
    return ParsedReply(tuple(merge_segments(parser.finish(text))))


def _skip(pattern: re.Pattern[str], text: str, pos: int) -> int:
    """Where a pattern that may match nothing (``\\s*``) stops, from ``pos``."""
    m = pattern.match(text, pos)
    return m.end() if m is not None else pos
