"""The OpenAI chat-completions wire format: validate requests into core types and write them back.

Requests are validated with pydantic (a malformed request becomes an ``InvalidRequestError``
naming the offending field); responses and stream chunks from upstreams are read leniently,
because upstreams differ. Every field toolshim does not interpret is kept in ``extra``/``params``
and written back unchanged, so nothing the caller or the upstream sent is dropped.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from toolshim.errors import InvalidRequestError, UpstreamProtocolError
from toolshim.types import (
    EMPTY,
    ChatRequest,
    Choice,
    Completion,
    Message,
    StreamChunk,
    ToolCall,
    ToolCallDelta,
    ToolChoice,
    ToolSpec,
    Usage,
)

__all__ = [
    "chunk_from_dict",
    "chunk_to_dict",
    "completion_from_dict",
    "completion_to_dict",
    "message_from_dict",
    "message_to_dict",
    "new_completion_id",
    "parse_request",
    "request_to_body",
]

_REQUEST_FIELDS = frozenset(
    {"model", "messages", "tools", "tool_choice", "parallel_tool_calls", "stream"}
)
_MESSAGE_FIELDS = frozenset({"role", "content", "tool_calls", "tool_call_id", "name"})


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="allow")


class _WireFunction(_Lenient):
    name: str = Field(min_length=1)
    description: str | None = None
    parameters: dict[str, Any] | None = None


class _WireTool(_Lenient):
    type: str = "function"
    function: _WireFunction | None = None


class _WireCallFunction(_Lenient):
    name: str
    arguments: str | dict[str, Any] | list[Any] | None = None


class _WireToolCall(_Lenient):
    id: str | None = None
    type: str = "function"
    function: _WireCallFunction


class _WireMessage(_Lenient):
    role: str = Field(min_length=1)
    content: str | list[dict[str, Any]] | None = None
    tool_calls: list[_WireToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None


class _WireRequest(_Lenient):
    model: str = ""
    messages: list[_WireMessage] = Field(min_length=1)
    tools: list[_WireTool] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    stream: bool | None = False

    @field_validator("tool_choice")
    @classmethod
    def _known_choice(cls, value: str | dict[str, Any] | None) -> str | dict[str, Any] | None:
        if isinstance(value, str) and value not in ("auto", "none", "required"):
            raise ValueError(f"{value!r} is not one of 'auto', 'none', 'required' or a function")
        return value


def parse_request(data: Any) -> ChatRequest:
    """Validate an OpenAI chat-completions request (a dict) into a :class:`ChatRequest`.

    Raises :class:`InvalidRequestError` with ``param`` naming the first offending field.
    """
    if isinstance(data, ChatRequest):
        return data
    if not isinstance(data, Mapping):
        raise InvalidRequestError(
            f"the request body must be a JSON object, not {type(data).__name__}"
        )
    if _plainly_valid(data):
        model, choice_raw = data.get("model") or "", data.get("tool_choice")
        parallel, stream = data.get("parallel_tool_calls"), bool(data.get("stream"))
    else:
        # Anything unusual goes through pydantic, which coerces what it can and names the
        # first offending field precisely; the fast check above accepts a strict subset.
        try:
            wire = _WireRequest.model_validate(data)
        except ValidationError as exc:
            err = exc.errors()[0]
            param = ".".join(str(p) for p in err["loc"]) or None
            raise InvalidRequestError(
                f"invalid request: {param}: {err['msg']}"
                if param
                else f"invalid request: {err['msg']}",
                param=param,
                code="invalid_value",
            ) from exc
        model, choice_raw = wire.model, wire.tool_choice
        parallel, stream = wire.parallel_tool_calls, bool(wire.stream)

    tools = _tools(data.get("tools") or ())
    names = [t.name for t in tools if t.is_function]
    seen: set[str] = set()
    for i, name in enumerate(names):
        if name in seen:
            raise InvalidRequestError(
                f"tools[{i}]: duplicate tool name {name!r}", param=f"tools.{i}.function.name"
            )
        seen.add(name)
    choice = _tool_choice(choice_raw, names)
    messages = tuple(message_from_dict(m) for m in data["messages"])
    params = {k: v for k, v in data.items() if k not in _REQUEST_FIELDS}
    return ChatRequest(
        model=model,
        messages=messages,
        tools=tools,
        tool_choice=choice,
        tool_choice_raw=data.get("tool_choice"),
        parallel_tool_calls=parallel,
        stream=stream,
        params=params,
    )


_CHOICES = frozenset({"auto", "none", "required"})


def _plainly_valid(data: Mapping[str, Any]) -> bool:
    """A quick structural check that accepts only what the pydantic models accept unchanged."""
    model = data.get("model", "")
    messages = data.get("messages")
    if not isinstance(model, str) or not isinstance(messages, list) or not messages:
        return False
    for m in messages:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not m["role"]:
            return False
        content = m.get("content")
        if not (content is None or isinstance(content, str) or _list_of_dicts(content)):
            return False
        for key in ("tool_call_id", "name"):
            if m.get(key) is not None and not isinstance(m[key], str):
                return False
        calls = m.get("tool_calls")
        if calls is not None:
            if not isinstance(calls, list):
                return False
            for call in calls:
                function = call.get("function") if isinstance(call, dict) else None
                if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                    return False
                if call.get("id") is not None and not isinstance(call["id"], str):
                    return False
                if not isinstance(call.get("type", "function"), str):
                    return False
                if not isinstance(function.get("arguments"), str | dict | list | None):
                    return False
    tools = data.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            return False
        for tool in tools:
            if not isinstance(tool, dict) or not isinstance(tool.get("type", "function"), str):
                return False
            function = tool.get("function")
            if function is None:
                continue
            if not isinstance(function, dict):
                return False
            name = function.get("name")
            if not isinstance(name, str) or not name:
                return False
            if function.get("description") is not None and not isinstance(
                function["description"], str
            ):
                return False
            if function.get("parameters") is not None and not isinstance(
                function["parameters"], dict
            ):
                return False
    choice = data.get("tool_choice")
    if choice is not None and not (isinstance(choice, dict) or choice in _CHOICES):
        return False
    return all(
        data.get(key) is None or isinstance(data[key], bool)
        for key in ("parallel_tool_calls", "stream")
    )


def _list_of_dicts(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(p, dict) for p in value)


def _tools(raw: Sequence[Any]) -> tuple[ToolSpec, ...]:
    specs: list[ToolSpec] = []
    for i, tool in enumerate(raw):
        kind = tool.get("type", "function")
        if kind == "function":
            function = tool.get("function")
            if function is None:
                raise InvalidRequestError(
                    f"tools[{i}]: a function tool needs a 'function' object with a 'name'",
                    param=f"tools.{i}.function",
                )
            params = function.get("parameters")
            specs.append(
                ToolSpec(
                    name=function["name"],
                    description=function.get("description") or "",
                    parameters=params
                    if params is not None
                    else {"type": "object", "properties": {}},
                    raw=tool,
                )
            )
        else:
            name = str(tool.get("name") or kind)
            specs.append(ToolSpec(name=name, type=kind, raw=tool))
    return tuple(specs)


def _tool_choice(value: str | dict[str, Any] | None, names: Sequence[str]) -> ToolChoice | None:
    if value is None:
        return None
    if isinstance(value, str):
        return {"auto": ToolChoice.AUTO, "none": ToolChoice.NONE}.get(value, ToolChoice.REQUIRED)
    function = value.get("function")
    name = function.get("name") if isinstance(function, Mapping) else value.get("name")
    if value.get("type", "function") != "function" or not isinstance(name, str) or not name:
        raise InvalidRequestError(
            'tool_choice must be "auto", "none", "required" or '
            '{"type": "function", "function": {"name": ...}}',
            param="tool_choice",
        )
    if names and name not in names:
        raise InvalidRequestError(
            f"tool_choice names the function {name!r}, which is not among the tools: "
            + ", ".join(repr(n) for n in names),
            param="tool_choice",
        )
    return ToolChoice.function(name)


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
        id=str(data.get("id") or f"call_{uuid.uuid4().hex[:24]}"),
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
        out["tool_calls"] = [
            {
                "id": c.id,
                "type": c.type,
                "function": {"name": c.name, "arguments": c.arguments},
                **c.extra,
            }
            for c in message.tool_calls
        ]
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    if message.name is not None:
        out["name"] = message.name
    out.update(message.extra)
    return out


def request_to_body(request: ChatRequest, *, tools: bool = True) -> dict[str, Any]:
    """The request as the JSON body for an upstream; ``tools=False`` leaves every tool field out."""
    body: dict[str, Any] = {}
    if request.model:
        body["model"] = request.model
    body["messages"] = [message_to_dict(m) for m in request.messages]
    if tools and request.tools:
        body["tools"] = [t.to_openai() for t in request.tools]
        if request.tool_choice_raw is not None:
            body["tool_choice"] = request.tool_choice_raw
        elif request.tool_choice is not None:
            body["tool_choice"] = _choice_to_wire(request.tool_choice)
        if request.parallel_tool_calls is not None:
            body["parallel_tool_calls"] = request.parallel_tool_calls
    if request.stream:
        body["stream"] = True
    body.update(request.params)
    return body


def _choice_to_wire(choice: ToolChoice) -> Any:
    if choice.kind == "function":
        return {"type": "function", "function": {"name": choice.name}}
    return choice.kind


def new_completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex[:24]}"


def usage_from_dict(data: Any) -> Usage | None:
    if not isinstance(data, Mapping):
        return None
    known = ("prompt_tokens", "completion_tokens", "total_tokens")
    extra = {k: v for k, v in data.items() if k not in known}
    return Usage(
        int(data.get("prompt_tokens") or 0),
        int(data.get("completion_tokens") or 0),
        int(data.get("total_tokens") or 0),
        extra=extra or EMPTY,
    )


def usage_to_dict(usage: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        **usage.extra,
    }


def completion_from_dict(data: Any) -> Completion:
    """Read an upstream's ``chat.completion`` leniently (missing ids and times are filled in)."""
    if not isinstance(data, Mapping):
        raise UpstreamProtocolError(
            f"the upstream answered with {type(data).__name__}, not a chat.completion object"
        )
    raw_choices = data.get("choices")
    if not isinstance(raw_choices, list):
        raise UpstreamProtocolError("the upstream's chat.completion has no 'choices' list")
    choices = []
    for i, c in enumerate(raw_choices):
        if not isinstance(c, Mapping):
            raise UpstreamProtocolError(f"choices[{i}] is not an object")
        message = message_from_dict(c.get("message") or {"role": "assistant", "content": ""})
        extra = {k: v for k, v in c.items() if k not in ("index", "message", "finish_reason")}
        choices.append(
            Choice(
                index=int(c.get("index", i) or 0),
                message=message,
                finish_reason=c.get("finish_reason"),
                extra=extra or EMPTY,
            )
        )
    top = ("id", "object", "created", "model", "choices", "usage", "toolshim")
    extra = {k: v for k, v in data.items() if k not in top}
    return Completion(
        id=str(data.get("id") or new_completion_id()),
        model=str(data.get("model") or ""),
        created=int(data.get("created") or time.time()),
        choices=tuple(choices),
        usage=usage_from_dict(data.get("usage")),
        extra=extra or EMPTY,
    )


def completion_to_dict(completion: Completion) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": completion.id,
        "object": "chat.completion",
        "created": completion.created,
        "model": completion.model,
        "choices": [
            {
                "index": c.index,
                "message": message_to_dict(c.message),
                "finish_reason": c.finish_reason,
                **c.extra,
            }
            for c in completion.choices
        ],
    }
    if completion.usage is not None:
        out["usage"] = usage_to_dict(completion.usage)
    out.update(completion.extra)
    if completion.meta is not None:
        out["toolshim"] = completion.meta.to_dict()
    return out


def chunk_from_dict(data: Mapping[str, Any]) -> list[StreamChunk]:
    """Read one upstream ``chat.completion.chunk`` into one StreamChunk per choice (``raw`` kept)."""
    choices = data.get("choices") or []
    usage = usage_from_dict(data.get("usage"))
    if not choices:
        return [StreamChunk(usage=usage, raw=data)]
    out = []
    for c in choices:
        if not isinstance(c, Mapping):
            raise UpstreamProtocolError("a stream chunk's choice is not an object")
        delta = c.get("delta") or {}
        deltas = []
        for j, tc in enumerate(delta.get("tool_calls") or ()):
            function = tc.get("function") or {}
            arguments = function.get("arguments")
            if arguments is not None and not isinstance(arguments, str):
                arguments = json.dumps(arguments, ensure_ascii=False)
            deltas.append(
                ToolCallDelta(
                    index=int(tc.get("index", j) or 0),
                    id=tc.get("id"),
                    name=function.get("name"),
                    arguments=arguments,
                )
            )
        content = delta.get("content")
        out.append(
            StreamChunk(
                content=content if isinstance(content, str) else None,
                tool_calls=tuple(deltas),
                role=delta.get("role"),
                finish_reason=c.get("finish_reason"),
                usage=usage,
                raw=data,
                choice_index=int(c.get("index") or 0),
            )
        )
    return out


def chunk_to_dict(chunk: StreamChunk, *, id: str, model: str, created: int) -> dict[str, Any]:
    """Write a StreamChunk as a ``chat.completion.chunk`` (a raw native chunk is kept as sent)."""
    if chunk.raw is not None:
        raw = dict(chunk.raw)
        if chunk.meta is not None:
            raw["toolshim"] = chunk.meta.to_dict()
        return raw
    delta: dict[str, Any] = {}
    if chunk.role is not None:
        delta["role"] = chunk.role
    if chunk.content is not None:
        delta["content"] = chunk.content
    if chunk.tool_calls:
        calls = []
        for d in chunk.tool_calls:
            entry: dict[str, Any] = {"index": d.index}
            function: dict[str, Any] = {}
            if d.id is not None:
                entry["id"] = d.id
                entry["type"] = "function"
            if d.name is not None:
                function["name"] = d.name
            if d.arguments is not None:
                function["arguments"] = d.arguments
            entry["function"] = function
            calls.append(entry)
        delta["tool_calls"] = calls
    out: dict[str, Any] = {
        "id": id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": []
        if chunk.usage is not None and not delta and chunk.finish_reason is None
        else [{"index": chunk.choice_index, "delta": delta, "finish_reason": chunk.finish_reason}],
    }
    if chunk.usage is not None:
        out["usage"] = usage_to_dict(chunk.usage)
    if chunk.meta is not None:
        out["toolshim"] = chunk.meta.to_dict()
    return out
