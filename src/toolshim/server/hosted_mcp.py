"""Hosted MCP tools run by the proxy: a Responses request's ``mcp`` tools, for any model.

A ``{"type": "mcp", "server_label", "server_url", …}`` tool whose ``server_url`` starts with
one of the operator's prefixes (``toolshim serve --mcp-allow URL_PREFIX``) is taken out of
the request before it is decoded; the proxy lists the server's tools (``allowed_tools``
narrows them), offers them to the model beside the caller's own tools (natively or emulated,
like any tool), runs the calls the model makes, sends the results back and asks again, until
the model answers (at most :data:`MAX_ROUNDS` rounds; the last one is asked with
``tool_choice: none``). The response's ``output`` starts with one ``mcp_list_tools`` item per
server and one ``mcp_call`` item per call (``output``, or ``error``), as OpenAI writes them.

An ``mcp`` tool whose URL is not allowed is left in the request, and the decoder drops it with
its usual warning: nothing is reached. Served, for now, without streaming and with
``require_approval: "never"`` only; anything else is a 400 saying so. A turn in which the
model also calls one of the caller's own tools ends the loop: that answer goes back as it is.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from toolshim.agent.tools import Tool, ToolResult
from toolshim.engine import Engine
from toolshim.errors import InvalidRequestError, MCPServerError
from toolshim.mcp import MCPHttp, MCPTool, MCPToolset
from toolshim.types import ChatRequest, Completion, Message, ToolCall, ToolChoice

__all__ = ["MAX_ROUNDS", "HostedServer", "HostedTurn", "run_hosted", "take_hosted"]

MAX_ROUNDS = 8
"""Model turns one request may take with hosted MCP tools (the last without tools)."""


@dataclass(frozen=True, slots=True)
class HostedServer:
    """One allowed ``mcp`` tool of a request."""

    label: str
    url: str
    headers: Mapping[str, str]
    allowed_tools: tuple[str, ...] | None


@dataclass
class HostedTurn:
    """What the loop produced: the last completion, the request it answered, the items."""

    completion: Completion
    request: ChatRequest
    items: list[dict[str, Any]]


def take_hosted(payload: dict[str, Any], allow: Sequence[str]) -> list[HostedServer]:
    """Take the allowed ``mcp`` tools out of a Responses payload (the rest stay, to be dropped
    with a warning by the decoder); InvalidRequestError for one toolshim cannot serve."""
    tools = payload.get("tools")
    if not allow or not isinstance(tools, list):
        return []
    kept: list[Any] = []
    hosted: list[HostedServer] = []
    for index, tool in enumerate(tools):
        url = tool.get("server_url") if isinstance(tool, Mapping) else None
        if (
            not isinstance(tool, Mapping)
            or tool.get("type") != "mcp"
            or not isinstance(url, str)
            or not any(url.startswith(prefix) for prefix in allow)
        ):
            kept.append(tool)
            continue
        hosted.append(_server(tool, url, f"tools.{index}"))
    if hosted and payload.get("stream"):
        raise InvalidRequestError(
            "hosted MCP tools are served without streaming for now; send stream: false",
            param="stream",
        )
    labels = [s.label for s in hosted]
    for label in {x for x in labels if labels.count(x) > 1}:
        raise InvalidRequestError(f"two mcp tools share the server_label {label!r}", param="tools")
    payload["tools"] = kept
    return hosted


def _server(tool: Mapping[str, Any], url: str, param: str) -> HostedServer:
    label = tool.get("server_label")
    if not isinstance(label, str) or not label.strip():
        raise InvalidRequestError(
            "an mcp tool needs a non-empty string server_label", param=f"{param}.server_label"
        )
    approval = tool.get("require_approval", "always")
    if approval != "never":
        raise InvalidRequestError(
            f"mcp tool {label!r}: toolshim runs hosted MCP tools without approvals; set "
            f'require_approval to "never" (it was {json.dumps(approval)})',
            param=f"{param}.require_approval",
        )
    headers = tool.get("headers") or {}
    if not isinstance(headers, Mapping) or not all(isinstance(v, str) for v in headers.values()):
        raise InvalidRequestError(
            f"mcp tool {label!r}: headers must be an object of strings", param=f"{param}.headers"
        )
    headers = {str(k): v for k, v in headers.items()}
    token = tool.get("authorization")
    if isinstance(token, str) and token:
        headers.setdefault("Authorization", f"Bearer {token}")
    return HostedServer(label, url, headers, _allowed(tool.get("allowed_tools"), label, param))


def _allowed(value: Any, label: str, param: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    names = value.get("tool_names") if isinstance(value, Mapping) else value
    if names is None and isinstance(value, Mapping):
        return None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise InvalidRequestError(
            f"mcp tool {label!r}: allowed_tools must be a list of tool names or "
            '{"tool_names": [...]}',
            param=f"{param}.allowed_tools",
        )
    return tuple(names)


async def run_hosted(
    engine: Engine,
    request: ChatRequest,
    servers: Sequence[HostedServer],
    *,
    headers: Mapping[str, str] | None,
    warnings: Sequence[str],
    overrides: Mapping[str, Any],
) -> HostedTurn:
    """Answer ``request`` with the hosted servers' tools offered and their calls run here."""
    toolset = MCPToolset(
        MCPHttp(s.url, s.headers, name=s.label, tools=s.allowed_tools) for s in servers
    )
    async with toolset:
        reserved = [t.name for t in request.tools]
        tools = {t.name: t for t in toolset.tools_beside(reserved)}
        offered = {t.name: t for t in toolset.offered(reserved)}
        items = [_list_item(c.name, c.problem, offered) for c in toolset.connections]
        request = replace(request, tools=(*request.tools, *(t.spec for t in tools.values())))
        for round_ in range(1, MAX_ROUNDS + 1):
            if round_ == MAX_ROUNDS:
                request = replace(request, tool_choice=ToolChoice.NONE)
            answer = engine.answer(request, headers=headers, warnings=warnings, **overrides)
            completion = await answer.complete()
            calls = completion.message.tool_calls if completion.choices else ()
            if not calls or any(c.name not in tools for c in calls):
                return HostedTurn(completion, answer.request, items)
            results: list[Message] = []
            for call in calls:
                item, text = await _call(tools[call.name], call, offered[call.name])
                items.append(item)
                results.append(Message("tool", text, tool_call_id=call.id))
            said = Message("assistant", completion.message.content, tool_calls=tuple(calls))
            request = replace(request, messages=(*request.messages, said, *results))
    raise AssertionError("unreachable: the last round is asked without tools")


def _list_item(label: str, problem: str | None, offered: Mapping[str, MCPTool]) -> dict[str, Any]:
    tools = [
        {
            "name": t.listed.name,
            "description": t.listed.description or None,
            "input_schema": t.listed.input_schema,
            "annotations": None,
        }
        for t in offered.values()
        if t.server == label
    ]
    return {
        "id": f"mcpl_{secrets.token_hex(12)}",
        "type": "mcp_list_tools",
        "server_label": label,
        "tools": tools,
        "error": f"the server could not be reached: {problem}" if problem else None,
    }


async def _call(tool: Tool, call: ToolCall, source: MCPTool) -> tuple[dict[str, Any], str]:
    """Run one call: its ``mcp_call`` item, and the text the model reads."""
    item: dict[str, Any] = {
        "id": f"mcp_{secrets.token_hex(12)}",
        "type": "mcp_call",
        "server_label": source.server,
        "name": source.listed.name,
        "arguments": call.arguments,
        "output": None,
        "error": None,
        "status": "completed",
    }
    checked = tool.check(call.arguments)
    if not checked.ok:
        item["error"] = {"type": "mcp_protocol_error", "code": -32602, "message": checked.problem}
    else:
        try:
            result = await tool.invoke(checked)
        except MCPServerError as exc:
            item["error"] = {"type": "mcp_protocol_error", "code": -32603, "message": exc.message}
        else:
            text = result.model_text if isinstance(result, ToolResult) else str(result)
            if isinstance(result, ToolResult) and result.is_error:
                item["error"] = {
                    "type": "mcp_tool_execution_error",
                    "content": [{"type": "text", "text": text}],
                }
            else:
                item["output"] = text
    if item["error"] is not None:
        item["status"] = "failed"
        error = item["error"]
        detail = error.get("message") or error["content"][0]["text"]
        return item, f"Error: {detail}"
    return item, str(item["output"])
