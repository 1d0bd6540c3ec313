"""Reading a server-sent-events body in tests: what toolshim writes, and nothing else.

Blocks are separated by a blank line; a block's lines are ``event: NAME`` and ``data: TEXT``
(several data lines join with newlines). Any other line is an error that names it, so a test
reading a stream also checks it is well formed. The chat stream's ``[DONE]`` is data like any.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["SSEEvent", "read_sse"]


@dataclass(frozen=True)
class SSEEvent:
    """One event: its ``event:`` name (None without one) and its data."""

    data: str
    event: str | None = None

    def json(self) -> Any:
        return json.loads(self.data)


def read_sse(body: str | bytes | Iterable[bytes]) -> list[SSEEvent]:
    """The events of ``body``: text, bytes, or the byte chunks a stream was written in."""
    if isinstance(body, bytes):
        text = body.decode()
    elif isinstance(body, str):
        text = body
    else:
        text = b"".join(body).decode()
    events: list[SSEEvent] = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        name: str | None = None
        data: list[str] = []
        for line in block.split("\n"):
            if line.startswith("event: "):
                name = line[len("event: ") :]
            elif line.startswith("data: "):
                data.append(line[len("data: ") :])
            else:
                raise ValueError(f"not an SSE event or data line: {line!r} in {block!r}")
        events.append(SSEEvent("\n".join(data), name))
    return events
