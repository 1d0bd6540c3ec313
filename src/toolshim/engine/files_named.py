"""Files a coding agent's request names that no call has touched yet: what is still missing,
said to a small model after results.

Asked "python3 test_calc.py fails. Fix the bug in calc.py", the 1.5B read ``test_calc.py``,
then read it again, and again after being told it had the result, then gave up in text: it
never opened ``calc.py``. Told which named files no call has used, it has the next step
spelled out. A name is a word with an extension (``calc.py``, ``package.json``,
``src/app.ts``) or one of the usual extensionless files (``VERSION``, ``Makefile``); a call
has touched it when its arguments hold it (a ``Read`` of its path, a shell command naming it).
Version numbers (``1.2.3``) and URLs are not names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from toolshim.types import Message

__all__ = [
    "files_named",
    "request_index",
    "untagged",
    "untouched_files",
    "untouched_since_request",
]

_NAME = re.compile(
    r"(?<![\w/.@:-])"  # not inside a longer path, address or URL
    r"((?:[\w.-]+/)*"
    r"(?:[A-Za-z_][\w-]*|[\w-]*[A-Za-z_][\w-]*)?\.[A-Za-z][A-Za-z0-9]{0,7}"
    r"|(?:[\w.-]+/)*(?:VERSION|Makefile|Dockerfile|README|LICENSE|CHANGELOG|Gemfile|Procfile))"
    r"(?![\w/-]|\.\w)"
)
_TAGGED = re.compile(r"<([A-Za-z][\w-]*)>.*?</\1>", re.DOTALL)
_NOT_FILES = frozenset({"e.g", "i.e", "etc", "vs"})
_NOT_FOUND = re.compile(r"no such file or directory|file does not exist", re.IGNORECASE)
"""A call whose result says its file is not there has not used it: the 1.5B read port.txt,
the file it was asked to create, and with port.txt "used" it was opened to edit config.ini."""


def untagged(text: str) -> str:
    """``text`` without the blocks a client adds in tags (Claude Code's ``<system-reminder>``
    about commits and pull requests "you create"): the user's own words."""
    return _TAGGED.sub(" ", text)


def files_named(text: str) -> list[str]:
    """The file names ``text`` mentions, in order, each once; not those of blocks a client
    adds in tags (``<system-reminder>…</system-reminder>``), which are not the user's."""
    names: list[str] = []
    for match in _NAME.finditer(untagged(text)):
        name = match.group(1).rstrip(".")
        if name.lower() in _NOT_FILES:
            continue
        if name not in names:
            names.append(name)
    return names


def untouched_files(request: str, arguments: Iterable[str]) -> list[str]:
    """The files ``request`` names that none of the calls' ``arguments`` (their JSON text)
    holds."""
    arguments = list(arguments)
    return [
        name
        for name in files_named(request)
        if not any(_mentions(text, name) for text in arguments)
    ]


def _mentions(arguments: str, name: str) -> bool:
    """``arguments`` names the file ``name`` (as itself, not as part of a longer name)."""
    return re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-]|\.\w)", arguments) is not None


def request_index(messages: Sequence[Message]) -> int | None:
    """The index of the last user message with text (the request), or None."""
    return next(
        (
            i
            for i in range(len(messages) - 1, -1, -1)
            if messages[i].role == "user" and messages[i].text.strip()
        ),
        None,
    )


def untouched_since_request(messages: Sequence[Message]) -> list[str]:
    """The files the last user message with text names that no call after it has used (a call
    whose result says the file does not exist has not used it)."""
    index = request_index(messages)
    if index is None:
        return []
    after = messages[index + 1 :]
    missing = {m.tool_call_id for m in after if m.role == "tool" and _NOT_FOUND.search(m.text)}
    return untouched_files(
        messages[index].text,
        (c.arguments for m in after for c in m.tool_calls if c.id not in missing),
    )
