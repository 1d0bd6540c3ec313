"""An MCP tool result as a :class:`~toolshim.agent.tools.ToolResult`: text joined, data kept.

Text content blocks are joined with blank lines; an embedded text resource counts as text; an
image, audio clip or binary resource is named in brackets (the model cannot read it as text).
``structuredContent`` is kept as the result's data, and it is what the model reads when the
server sent no text. ``isError`` makes the result an error the model must report.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolshim.agent.tools import ToolResult

__all__ = ["tool_result"]


def tool_result(content: Sequence[Any], structured: Any, is_error: bool) -> ToolResult:
    """The result of a ``tools/call`` from its ``content`` blocks, ``structuredContent`` and
    ``isError`` (SDK objects or plain dicts alike)."""
    parts = [text for block in content if (text := _block_text(block))]
    return ToolResult("\n\n".join(parts), structured, is_error=bool(is_error))


def _block_text(block: Any) -> str:
    kind = _field(block, "type")
    if kind == "text":
        return str(_field(block, "text") or "")
    if kind == "resource":
        resource = _field(block, "resource")
        text = _field(resource, "text")
        if isinstance(text, str):
            return text
        return f"[resource {_field(resource, 'uri')} ({_field(resource, 'mime_type', 'mimeType')})]"
    if kind == "resource_link":
        return f"[resource link {_field(block, 'uri')}: {_field(block, 'name')}]"
    if kind in ("image", "audio"):
        return f"[{kind} ({_field(block, 'mime_type', 'mimeType')})]"
    return f"[{kind} content]"


def _field(item: Any, *names: str) -> Any:
    for name in names:
        if isinstance(item, dict):
            if name in item:
                return item[name]
        elif hasattr(item, name):
            return getattr(item, name)
    return None
