"""Which of a coding agent's planned calls can go out together: the first, and each later one
whose every value the conversation already holds.

A small model in a coding agent writes its whole plan in its first reply. Returned whole, a
plan goes wrong where a later call needs an earlier one's result (``Write(file_path=
"port.txt", content="1")`` before ``config.ini`` was read: the 1.5B made the port up). Cut to
its first call, it goes wrong the other way: after the first result the 1.5B started its plan
over, read the same file again and again, and never made the calls it had planned (asked to
change the version in ``VERSION`` and ``setup.cfg`` it planned two reads and two edits, all
right, and made one read). A later call goes out with the first when it needs nothing from a
result: every word and number of its string values is already in the conversation (the
request, the environment, earlier results). ``Edit(old_string="1.2.3", new_string="1.3.0")``
for "change the version from 1.2.3 to 1.3.0" goes; ``Write(content="8421")`` before the read
that shows 8421 waits. The plan is cut at the first call that waits: the calls after it may
need its result too. A shell command reads the files it needs itself, so of its words only its
numbers of two digits or more must have been said (``$1``, ``2>&1`` are the shell's) (``echo 8421 > port.txt`` before the read waits; ``awk … numbers.txt
> sum.txt`` goes). A later command that takes an earlier one's outcome at run time waits too:
``$?`` in a new shell is not the earlier call's status (the 1.5B planned ``grep -c ERROR
app.log`` then ``echo $? > errors.txt`` and wrote 0 for 3), and after an earlier command,
``$(…)`` or backticks compute again what its result will show (``echo $(wc -l data.txt) > count.txt`` wrote
``17 data.txt`` where the count was asked); after the result the model writes the value. So
does a command that names no file after a call that does: planned after ``Read(data.txt)``,
``wc -l`` counted its empty input, 0.

After a result the 1.5B writes its plan again from the top: the calls it has results for,
then the next one (``[Read(file_path="greet.py"), Bash(command="python3 test_greet.py")]``
where the test had been run). :func:`skip_answered` keeps what is new in such a reply; only a
reply of nothing but answered calls is a repeat to correct.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

from toolshim.dialects.interpret import ParsedCall
from toolshim.engine.client_tools import SHELL_TOOLS
from toolshim.engine.files_named import files_named
from toolshim.engine.turn import Turn, call_key
from toolshim.json_walk import json_values
from toolshim.types import Message

__all__ = ["calls_ready", "conversation_text", "skip_answered"]

_TOKEN = re.compile(r"[A-Za-z0-9_]+(?:[.'-][A-Za-z0-9_]+)*")
_RUN_TIME = re.compile(r"\$\?|\$\(|`")
"""A command's use of another command's outcome: its status or its output."""


def conversation_text(messages: Sequence[Message]) -> str:
    """Everything said so far, lowercased: messages and the arguments of the calls made."""
    parts: list[str] = []
    for message in messages:
        parts.append(message.text)
        parts.extend(c.arguments for c in message.tool_calls)
    return "\n".join(parts).lower()


def skip_answered(turn: Turn, calls: Sequence[ParsedCall]) -> Sequence[ParsedCall]:
    """``calls`` less those whose results the conversation holds, when any call is left; else
    ``calls`` as they are (a repeat, corrected by the checks)."""
    answered = turn.answered_results
    new = [c for c in calls if call_key(c.name, c.arguments_json) not in answered]
    if not new or len(new) == len(calls):
        return calls
    skipped = ", ".join(repr(c.name) for c in calls if c not in new)
    turn.warn(f"skipped call(s) {skipped} written again with their results already in")
    return new


def calls_ready(calls: Sequence[ParsedCall], said: str) -> list[ParsedCall]:
    """The first call and those after it up to (not with) the first that holds a value not in
    ``said`` (:func:`conversation_text`)."""
    ready = list(calls[:1])
    for call in calls[1:]:
        shell = _is_shell(call)
        if call.problem is not None or not _all_said(call.arguments, said, shell):
            break
        text = json.dumps(call.arguments)
        if shell and ("$?" in text or (_RUN_TIME.search(text) and any(map(_is_shell, ready)))):
            break
        if shell and _names_files(calls[0].arguments) and not _names_files(call.arguments):
            break  # ``wc -l`` after a read of data.txt: it counts what the read will show
        ready.append(call)
    return ready


def _names_files(arguments: Any) -> bool:
    """Some string value names a file (``data.txt``) or a path."""
    return any(files_named(token) or "/" in token for token in _strings(arguments))


def _strings(value: Any) -> Iterator[str]:
    """Every string in a JSON value, and every other scalar as its JSON text."""
    for leaf in json_values(value):
        yield leaf if isinstance(leaf, str) else json.dumps(leaf)


def _is_shell(call: ParsedCall) -> bool:
    """A shell command reads what it needs itself (``awk '{s += $1} END {print s}' numbers.txt
    > sum.txt``): only its numbers must have been said, not its words."""
    return call.name.lower() in SHELL_TOOLS


def _all_said(arguments: Any, said: str, numbers_only: bool = False) -> bool:
    return all(
        token.lower() in said
        for token in _tokens(arguments)
        if not numbers_only or (len(token) > 1 and re.fullmatch(r"\d[\d.]*", token))
    )


def _tokens(value: Any) -> Iterator[str]:
    for text in _strings(value):
        yield from _TOKEN.findall(text)
