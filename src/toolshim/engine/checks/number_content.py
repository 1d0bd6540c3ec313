"""Check ``number_content``: a file a coding agent's request asks to hold a number, written
with more than a number: the number it holds, or a re-ask.

Asked to "count the lines in data.txt and write the number into count.txt", the 0.5B wrote
``wc -l``'s whole line, ``17 data.txt``; asked for a sum it wrote ``sum``'s checksum line
(``47791     1``), asked how many lines hold ERROR it wrote the log itself. When the request
says a file is to hold *the number* (count, sum, total) and a call writes that file whole
(:func:`~toolshim.engine.checks.file_syntax.written_file`) with more than a number: content
that holds exactly one number is written as that number (with a warning; ``17`` for
``17 data.txt``); other content is re-asked once (the number alone, from the command that
computed it, or that command first), and a second reply stands. It also holds for a call
toolshim asked for (an opened step, the content asked alone, :mod:`toolshim.engine.next_step`),
where content it cannot mend drops the call.
"""

from __future__ import annotations

import os
import re

from toolshim.engine.asked import request_text
from toolshim.engine.checks.base import PASS, Check, CheckedReply, Outcome, Reask, revised
from toolshim.engine.checks.file_syntax import rewritten, written_file
from toolshim.engine.turn import Turn

__all__ = ["CHECK", "NAME", "as_asked", "number_asked"]

NAME = "number_content"
_ASKED = re.compile(
    r"\b(?:the|that|this|their|its)\s+(?:\w+\s+)?(?P<word>number|count|sum|total)\b"
    r"(?:[^\n.]|\.(?=\w))*?\b(?:(?:in)?to|in\s+(?:a|the)\s+(?:new\s+)?file)\s+"
    r"(?:(?:a|the)\s+)?(?:new\s+)?(?:file\s+)?(?:named\s+|called\s+)?[`'\"]?"
    r"(?P<file>[\w./-]*\w\.\w+)",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"\A\s*-?\d+(?:[.,]\d+)?\s*\Z")
_NUMBERS = re.compile(r"(?<![\w.,-])-?\d+(?:[.,]\d+)?(?![\w.,])")


def number_asked(text: str) -> dict[str, str]:
    """The files a request asks to hold a number, by base name, with the word it used
    (``{"count.txt": "number"}`` for "write the number into a new file count.txt")."""
    return {os.path.basename(m["file"]): m["word"].lower() for m in _ASKED.finditer(text)}


def _only_number(content: str) -> str | None:
    found = _NUMBERS.findall(content)
    return found[0] if len(found) == 1 else None


def as_asked(turn: Turn, path: str, content: str) -> str:
    """``content`` for ``path`` as the request asks: its one number when the file is to hold
    a number and it holds that and more (else ``content`` as it is)."""
    if not turn.one_step or os.path.basename(path) not in number_asked(request_text(turn)):
        return content
    if _NUMBER.match(content):
        return content
    number = _only_number(content)
    return content if number is None else number + ("\n" if content.endswith("\n") else "")


def _run(reply: CheckedReply) -> Outcome:
    turn = reply.turn
    if not turn.one_step:
        return PASS
    asked = number_asked(request_text(turn))
    if not asked:
        return PASS
    problems = []
    calls = list(reply.calls)
    notes = []
    for position, call in enumerate(calls):
        written = written_file(call)
        if written is None:
            continue
        path, content = written
        word = asked.get(os.path.basename(path))
        if word is None or _NUMBER.match(content):
            continue
        number = _only_number(content)
        mended = rewritten(call, number + "\n") if number is not None else None
        if mended is not None:
            calls[position] = mended
            notes.append(
                f"the model wrote {content.strip()[:80]!r} into {os.path.basename(path)} where "
                f"the request asks for the {word} alone; written as {number}"
            )
            continue
        if NAME in turn.reasked:
            continue
        shown = content if len(content) <= 80 else content[:77] + "..."
        problems.append(
            f"the request asks for the {word} alone in {os.path.basename(path)}, and "
            f"{shown!r} is not one number. Write only the number, taken from the output of the "
            "command that computed it; if no command has computed it yet, run that command first"
        )
    if problems:
        return Reask(tuple(problems))
    return revised(reply, calls, notes)


CHECK = Check(NAME, _run, continued=True)
