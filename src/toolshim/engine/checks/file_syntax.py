"""Check ``file_syntax``: a file written whole whose content its own kind cannot read is
re-asked once.

A call that writes a whole file (a writing tool's ``content``, or a shell here-document,
``cat > hello.py <<'EOF'``) of a kind toolshim can read without running anything — Python
(compiled, never run) and JSON — is read as that kind; content that does not read is re-asked
once, saying why ("hello.py is not valid Python: invalid syntax, line 1"). Asked through Codex
and Claude Code to create "a Python program that prints Hello, World!", the 0.5B wrote the
text ``Hello, World!`` into hello.py. A second reply stands as it is (a broken file can be
what is asked for).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import replace

from toolshim.dialects.interpret import ParsedCall
from toolshim.engine.asked import SHELL_TOOLS, WRITING_TOOLS
from toolshim.engine.checks.base import PASS, Check, CheckedReply, Outcome, Reask

__all__ = ["CHECK", "NAME", "rewritten", "unreadable", "written_file"]

NAME = "file_syntax"
_PATH_KEYS = ("file_path", "path", "filename", "file")
_CONTENT_KEYS = ("content", "file_text", "text")
_HEREDOC = re.compile(
    r"\A\s*cat\s*>\s*(?P<path>\"[^\"]+\"|'[^']+'|\S+)\s*<<-?\s*(?P<q>['\"]?)(?P<end>\w+)(?P=q)"
    r"[ \t]*\n(?P<body>.*?)\n?(?P=end)\s*\Z",
    re.S,
)


def _written(call: ParsedCall) -> tuple[str, str, str, re.Match[str] | None] | None:
    """(path, content, the argument that holds it, the here-document's match) of a call that
    writes a whole file, else None."""
    arguments = call.arguments
    if not isinstance(arguments, Mapping):
        return None
    name = call.name.lower()
    if name in WRITING_TOOLS:
        path = next((arguments[k] for k in _PATH_KEYS if isinstance(arguments.get(k), str)), None)
        key = next((k for k in _CONTENT_KEYS if isinstance(arguments.get(k), str)), None)
        return (path, arguments[key], key, None) if path and key is not None else None
    if name in SHELL_TOOLS:
        key = next((k for k, v in arguments.items() if isinstance(v, str)), None)
        found = _HEREDOC.match(arguments[key]) if key is not None else None
        if key is None or found is None:
            return None
        try:
            (path,) = shlex.split(found["path"])
        except ValueError:
            return None
        return path, found["body"], key, found
    return None


def written_file(call: ParsedCall) -> tuple[str, str] | None:
    """(path, content) of a call that writes a whole file, else None."""
    written = _written(call)
    return None if written is None else written[:2]


def rewritten(call: ParsedCall, content: str) -> ParsedCall | None:
    """``call`` writing ``content`` in place of what it wrote (None: it writes no whole file)."""
    written = _written(call)
    if written is None:
        return None
    _, _, key, heredoc = written
    if heredoc is not None:
        start, end = heredoc.span("body")
        text = heredoc.string
        content = text[:start] + content.rstrip("\n") + text[end:]
    arguments = {**call.arguments, key: content}
    return replace(call, arguments=arguments)


def unreadable(path: str, content: str) -> str | None:
    """Why ``content`` is not a file of ``path``'s kind (Python, JSON), or None."""
    lowered = path.lower()
    if lowered.endswith(".py"):
        try:
            compile(content, path, "exec", dont_inherit=True)  # compiled, never run
        except SyntaxError as exc:
            return f"{exc.msg}, line {exc.lineno}"
        except ValueError as exc:  # a NUL byte
            return str(exc)
        return None
    if lowered.endswith(".json"):
        try:
            json.loads(content)
        except ValueError as exc:
            return str(exc)
    return None


def _run(reply: CheckedReply) -> Outcome:
    if NAME in reply.turn.reasked:
        return PASS
    problems = []
    for call in reply.calls:
        written = written_file(call)
        if written is None:
            continue
        path, content = written
        why = unreadable(path, content)
        if why is None:
            continue
        kind, holds = (
            ("Python", "Python code, not the text it prints or a description of it")
            if path.lower().endswith(".py")
            else ("JSON", "JSON data, not a description of it")
        )
        problems.append(
            f"the content {call.name} would write into {path} is not valid {kind} ({why}): "
            f"the file holds {holds}. Write the call again with the file's real content"
        )
    return Reask(tuple(problems)) if problems else PASS


CHECK = Check(NAME, _run)
