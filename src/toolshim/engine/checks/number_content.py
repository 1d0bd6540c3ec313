"""Check ``number_content``: a file a coding agent's request asks to hold a number, written
with more than a number, is re-asked once.

Asked to "count the lines in data.txt and write the number into count.txt", the 0.5B wrote
``wc -l``'s whole line, ``17 data.txt``; asked for a sum it wrote ``sum``'s checksum line
(``47791     1``), asked how many lines hold ERROR it wrote the log itself. When the request
says a file is to hold *the number* (count, sum, total) and a call writes that file whole
(:func:`~toolshim.engine.checks.file_syntax.written_file`) with anything but one number, the
reply is re-asked once: the number alone, from the command that computed it, or that command
first. A second reply stands.
"""

from __future__ import annotations

import os
import re

from toolshim.engine.asked import request_text
from toolshim.engine.checks.base import PASS, Check, CheckedReply, Outcome, Reask
from toolshim.engine.checks.file_syntax import written_file

__all__ = ["CHECK", "NAME", "number_asked"]

NAME = "number_content"
_ASKED = re.compile(
    r"\b(?:the|that|this|their|its)\s+(?:\w+\s+)?(?P<word>number|count|sum|total)\b"
    r"(?:[^\n.]|\.(?=\w))*?\b(?:(?:in)?to|in\s+(?:a|the)\s+(?:new\s+)?file)\s+"
    r"(?:(?:a|the)\s+)?(?:new\s+)?(?:file\s+)?(?:named\s+|called\s+)?[`'\"]?"
    r"(?P<file>[\w./-]*\w\.\w+)",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"\A\s*-?\d+(?:[.,]\d+)?\s*\Z")


def number_asked(text: str) -> dict[str, str]:
    """The files a request asks to hold a number, by base name, with the word it used
    (``{"count.txt": "number"}`` for "write the number into a new file count.txt")."""
    return {os.path.basename(m["file"]): m["word"].lower() for m in _ASKED.finditer(text)}


def _run(reply: CheckedReply) -> Outcome:
    turn = reply.turn
    if not turn.one_step or NAME in turn.reasked:
        return PASS
    asked = number_asked(request_text(turn))
    if not asked:
        return PASS
    problems = []
    for call in reply.calls:
        written = written_file(call)
        if written is None:
            continue
        path, content = written
        word = asked.get(os.path.basename(path))
        if word is None or _NUMBER.match(content):
            continue
        shown = content if len(content) <= 80 else content[:77] + "..."
        problems.append(
            f"the request asks for the {word} alone in {os.path.basename(path)}, and "
            f"{shown!r} is not one number. Write only the number, taken from the output of the "
            "command that computed it; if no command has computed it yet, run that command first"
        )
    return Reask(tuple(problems)) if problems else PASS


CHECK = Check(NAME, _run)
