"""What a coding agent's request asks for, and what the calls since it have done: a change
to files (written, fixed, edited …), a command to run; whether a call changes files or ran a
command. Read by the next step (:mod:`.next_step`) and by the check on repeated calls
(:mod:`.checks.answered_repeats`)."""

from __future__ import annotations

import re

from toolshim.engine.files_named import request_index, untagged
from toolshim.engine.history import is_error_result
from toolshim.engine.turn import Turn

__all__ = [
    "CHANGE_ASKED",
    "RUN_ASKED",
    "SHELL_TOOLS",
    "WRITING_TOOLS",
    "action_left",
    "changes",
    "command_ran",
    "request_text",
]

CHANGE_ASKED = re.compile(
    r"\b(write|writes|create|save|put|store|fix|change|edit|update|append|add|insert|replace|"
    r"bump|rename|delete|remove|make)\b",
    re.IGNORECASE,
)
"""Words of a request that asks for a change to files (not only for an answer)."""


def command_ran(turn: Turn) -> bool:
    """A shell call has been made since the request and did not fail (the count it asked for
    is in a result: the 1.5B ran ``grep -c``, then, opened as a command again, ran it again)."""
    messages = turn.request.messages
    index = request_index(messages)
    after = messages[(-1 if index is None else index) + 1 :]
    # A command that failed computed nothing (the 1.5B's unbalanced ``echo $(awk …`` was
    # refused; taken as run, the sum was opened as a write and it wrote 14 for 50).
    failed = {m.tool_call_id for m in after if m.role == "tool" and is_error_result(m.text)}
    return any(
        c.name.lower() in SHELL_TOOLS and c.id not in failed for m in after for c in m.tool_calls
    )


def request_text(turn: Turn) -> str:
    """The text of the user's last message, without the client's tagged context."""
    for message in reversed(turn.request.messages):
        if message.role == "user" and message.text.strip():
            return untagged(message.text)
    return ""


WRITING_TOOLS = frozenset(
    {"write", "edit", "multiedit", "notebookedit", "apply_patch", "write_file", "edit_file"}
)
SHELL_TOOLS = frozenset(
    {"bash", "shell", "exec_command", "run_command", "run_shell_command", "local_shell"}
)
CHANGING_COMMAND = re.compile(
    r"(?<![0-9&])>{1,2}(?!&)|\btee\b|\bsed\s+-i|\bperl\s+-pi|\bmv\b|\bcp\b|\brm\b|\bmkdir\b|"
    r"\btouch\b|\bpatch\b|\bgit\s+(apply|commit|checkout)\b|\bpython3?\s+-c\b.*\bopen\("
)


def changes(name: str, arguments: str) -> bool:
    """Whether a call changes files: a writing tool, or a shell command that writes."""
    lowered = name.lower()
    if lowered in WRITING_TOOLS:
        return True
    return lowered in SHELL_TOOLS and bool(CHANGING_COMMAND.search(arguments))


RUN_ASKED = re.compile(r"\b(run|execute)\b", re.IGNORECASE)
"""Words of a request that asks for a command to be run: asked to run compute.py and say what
it prints, the 1.5B read it and answered with a number of its own (2175 for 35350)."""


def action_left(turn: Turn) -> bool:
    """The user's last request asks for a change and no call since it has made one, or asks
    for a command to be run and none has."""
    messages = turn.request.messages
    index = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].role == "user"), None)
    if index is None:
        return False
    text = untagged(messages[index].text)
    if RUN_ASKED.search(text) and not command_ran(turn):
        return True
    if not CHANGE_ASKED.search(text):
        return False
    return not any(
        changes(c.name, c.arguments) for m in messages[index + 1 :] for c in m.tool_calls
    )
