"""Chat messages on the wire: one message (with its tool calls) read from and written to JSON."""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from typing import Any

from toolshim.errors import UpstreamProtocolError
from toolshim.types import EMPTY, Message, ToolCall

__all__ = ["message_from_dict", "message_to_dict"]

_MESSAGE_FIELDS = frozenset({"role", "content", "tool_calls", "tool_call_id", "name"})


def message_from_dict(data: Mapping[str, Any]) -> Message:
    """Read one message leniently (a request's messages were validated before)."""
    content = data.get("content")
    if isinstance(content, list):
        content = tuple(
            p if isinstance(p, Mapping) else {"type": "text", "text": str(p)} for p in content
        )
    elif content is not None and not isinstance(content, str):
        content = json.dumps(content, ensure_ascii=False)
    calls = tuple(_call_from_dict(c, i) for i, c in enumerate(data.get("tool_calls") or ()))
    extra = {k: v for k, v in data.items() if k not in _MESSAGE_FIELDS}
    return Message(
        role=str(data.get("role") or "assistant"),
        content=content,
        tool_calls=calls,
        tool_call_id=data.get("tool_call_id"),
        name=data.get("name"),
        extra=extra or EMPTY,
    )


def _call_from_dict(data: Any, index: int) -> ToolCall:
    if not isinstance(data, Mapping):
        raise UpstreamProtocolError(f"tool_calls[{index}] is not an object")
    function = data.get("function") or {}
    arguments = function.get("arguments")
    if arguments is None:
        arguments = "{}"
    elif not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    extra = {k: v for k, v in data.items() if k not in ("id", "type", "function", "index")}
    return ToolCall(
        id=str(data.get("id") or f"call_{secrets.token_hex(12)}"),
        name=str(function.get("name") or ""),
        arguments=arguments,
        type=str(data.get("type") or "function"),
        extra=extra or EMPTY,
    )


def message_to_dict(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role}
    if isinstance(message.content, tuple):
        out["content"] = [dict(p) for p in message.content]
    elif message.content is not None or message.role == "assistant":
        out["content"] = message.content
    if message.tool_calls:
        out["tool_calls"] = [_call_to_dict(c) for c in message.tool_calls]
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    if message.name is not None:
        out["name"] = message.name
    if message.extra:  # (EMPTY is a Mapping, not a dict: updating with it costs a walk)
        out.update(message.extra)
    return out


def _call_to_dict(call: ToolCall) -> dict[str, Any]:
    out = {
        "id": call.id,
        "type": call.type,
        "function": {"name": call.name, "arguments": call.arguments},
    }
    if call.extra:
        out.update(call.extra)
    return out
