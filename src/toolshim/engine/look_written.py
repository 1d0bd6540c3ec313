"""Look at the file a command wrote before a coding agent's turn ends.

A small model in a shell-only agent (Codex) writes a value into a file with a pipeline it
cannot see the outcome of: asked for the port of ``config.ini`` "into a new file port.txt",
the 1.5B ran ``grep port config.ini | awk '{print $2}' > port.txt`` (``port = 8421``: its
second field is ``=``), then answered "the port is written to port.txt", and asked whether
anything was left, said so again. Where a turn would end in text after such a command, and
no call has looked at the file since, the file is shown instead (:func:`look_call`: ``cat``
in the same tool, or ``head`` of the files the command read and the file it wrote, so the
value it should have written is beside the one it did), once: the result is then in front
of the model, which fixes it or answers. A literal write (``echo 8421 > port.txt``, a here-document) needs no look: its
command shows what it wrote.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence

from toolshim.dialects.calls import ParsedCall
from toolshim.engine.client_tools import SHELL_TOOLS
from toolshim.engine.files_named import files_named, request_index, untagged
from toolshim.types import Message, ToolCall

__all__ = ["look_call", "looked_content"]

_COMMAND_KEYS = ("cmd", "command")
_LINES = 40
_REDIRECT = re.compile(r"(?<![0-9&<>])>{1,2}\s*(?!&)(['\"]?)([^\s'\"|;&<>()]+)\1")
_LITERAL = re.compile(r"\A\s*(?:(?:echo|printf)\s[^$`|;&]*|cat\s*>[^|;&]*<<[^|;&]*)\Z", re.S)


def looked_content(messages: Sequence[Message]) -> tuple[str, str] | None:
    """The file the last call looked at (:func:`look_call`'s look, or any ``cat``) after a
    computed command wrote it (its path as the command wrote it), and what the result shows
    it holds; else None."""
    index = request_index(messages)
    if index is None or not messages or messages[-1].role != "tool":
        return None
    named = {name.rsplit("/", 1)[-1] for name in files_named(untagged(messages[index].text))}
    calls = [c for m in messages[index + 1 :] for c in m.tool_calls]
    if len(calls) < 2 or calls[-1].id != messages[-1].tool_call_id:
        return None
    shown = _command(calls[-1])
    looked = shown[0] if shown else None
    written = next(
        (w for c in reversed(calls[:-1]) if (w := _computed_target(c, named)) is not None), None
    )
    if looked is None or written is None:
        return None
    base = written[0].rsplit("/", 1)[-1]
    # A look reads: ``cat > port.txt <<EOF`` writes (read as a look, toolshim's own rewrite
    # of port.txt was looked at and rewritten again, over and over).
    if not re.match(r"\s*(?:cat|head)\b", looked) or ">" in looked or base not in looked:
        return None
    text = messages[-1].text
    _, found, output = text.partition("Output:\n")
    text = output if found else text
    section = re.search(rf"==> [^\n]*{re.escape(base)} <==\n(.*?)(?=\n==> |\Z)", text, re.S)
    content = (section.group(1) if section else text).strip("\n")
    return written[0], content


def _command(call: ToolCall) -> tuple[str, str, dict[str, object]] | None:
    """A shell call's command, its key and its arguments; None for any other call."""
    if call.name.lower() not in SHELL_TOOLS:
        return None
    try:
        arguments = json.loads(call.arguments or "{}")
    except ValueError:
        return None
    if not isinstance(arguments, dict):
        return None
    key = next((k for k in _COMMAND_KEYS if k in arguments), None)
    value = arguments[key] if key else None
    command = value[-1] if isinstance(value, list) and value else value
    return (command, key, arguments) if key and isinstance(command, str) else None


def look_call(messages: Sequence[Message]) -> ParsedCall | None:
    """``cat`` of the file the request names that the last computed command since the request
    wrote, in that command's tool, when no call has named it since; else None."""
    index = request_index(messages)
    if index is None:
        return None
    named = {name.rsplit("/", 1)[-1] for name in files_named(untagged(messages[index].text))}
    calls = [c for m in messages[index + 1 :] for c in m.tool_calls]
    for at in range(len(calls) - 1, -1, -1):
        written = _computed_target(calls[at], named)
        if written is None:
            continue
        target, key, arguments, command = written
        base = target.rsplit("/", 1)[-1]
        if any(base in later.arguments for later in calls[at + 1 :]):
            return None
        inputs = [
            name
            for name in files_named(command)
            if name.rsplit("/", 1)[-1] in named and name.rsplit("/", 1)[-1] != base
        ]
        # With the files it read beside it, the model sees what the value should have been.
        files = " ".join(shlex.quote(f) for f in (*inputs, target))
        look = f"head -n {_LINES} {files}" if inputs else f"cat {shlex.quote(target)}"
        value: str | list[str] = ["bash", "-lc", look] if isinstance(arguments[key], list) else look
        return ParsedCall(calls[at].name, {**arguments, key: value})
    return None


def _computed_target(
    call: ToolCall, named: set[str]
) -> tuple[str, str, dict[str, object], str] | None:
    """The named file a shell call's computed command writes, its command's key, its
    arguments and its command; None for any other call."""
    found = _command(call)
    if found is None or _LITERAL.match(found[0]):
        return None
    command, key, arguments = found
    targets = [m.group(2) for m in _REDIRECT.finditer(command)]
    target = next((t for t in reversed(targets) if t.rsplit("/", 1)[-1] in named), None)
    return (target, key, arguments, command) if target else None
