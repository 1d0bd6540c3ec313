"""Tool schemas as their authors meant them.

Tools come from users, and users write JSON Schemas that, taken literally, no call could ever
satisfy. Both the validator and the constrained-output schema read them through
:func:`as_meant`, so a call the author would accept is not re-asked forever (or made
impossible by a grammar). The prompt still shows the schema exactly as it was given.
"""

from __future__ import annotations

from typing import Any

__all__ = ["as_meant"]


def as_meant(node: Any, depth: int = 0) -> Any:
    """``{"type": "array", "items": {"type": "string"}, "enum": ["a", "b"]}`` means "each item
    is a or b": no array equals a string, so taken literally no call could ever pass. People
    write it (BFCL's live cases have it, from real users' tools); the enum is checked on the
    items instead. Other schemas are returned as they are."""
    if depth > 64:
        return node
    if isinstance(node, list):
        return [as_meant(v, depth + 1) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: as_meant(v, depth + 1) for k, v in node.items()}
    kind = out.get("type")
    is_array = kind == "array" or (isinstance(kind, list) and kind == ["array"])
    enum = out.get("enum")
    if is_array and isinstance(enum, list) and enum and not any(isinstance(v, list) for v in enum):
        items = out.get("items")
        items = dict(items) if isinstance(items, dict) else {}
        items.setdefault("enum", enum)
        out["items"] = items
        del out["enum"]
    return out
