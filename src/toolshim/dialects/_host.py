"""What every reader of tagged call markup shares: the parser it reads through (Host), its
answer (Resolution, NEED), a tagged call's body up to its closing tag, and the calls it builds
from JSON arguments."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import NamedTuple, Protocol

from toolshim.dialects._scan import MAX_DEPTH, RepairBudget
from toolshim.dialects.calls import Interpretation, ParsedCall, ToolIndex
from toolshim.dialects.segments import Segment, calls_segment

__all__ = [
    "NEED",
    "Host",
    "Resolution",
    "TaggedBody",
    "json_arguments_call",
    "not_a_tag",
    "one_call",
    "read_tagged",
    "tagged_body",
    "too_deep",
]

NEED = None
"""A reader's answer when the text so far cannot decide (only before the reply is final)."""

Resolution = tuple[Segment | None, int] | None
"""The segment read (None: the text there is prose) and where it ends; or :data:`NEED`."""


class Host(Protocol):
    """What a reader needs from the parser."""

    index: ToolIndex
    budget: RepairBudget
    markup: str | None

    @property
    def buf(self) -> str: ...

    def close_of(self, start: int) -> int:
        """End of the bracket opened at ``start`` (OPEN while it is open, TOO_DEEP when it
        nests too deeply to be a call); resumable."""

    def decode(self, start: int, end: int) -> tuple[object, bool] | None:
        """``decode_value(buf[start:end])``, completing a bracket that is still open."""

    def find(self, pattern: re.Pattern[str], key: int, begin: int) -> re.Match[str] | None:
        """``pattern.search(buf, begin)``, resuming an earlier failed search for ``key``."""

    def inner(self, body: str, *, python: bool) -> Interpretation | None:
        """The calls in a tag's or fence's body, if the body is nothing but calls."""


class TaggedBody(NamedTuple):
    """A tagged call's body: its text, where the call ends (after the closing tag, or at the
    end of a final reply that never closed it) and the closing tag (None: never closed)."""

    text: str
    end: int
    close: re.Match[str] | None


def tagged_body(
    host: Host,
    closing: re.Pattern[str],
    t: int,
    head_end: int,
    final: bool,
    closes: Callable[[str], bool] | None = None,
) -> TaggedBody | None:
    """The body of the call that starts at ``t``, from the end of its opening tag
    (``head_end``) to the first ``closing`` match; None (answer :data:`NEED`) while no
    closing tag has come and more text may. Where ``closes`` says a match is not this call's
    own closing tag (the next call's opening tag), the call ends before it."""
    buf = host.buf
    close = host.find(closing, t, head_end)
    if close is not None:
        own = closes is None or closes(close.group())
        return TaggedBody(
            buf[head_end : close.start()], close.end() if own else close.start(), close
        )
    if not final:
        return None
    return TaggedBody(buf[head_end:], len(buf), None)


def read_tagged(
    host: Host,
    closing: re.Pattern[str],
    t: int,
    head_end: int,
    final: bool,
    build: Callable[[str, str], ParsedCall],
    closes: Callable[[str], bool] | None = None,
) -> Resolution:
    """The one call that starts at ``t`` with an opening tag ending at ``head_end``: its body
    read up to ``closing`` as :func:`tagged_body` does, ``build(body, raw)`` making the call."""
    found = tagged_body(host, closing, t, head_end, final, closes)
    if found is None:
        return NEED
    raw = host.buf[t : found.end]
    return one_call(raw, build(found.text, raw), found.end)


def not_a_tag(host: Host, t: int, final: bool, ends: str = ">") -> Resolution:
    """The answer where the text at ``t`` does not match the opening tag a reader looks for:
    wait (:data:`NEED`) while the tag may still be coming (no ``ends`` yet, case ignored, in
    the next 200 characters of a reply that goes on), else prose up to the next character."""
    if not final and ends not in host.buf[t : t + 200].lower():
        return NEED
    return None, t + 1


def one_call(raw: str, call: ParsedCall, end: int) -> Resolution:
    """The resolution of a reader that found the one call ``call`` in ``raw``, ending at
    ``end``."""
    return calls_segment(raw, Interpretation((call,))), end


def json_arguments_call(name: str, decoded: tuple[object, bool] | None, raw: str) -> ParsedCall:
    """A call whose arguments were decoded from JSON (None: they did not decode)."""
    if decoded is None or not isinstance(decoded[0], Mapping):
        return ParsedCall(name, None, raw, "the arguments are not a JSON object")
    return ParsedCall(name, dict(decoded[0]), raw, None, decoded[1])


def too_deep(name: str, raw: str) -> Segment:
    """A call whose arguments nest deeper than any call's."""
    problem = f"the arguments nest more than {MAX_DEPTH} levels deep"
    return calls_segment(raw, Interpretation((ParsedCall(name, None, raw, problem),)))
