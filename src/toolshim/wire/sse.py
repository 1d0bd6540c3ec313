"""Server-sent events framing shared by the codecs: ``event:``/``data:`` lines as bytes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

__all__ = ["sse_event"]


def sse_event(data: Mapping[str, Any], name: str | None = None) -> bytes:
    """One event: ``data: {json}`` (``event: name`` before it when named), then a blank line."""
    line = b"data: " + orjson.dumps(data) + b"\n\n"
    return b"event: " + name.encode() + b"\n" + line if name else line
