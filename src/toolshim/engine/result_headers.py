"""A coding agent's own bookkeeping in its tool results, left out of a small model's prompt.

Codex opens each ``exec_command`` result with lines about its session (``Chunk ID: 305e38``,
``Wall time: 0.0000 seconds``, ``Original token count: 2``) before the exit code and the
output. A small model reads them as part of the value: told to write the port it had just
read, the 0.5B wrote those lines into ``port.txt`` above ``8421``. They also make every turn's
new tokens longer (the cache serves all but the newest result). With the brief
(:func:`~toolshim.engine.focus.brief_system`), the result is shown from its exit code on;
the caller's messages are unchanged, and the warning says how many were shortened.
"""

from __future__ import annotations

import re
from dataclasses import replace

from toolshim.types import ChatRequest

__all__ = ["brief_results", "brief_results_warning"]

_SESSION_LINE = re.compile(
    r"^(?:Chunk ID: \S+|Wall time: [0-9.]+ seconds?|Original token count: \d+)[ \t]*\n", re.M
)
_OUTPUT = "Output:"


def brief_results(request: ChatRequest) -> tuple[ChatRequest, int]:
    """The request with the session lines above each tool result's ``Output:`` left out, and
    how many results were shortened (0: the request unchanged)."""
    shortened = 0
    messages = []
    for message in request.messages:
        text = message.text if message.role == "tool" else ""
        head, found, rest = text.partition(_OUTPUT)
        if found and _SESSION_LINE.search(head):
            message = message.with_text(_SESSION_LINE.sub("", head) + found + rest)
            shortened += 1
        messages.append(message)
    if not shortened:
        return request, 0
    return replace(request, messages=tuple(messages)), shortened


def brief_results_warning(count: int) -> str:
    """The warning that says how many results were shown without their session lines."""
    return (
        f"{count} tool result(s) shown to the model without the agent's session lines (Chunk ID, "
        "Wall time, Original token count) above their output (--full-system keeps them)"
    )
