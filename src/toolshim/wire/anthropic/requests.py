"""Anthropic Messages requests read into core types (the table is in
:mod:`toolshim.wire.anthropic.codec`); malformed ones raise ``InvalidRequestError`` naming
the field at fault."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from toolshim.errors import InvalidRequestError
from toolshim.types import ChatRequest, Message, ToolCall, ToolChoice, ToolSpec
from toolshim.wire.base import Decoded, split_overrides

__all__ = ["decode_request", "server_tool_warning"]

_PASSED: dict[str, type | tuple[type, ...]] = {
    "max_tokens": int,
    "temperature": (int, float),
    "top_p": (int, float),
    "top_k": int,
}


def server_tool_warning(name: str, kind: str) -> str:
    return f"server tool {name!r} ({kind}) dropped: toolshim serves custom (function) tools only"


# -- requests -------------------------------------------------------------------------------


def _bad(message: str, param: str) -> InvalidRequestError:
    return InvalidRequestError(message, param=param)


def _text_of(blocks: Any, param: str) -> str:
    """A string, or the text of a list of text blocks."""
    if isinstance(blocks, str):
        return blocks
    if not isinstance(blocks, list):
        raise _bad(f"{param} must be a string or a list of text blocks", param)
    texts = []
    for i, block in enumerate(blocks):
        if not isinstance(block, Mapping) or block.get("type") != "text":
            raise _bad(f"{param}.{i} must be a text block", f"{param}.{i}")
        texts.append(str(block.get("text") or ""))
    return "\n".join(texts)


def _image_part(block: Mapping[str, Any], param: str) -> dict[str, Any]:
    source = block.get("source")
    if isinstance(source, Mapping) and source.get("type") == "base64":
        url = f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"
    elif isinstance(source, Mapping) and source.get("type") == "url":
        url = str(source.get("url") or "")
    else:
        raise _bad(f"{param}: an image needs a base64 or url source", f"{param}.source")
    return {"type": "image_url", "image_url": {"url": url}}


def _part(block: Any, where: str) -> dict[str, Any]:
    """A text or image block as a content part (a user's text, a tool result's content)."""
    kind = block.get("type") if isinstance(block, Mapping) else None
    if kind == "text":
        return {"type": "text", "text": str(block.get("text") or "")}
    if kind == "image":
        return _image_part(block, where)
    source = block.get("source") if kind == "document" else None
    if isinstance(source, Mapping) and source.get("type") == "text":
        return {"type": "text", "text": str(source.get("data") or "")}
    raise _bad(f"{where}: a block of type {kind!r} cannot be sent here", where)


def _parts(blocks: list[Any], param: str) -> list[dict[str, Any]]:
    return [_part(block, f"{param}.{i}") for i, block in enumerate(blocks)]


def _content(parts: list[dict[str, Any]]) -> str | tuple[Mapping[str, Any], ...]:
    if all(p["type"] == "text" for p in parts):
        return "\n".join(p["text"] for p in parts)
    return tuple(parts)


def _tool_result(block: Mapping[str, Any], param: str) -> tuple[Message, list[dict[str, Any]]]:
    """A ``tool_result`` block as a ``role=tool`` message, and its images (they go in the
    user message after it: a tool message carries text)."""
    call_id = block.get("tool_use_id")
    if not isinstance(call_id, str) or not call_id:
        raise _bad(f"{param}: a tool_result needs its tool_use_id", f"{param}.tool_use_id")
    content = block.get("content")
    images: list[dict[str, Any]] = []
    if content is None:
        text = ""
    elif isinstance(content, str):
        text = content
    elif isinstance(content, list):
        parts = _parts(content, f"{param}.content")
        text = "\n".join(p["text"] for p in parts if p["type"] == "text")
        images = [p for p in parts if p["type"] != "text"]
    else:
        raise _bad(f"{param}.content must be a string or a list of blocks", f"{param}.content")
    if block.get("is_error"):
        text = f"Error: {text}"
    return Message("tool", text, tool_call_id=call_id), images


def _messages(raw: Any) -> list[Message]:
    if not isinstance(raw, list) or not raw:
        raise _bad("messages must be a non-empty list", "messages")
    out: list[Message] = []
    for i, entry in enumerate(raw):
        param = f"messages.{i}"
        if not isinstance(entry, Mapping):
            raise _bad(f"{param} must be an object", param)
        role = entry.get("role")
        content = entry.get("content")
        if role == "system":  # (Claude Code sends some; Chat Completions takes them anywhere)
            out.append(Message("system", _text_of(content, f"{param}.content")))
            continue
        if role not in ("user", "assistant"):
            raise _bad(f"{param}.role must be 'user', 'assistant' or 'system', not {role!r}", param)
        if isinstance(content, str):
            out.append(Message(role, content))
            continue
        if not isinstance(content, list):
            raise _bad(f"{param}.content must be a string or a list of blocks", param)
        where = f"{param}.content"
        if role == "assistant":
            out.extend(_assistant(content, where))
            continue
        results: list[Message] = []
        parts: list[dict[str, Any]] = []
        for j, block in enumerate(content):
            if isinstance(block, Mapping) and block.get("type") == "tool_result":
                result, images = _tool_result(block, f"{where}.{j}")
                results.append(result)
                parts.extend(images)
            else:
                parts.append(_part(block, f"{where}.{j}"))
        out.extend(results)
        if parts or not results:
            out.append(Message("user", _content(parts)))
    return out


def _assistant(blocks: list[Any], param: str) -> list[Message]:
    """An assistant message; the ``mcp_tool_use``/``mcp_tool_result`` pairs of a hosted MCP
    answer (see :mod:`toolshim.server.hosted_mcp`) split it into the call, its result as a
    ``role=tool`` message, and what was said after it."""
    out: list[Message] = []
    texts: list[str] = []
    calls: list[ToolCall] = []

    def said() -> None:
        if texts or calls:
            text = "".join(texts)
            out.append(
                Message("assistant", text or (None if calls else ""), tool_calls=tuple(calls))
            )
            texts.clear()
            calls.clear()

    for j, block in enumerate(blocks):
        where = f"{param}.{j}"
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind == "text":
            texts.append(str(block.get("text") or ""))
        elif kind in ("tool_use", "mcp_tool_use"):
            name, call_id = block.get("name"), block.get("id")
            if not isinstance(name, str) or not isinstance(call_id, str):
                raise _bad(f"{where}: a {kind} block needs an id and a name", where)
            calls.append(
                ToolCall(call_id, name, json.dumps(block.get("input") or {}, ensure_ascii=False))
            )
        elif kind == "mcp_tool_result":
            said()
            result, _ = _tool_result(block, where)
            out.append(result)
        elif kind in ("thinking", "redacted_thinking"):
            continue
        else:
            raise _bad(f"{where}: an assistant message cannot hold a {kind!r} block", where)
    said()
    return out or [Message("assistant", "")]


def _tools(raw: Any) -> tuple[tuple[ToolSpec, ...], tuple[str, ...]]:
    if raw is None:
        return (), ()
    if not isinstance(raw, list):
        raise _bad("tools must be a list", "tools")
    specs: list[ToolSpec] = []
    warnings: list[str] = []
    for i, tool in enumerate(raw):
        if not isinstance(tool, Mapping) or not isinstance(tool.get("name"), str):
            raise _bad(f"tools.{i} must be an object with a name", f"tools.{i}")
        kind = tool.get("type") or "custom"
        if kind != "custom":
            warnings.append(server_tool_warning(tool["name"], str(kind)))
            continue
        schema = tool.get("input_schema")
        if not isinstance(schema, Mapping):
            raise _bad(f"tools.{i}.input_schema must be a JSON Schema object", f"tools.{i}")
        specs.append(
            ToolSpec(
                name=tool["name"],
                description=str(tool.get("description") or ""),
                parameters=schema,
            )
        )
    return tuple(specs), tuple(warnings)


def _tool_choice(raw: Any, tools: Sequence[ToolSpec]) -> tuple[ToolChoice | None, bool | None]:
    """The choice and ``parallel_tool_calls`` (False with ``disable_parallel_tool_use``)."""
    if raw is None:
        return None, None
    if not isinstance(raw, Mapping):
        raw = {}
    kind = raw.get("type")
    parallel = False if raw.get("disable_parallel_tool_use") else None
    match kind:
        case "auto":
            return ToolChoice.AUTO, parallel
        case "any":
            return ToolChoice.REQUIRED, parallel
        case "none":
            return ToolChoice.NONE, None
        case "tool":
            name = raw.get("name")
            names = [t.name for t in tools]
            if name not in names:
                raise _bad(
                    f"tool_choice names the tool {name!r}, which is not among the tools: "
                    + ", ".join(repr(n) for n in names),
                    "tool_choice.name",
                )
            return ToolChoice.function(name), parallel
    raise _bad(
        'tool_choice must be {"type": "auto" | "any" | "none"} or {"type": "tool", "name": …}',
        "tool_choice",
    )


def decode_request(payload: dict[str, Any]) -> Decoded:
    """A Messages request in core types (see the table in the module docstring)."""
    overrides = split_overrides(payload)
    model = payload.get("model")
    if not isinstance(model, str) or not model:
        raise _bad("model is required (a model the upstream serves)", "model")
    messages = _messages(payload.get("messages"))
    if payload.get("system"):
        messages.insert(0, Message("system", _text_of(payload["system"], "system")))
    tools, warnings = _tools(payload.get("tools"))
    choice, parallel = _tool_choice(payload.get("tool_choice"), tools)
    stream = payload.get("stream") is True
    params: dict[str, Any] = {}
    for key, kinds in _PASSED.items():
        value = payload.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, kinds):
            raise _bad(f"{key} must be a number, not {type(value).__name__}", key)
        params[key] = value
    stops = payload.get("stop_sequences")
    if stops:
        if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
            raise _bad("stop_sequences must be a list of strings", "stop_sequences")
        params["stop"] = stops
    if stream:
        params["stream_options"] = {"include_usage": True}
    request = ChatRequest(
        model=model,
        messages=tuple(messages),
        tools=tools,
        tool_choice=choice,
        parallel_tool_calls=parallel if tools else None,
        stream=stream,
        params=params,
    )
    return Decoded(request, overrides, warnings)
