"""Hosted MCP tools run by the proxy, for any model: a Responses request's ``mcp`` tools and
a Messages request's ``mcp_servers``.

A server whose URL starts with one of the operator's prefixes (``toolshim serve --mcp-allow
URL_PREFIX``) is taken out of the request before it is decoded; the proxy lists its tools
(``allowed_tools`` / ``tool_configuration.allowed_tools`` narrow them), offers them to the
model beside the caller's own tools (natively or emulated, like any tool), runs the calls the
model makes, sends the results back and asks again until the model answers (at most
:data:`MAX_ROUNDS` rounds; the last is asked with ``tool_choice: none``). The answer starts
with what the protocol defines for it: on Responses one ``mcp_list_tools`` item per server and
one ``mcp_call`` item per call (``output`` or ``error``); on Messages an ``mcp_tool_use`` and
an ``mcp_tool_result`` block per call.

A server whose URL is not allowed is never reached: a Responses ``mcp`` tool stays in the
request and the decoder drops it with its usual warning; a Messages server is dropped with a
warning here. A streamed request gets the finished answer replayed as stream events
(:mod:`toolshim.server.hosted_stream`). On Responses, a call that needs an approval
(``require_approval``) ends the request with an ``mcp_approval_request`` item, and the answer
to it in the next request's input is honoured (:mod:`toolshim.server.hosted_approvals`). A turn in which the model also calls one of
the caller's own tools ends the loop: that answer goes back as it is.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal
from urllib.parse import urlsplit

from toolshim.agent.tools import Tool, ToolResult
from toolshim.engine import Engine
from toolshim.errors import InvalidRequestError, MCPServerError
from toolshim.mcp import MCPHttp, MCPTool, MCPToolset
from toolshim.mcp.connection import ListedTool
from toolshim.server.hosted_approvals import (
    Approval,
    ApprovalRequest,
    ApprovalRule,
    approval_rule,
    take_approvals,
)
from toolshim.server.hosted_stream import replay_messages, replay_responses
from toolshim.types import ChatRequest, Completion, Message, ToolCall, ToolChoice

__all__ = [
    "MAX_ROUNDS",
    "PROTOCOLS",
    "HostedCall",
    "HostedProtocol",
    "HostedServer",
    "HostedTurn",
    "allowed_url",
    "run_hosted",
]

MAX_ROUNDS = 8
"""Model turns one request may take with hosted MCP tools (the last without tools)."""


@dataclass(frozen=True, slots=True)
class HostedServer:
    """One allowed ``mcp`` tool of a request."""

    label: str
    url: str
    headers: Mapping[str, str]
    allowed_tools: tuple[str, ...] | None
    approval: ApprovalRule = field(default_factory=lambda: ApprovalRule(default=False))
    """Which tools wait for the caller's approval (none: Messages has no approvals)."""


@dataclass(frozen=True, slots=True)
class Hosted:
    """What a request carries for the proxy to run: servers, warnings for the dropped ones,
    and the answers to earlier approval requests."""

    servers: list[HostedServer] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    approvals: list[Approval] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class HostedCall:
    """One call the proxy ran: on which server, the tool's own name, what came back."""

    id: str
    server: str
    name: str
    arguments: str
    text: str
    """The output, or the error's text."""
    failure: Literal["protocol", "execution"] | None = None
    """None: the tool answered; ``protocol``: the server failed or refused, or the arguments
    broke the schema; ``execution``: the tool reported an error (``isError``)."""
    approval_request_id: str | None = None

    @property
    def input(self) -> Any:
        try:
            return json.loads(self.arguments or "{}")
        except ValueError:
            return {}


@dataclass
class HostedTurn:
    """What the loop produced: the last completion, the request it answered, the listings
    (``(server, tools, problem)``) and the calls."""

    completion: Completion
    request: ChatRequest
    listings: list[tuple[str, list[ListedTool], str | None]]
    calls: list[HostedCall]
    requests: list[ApprovalRequest] = field(default_factory=list)
    """Calls that wait for the caller's approval (the request ends with them)."""


@dataclass(frozen=True, slots=True)
class HostedProtocol:
    """How one protocol carries hosted MCP: where the servers are, how the answer shows them."""

    take: Callable[[dict[str, Any], Sequence[str]], Hosted]
    """Take the allowed servers (and approvals) out of the payload; warn of the others."""
    write: Callable[[HostedTurn, dict[str, Any]], None]
    """Put the listings and calls into the encoded answer."""
    replay: Callable[[Mapping[str, Any]], Iterator[bytes]]
    """The finished answer as the protocol's stream events (a streamed request)."""


def _take_responses(payload: dict[str, Any], allow: Sequence[str]) -> Hosted:
    """The allowed ``mcp`` tools of a Responses payload (the rest stay, to be dropped with a
    warning by the decoder); InvalidRequestError for one toolshim cannot serve."""
    tools = payload.get("tools")
    if not allow or not isinstance(tools, list):
        return Hosted()
    kept: list[Any] = []
    hosted: list[HostedServer] = []
    for index, tool in enumerate(tools):
        url = tool.get("server_url") if isinstance(tool, Mapping) else None
        if (
            not isinstance(tool, Mapping)
            or tool.get("type") != "mcp"
            or not isinstance(url, str)
            or not allowed_url(url, allow)
        ):
            kept.append(tool)
            continue
        hosted.append(_server(tool, url, f"tools.{index}"))
    labels = [s.label for s in hosted]
    for label in {x for x in labels if labels.count(x) > 1}:
        raise InvalidRequestError(f"two mcp tools share the server_label {label!r}", param="tools")
    payload["tools"] = kept
    return Hosted(hosted, [], take_approvals(payload) if hosted else [])


def _take_messages(payload: dict[str, Any], allow: Sequence[str]) -> Hosted:
    """The allowed ``mcp_servers`` of a Messages payload (all are taken out; the others are
    dropped with a warning)."""
    servers = payload.pop("mcp_servers", None)
    if servers is None:
        return Hosted()
    if not isinstance(servers, list):
        raise InvalidRequestError("mcp_servers must be a list", param="mcp_servers")
    hosted: list[HostedServer] = []
    warnings: list[str] = []
    for index, server in enumerate(servers):
        param = f"mcp_servers.{index}"
        if not isinstance(server, Mapping) or not isinstance(server.get("url"), str):
            raise InvalidRequestError("an MCP server needs a string url", param=f"{param}.url")
        name, url = server.get("name"), server["url"]
        if not isinstance(name, str) or not name.strip():
            raise InvalidRequestError("an MCP server needs a string name", param=f"{param}.name")
        if not allowed_url(url, allow):
            warnings.append(
                f"MCP server {name!r} dropped: its URL is not on the proxy's --mcp-allow list"
            )
            continue
        config = server.get("tool_configuration") or {}
        if not isinstance(config, Mapping):
            raise InvalidRequestError(
                "tool_configuration must be an object", param=f"{param}.tool_configuration"
            )
        if config.get("enabled") is False:
            continue
        headers: dict[str, str] = {}
        token = server.get("authorization_token")
        if isinstance(token, str) and token:
            headers["Authorization"] = f"Bearer {token}"
        allowed = _allowed(config.get("allowed_tools"), name, f"{param}.tool_configuration")
        hosted.append(HostedServer(name, url, headers, allowed))
    return Hosted(hosted, warnings)


def allowed_url(url: str, allow: Sequence[str]) -> bool:
    """Whether ``url`` is under one of the ``--mcp-allow`` prefixes: the same scheme, host and
    port (``https://a.example`` does not allow ``https://a.example.evil``), and a path that
    starts with the prefix's path at a ``/`` (``/mcp`` allows ``/mcp/x``, not ``/mcpx``)."""
    try:
        target = urlsplit(url)
        target_port = target.port
    except ValueError:
        return False
    if target.scheme not in ("http", "https") or not target.hostname or target.username:
        return False
    for prefix in allow:
        try:
            rule = urlsplit(prefix)
            rule_port = rule.port
        except ValueError:
            continue
        if (rule.scheme, rule.hostname) != (target.scheme, target.hostname):
            continue
        default = 443 if target.scheme == "https" else 80
        if (rule_port or default) != (target_port or default):
            continue
        base = rule.path.rstrip("/")
        if target.path == base or target.path.startswith(base + "/") or not base:
            return True
    return False


def _server(tool: Mapping[str, Any], url: str, param: str) -> HostedServer:
    label = tool.get("server_label")
    if not isinstance(label, str) or not label.strip():
        raise InvalidRequestError(
            "an mcp tool needs a non-empty string server_label", param=f"{param}.server_label"
        )
    approval = approval_rule(tool.get("require_approval"), label, f"{param}.require_approval")
    headers = tool.get("headers") or {}
    if not isinstance(headers, Mapping) or not all(isinstance(v, str) for v in headers.values()):
        raise InvalidRequestError(
            f"mcp tool {label!r}: headers must be an object of strings", param=f"{param}.headers"
        )
    headers = {str(k): v for k, v in headers.items()}
    token = tool.get("authorization")
    if isinstance(token, str) and token:
        headers.setdefault("Authorization", f"Bearer {token}")
    allowed = _allowed(tool.get("allowed_tools"), label, param)
    return HostedServer(label, url, headers, allowed, approval)


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
    max_tools: int = 0,
    approvals: Sequence[Approval] = (),
) -> HostedTurn:
    """Answer ``request`` with the hosted servers' tools offered and their calls run here
    (InvalidRequestError when they and the request's own tools are over ``max_tools``); the
    answered ``approvals`` are run (or refused) first. A call that needs an approval ends the
    turn with its approval request."""
    toolset = MCPToolset(
        MCPHttp(s.url, s.headers, name=s.label, tools=s.allowed_tools) for s in servers
    )
    async with toolset:
        reserved = [t.name for t in request.tools]
        tools = {t.name: t for t in toolset.tools_beside(reserved)}
        offered = {t.name: t for t in toolset.offered(reserved)}
        if max_tools and len(tools) + len(reserved) > max_tools:
            raise InvalidRequestError(
                f"the MCP servers offer {len(tools)} tools; with the request's "
                f"{len(reserved)} that is over the proxy's limit of {max_tools} (--max-tools); "
                "narrow them with allowed_tools",
                param="tools",
            )
        listings = [
            (c.name, [t.listed for t in offered.values() if t.server == c.name], c.problem)
            for c in toolset.connections
        ]
        ran: list[HostedCall] = []
        request = replace(request, tools=(*request.tools, *(t.spec for t in tools.values())))
        if approvals:
            request = await _answered(request, approvals, tools, offered, ran)
        rules = {s.label: s.approval for s in servers}
        for round_ in range(1, MAX_ROUNDS + 1):
            if round_ == MAX_ROUNDS:
                request = replace(request, tool_choice=ToolChoice.NONE)
            answer = engine.answer(request, headers=headers, warnings=warnings, **overrides)
            completion = await answer.complete()
            calls = completion.message.tool_calls if completion.choices else ()
            if not calls or any(c.name not in tools for c in calls):
                return HostedTurn(completion, answer.request, listings, ran)
            sources = [offered[c.name] for c in calls]
            waiting = [
                ApprovalRequest(t.server, t.listed.name, c.arguments)
                for c, t in zip(calls, sources, strict=True)
                if rules[t.server].needs(t.listed.name)
            ]
            if waiting:  # (the turn's other calls wait too: the model is asked again after)
                said = Message("assistant", completion.message.text)
                first = replace(completion.choices[0], message=said, finish_reason="stop")
                quiet = replace(completion, choices=(first, *completion.choices[1:]))
                return HostedTurn(quiet, answer.request, listings, ran, waiting)
            results: list[Message] = []
            for call in calls:
                done = await _call(tools[call.name], call, offered[call.name])
                ran.append(done)
                text = f"Error: {done.text}" if done.failure else done.text
                results.append(Message("tool", text, tool_call_id=call.id))
            said = Message("assistant", completion.message.content, tool_calls=tuple(calls))
            request = replace(request, messages=(*request.messages, said, *results))
    raise AssertionError("unreachable: the last round is asked without tools")


async def _answered(
    request: ChatRequest,
    approvals: Sequence[Approval],
    tools: Mapping[str, Tool],
    offered: Mapping[str, MCPTool],
    ran: list[HostedCall],
) -> ChatRequest:
    """The approved calls run and the refused ones answered, as the latest turn of history."""
    names = {(t.server, t.listed.name): name for name, t in offered.items()}
    calls: list[ToolCall] = []
    results: list[Message] = []
    for approval in approvals:
        asked = approval.request
        name = names.get((asked.server, asked.name))
        call = ToolCall(f"call_{asked.id}", name or asked.name, asked.arguments)
        if name is None:
            why = f"the MCP server {asked.server!r} offers no tool {asked.name!r} in this request"
            done = HostedCall(asked.id, asked.server, asked.name, asked.arguments, why, "protocol")
        elif not approval.approve:
            why = "the user did not approve this call" + (
                f": {approval.reason}" if approval.reason else ""
            )
            done = HostedCall(asked.id, asked.server, asked.name, asked.arguments, why, "protocol")
        else:
            done = await _call(tools[name], call, offered[name])
        ran.append(replace(done, approval_request_id=asked.id))
        calls.append(call)
        text = f"Error: {done.text}" if done.failure else done.text
        results.append(Message("tool", text, tool_call_id=call.id))
    said = Message("assistant", None, tool_calls=tuple(calls))
    return replace(request, messages=(*request.messages, said, *results))


async def _call(tool: Tool, call: ToolCall, source: MCPTool) -> HostedCall:
    """Run one call; a failure of any kind is the call's result, never the request's."""

    def record(text: str, failure: Literal["protocol", "execution"] | None = None) -> HostedCall:
        return HostedCall(
            secrets.token_hex(12), source.server, source.listed.name, call.arguments, text, failure
        )

    checked = tool.check(call.arguments)
    if not checked.ok:
        return record(str(checked.problem), "protocol")
    try:
        result = await tool.invoke(checked)
    except MCPServerError as exc:
        return record(exc.message, "protocol")
    if not isinstance(result, ToolResult):
        return record(str(result))
    return record(result.model_text, "execution" if result.is_error else None)


def _write_responses(turn: HostedTurn, data: dict[str, Any]) -> None:
    items: list[dict[str, Any]] = [
        {
            "id": f"mcpl_{secrets.token_hex(12)}",
            "type": "mcp_list_tools",
            "server_label": server,
            "tools": [
                {
                    "name": t.name,
                    "description": t.description or None,
                    "input_schema": t.input_schema,
                    "annotations": None,
                }
                for t in tools
            ],
            "error": f"the server could not be reached: {problem}" if problem else None,
        }
        for server, tools, problem in turn.listings
    ]
    for call in turn.calls:
        error: dict[str, Any] | None = None
        if call.failure == "protocol":
            error = {"type": "mcp_protocol_error", "code": -32603, "message": call.text}
        elif call.failure == "execution":
            error = {
                "type": "mcp_tool_execution_error",
                "content": [{"type": "text", "text": call.text}],
            }
        items.append(
            {
                "id": f"mcp_{call.id}",
                "type": "mcp_call",
                "server_label": call.server,
                "name": call.name,
                "arguments": call.arguments,
                "output": None if error else call.text,
                "error": error,
                "status": "failed" if error else "completed",
                "approval_request_id": call.approval_request_id,
            }
        )
    items += [
        {
            "id": asked.id,
            "type": "mcp_approval_request",
            "server_label": asked.server,
            "name": asked.name,
            "arguments": asked.arguments,
        }
        for asked in turn.requests
    ]
    output = list(data.get("output", ()))
    if turn.requests:  # waiting for approvals: an empty message is no answer
        output = [item for item in output if not _empty_message(item)]
    data["output"] = [*items, *output]


def _empty_message(item: Mapping[str, Any]) -> bool:
    if item.get("type") != "message":
        return False
    return not any(str(part.get("text") or "").strip() for part in item.get("content") or ())


def _write_messages(turn: HostedTurn, data: dict[str, Any]) -> None:
    blocks: list[dict[str, Any]] = []
    for call in turn.calls:
        use_id = f"mcptoolu_{call.id}"
        blocks.append(
            {
                "type": "mcp_tool_use",
                "id": use_id,
                "name": call.name,
                "server_name": call.server,
                "input": call.input,
            }
        )
        blocks.append(
            {
                "type": "mcp_tool_result",
                "tool_use_id": use_id,
                "is_error": call.failure is not None,
                "content": [{"type": "text", "text": call.text}],
            }
        )
    data["content"] = [*blocks, *data.get("content", ())]


PROTOCOLS: dict[str, HostedProtocol] = {
    "responses": HostedProtocol(_take_responses, _write_responses, replay_responses),
    "messages": HostedProtocol(_take_messages, _write_messages, replay_messages),
}
"""The codecs (by name) whose requests may carry hosted MCP servers."""
