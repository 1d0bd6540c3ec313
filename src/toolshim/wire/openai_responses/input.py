"""Responses API requests read into core types: input items, tools, tool choice and options
become a :class:`ResponsesRequest` (a :class:`~toolshim.types.ChatRequest` for the engine that
also carries what the answer echoes back).

Input items (``input`` is a string, one user message, or a list of these):

=============================  ================================================================
item                           becomes
=============================  ================================================================
``message`` user               a user message (``input_text`` joined; ``input_image`` kept as
                               an ``image_url`` part)
``message`` system/developer   a system message; ``instructions`` and every leading
                               system/developer message merge into one first system message
``message`` assistant          an assistant message (``output_text`` and ``refusal`` as text)
``function_call``              a tool call on an assistant message (consecutive calls, and a
                               call right after an assistant message, share that message)
``function_call_output``       a ``role: tool`` message answering ``call_id``
``custom_tool_call`` / output  the same, the freeform input as ``{"input": …}``
``reasoning``                  dropped: a chat-completions upstream has no field for it that
                               every server accepts, and encrypted content is OpenAI's alone
``item_reference``             a 400: send the item itself, or ``previous_response_id``
anything else                  dropped (results of OpenAI-hosted tools), with a warning
=============================  ================================================================

Tools and ``tool_choice``: :mod:`toolshim.wire.openai_responses.tools`.

``text.format`` ``json_schema`` / ``json_object`` becomes the upstream's ``response_format``;
``max_output_tokens`` becomes ``max_tokens``; ``temperature``, ``top_p`` and
``reasoning.effort`` (as ``reasoning_effort``) go upstream as they are. ``store``,
``previous_response_id`` and ``metadata`` (echoed) are answered by the proxy, not sent
upstream; ``include`` is checked, not acted on (what it asks for, such as encrypted reasoning or
logprobs, a chat-completions upstream does not produce); other fields (Codex's
``prompt_cache_key``, ``client_metadata``) are ignored.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolshim.errors import InvalidRequestError
from toolshim.types import EMPTY, ChatRequest, Message, ToolCall
from toolshim.wire.base import Decoded
from toolshim.wire.openai_responses.tools import CUSTOM_INPUT, decode_tool_choice, decode_tools

__all__ = [
    "ResponsesContext",
    "ResponsesRequest",
    "decode_request",
    "new_response_id",
]


_ROLES = frozenset({"user", "system", "developer", "assistant"})
_DROPPED_ITEM_TYPES = frozenset({"reasoning", "mcp_list_tools"})
_TEXT_PARTS = frozenset({"input_text", "output_text", "text", "refusal"})
_UPSTREAM_FIELDS = ("temperature", "top_p")


def new_response_id() -> str:
    """``resp_`` and 32 hex digits from :mod:`secrets` (unguessable: a stored response is
    read back by its id)."""
    return f"resp_{secrets.token_hex(16)}"


@dataclass(frozen=True, slots=True)
class ResponsesContext:
    """What a Responses answer echoes back and how it writes calls, fixed at decoding."""

    id: str
    model: str
    created_at: int
    instructions: Any = None
    tools: tuple[Mapping[str, Any], ...] = ()
    """The caller's tools as sent (echoed in the response object)."""
    tool_choice: Any = "auto"
    parallel_tool_calls: bool = True
    temperature: float | None = None
    top_p: float | None = None
    max_output_tokens: int | None = None
    previous_response_id: str | None = None
    reasoning: Any = None
    text: Mapping[str, Any] = field(default_factory=lambda: {"format": {"type": "text"}})
    store: bool = True
    metadata: Mapping[str, Any] = EMPTY
    custom_tools: frozenset[str] = frozenset()
    """Names of freeform tools served as one-string functions: their calls are written as
    ``custom_tool_call`` items."""
    input_items: tuple[Mapping[str, Any], ...] = ()
    """The input items this request added (the store keeps them with the id of the response
    they continue, never the earlier ones again)."""


@dataclass(frozen=True, slots=True)
class ResponsesRequest(ChatRequest):
    """The request as the engine serves it, plus its Responses context (the engine hands the
    same object back to the codec's encoders)."""

    context: ResponsesContext | None = None


def decode_request(
    payload: Mapping[str, Any], history: Sequence[Mapping[str, Any]] = ()
) -> Decoded:
    """Read a Responses request into a :class:`ResponsesRequest`. ``history`` is the input and output items of the response that
    ``previous_response_id`` names (the server looks it up), put before ``input``.

    Raises :class:`InvalidRequestError` naming the offending field.
    """
    if not isinstance(payload, Mapping):
        raise InvalidRequestError(
            f"the request body must be a JSON object, not {type(payload).__name__}"
        )
    warnings: list[str] = []
    _unsupported(payload)
    model = payload.get("model") or ""
    if not isinstance(model, str):
        raise InvalidRequestError("model must be a string", param="model")
    items = _input_items(payload.get("input"))
    instructions = payload.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise InvalidRequestError("instructions must be a string", param="instructions")
    conversation = (*history, *items)
    messages = _messages(conversation, warnings, offset=len(history))
    if instructions:
        messages.insert(0, Message("system", instructions))
    messages = _merge_leading_system(messages)
    if not messages:
        raise InvalidRequestError("input is empty: send a string or a list of items", param="input")

    raw_tools = payload.get("tools") or []
    if not isinstance(raw_tools, list):
        raise InvalidRequestError("tools must be a list", param="tools")
    tools, custom = decode_tools(raw_tools, warnings)
    choice, tools = decode_tool_choice(payload.get("tool_choice"), tools)
    parallel = payload.get("parallel_tool_calls")
    if parallel is not None and not isinstance(parallel, bool):
        raise InvalidRequestError(
            "parallel_tool_calls must be true or false", param="parallel_tool_calls"
        )
    stream = payload.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise InvalidRequestError("stream must be true or false", param="stream")
    store = payload.get("store")
    if store is not None and not isinstance(store, bool):
        raise InvalidRequestError("store must be true or false", param="store")
    metadata = _metadata(payload.get("metadata"))
    _include(payload.get("include"))
    overrides = payload.get("toolshim")
    if overrides is not None and not isinstance(overrides, Mapping):
        raise InvalidRequestError(
            'the "toolshim" field must be an object such as {"mode": "force"}', param="toolshim"
        )

    params = _params(payload)
    if stream:
        params["stream_options"] = {"include_usage": True}
    text = payload.get("text")
    context = ResponsesContext(
        id=new_response_id(),
        model=model,
        created_at=int(time.time()),
        instructions=instructions,
        tools=tuple(t for t in raw_tools if isinstance(t, Mapping)),
        tool_choice=payload.get("tool_choice") or "auto",
        parallel_tool_calls=parallel is not False,
        temperature=payload.get("temperature"),
        top_p=payload.get("top_p"),
        max_output_tokens=payload.get("max_output_tokens"),
        previous_response_id=payload.get("previous_response_id"),
        reasoning=payload.get("reasoning"),
        text=text if isinstance(text, Mapping) and text else {"format": {"type": "text"}},
        store=store is not False,
        metadata=metadata or EMPTY,
        custom_tools=frozenset(custom),
        input_items=tuple(items),
    )
    request = ResponsesRequest(
        model=model,
        messages=tuple(messages),
        tools=tools,
        tool_choice=choice,
        parallel_tool_calls=parallel,
        stream=bool(stream),
        params=params,
        context=context,
    )
    return Decoded(request, overrides or EMPTY, tuple(warnings))


def _unsupported(payload: Mapping[str, Any]) -> None:
    if payload.get("background"):
        raise InvalidRequestError(
            "background responses are not supported by toolshim; send the request without "
            "'background' (stream it for a long answer)",
            param="background",
        )
    for key in ("conversation", "prompt"):
        if payload.get(key) is not None:
            raise InvalidRequestError(
                f"{key!r} is not supported by toolshim (it names state kept on OpenAI's "
                "servers); send the input items themselves, or use previous_response_id",
                param=key,
            )


def _metadata(value: Any) -> Mapping[str, Any] | None:
    """``metadata``: an object of strings, echoed in the answer."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InvalidRequestError("metadata must be an object of strings", param="metadata")
    for key, item in value.items():
        if not isinstance(item, str):
            raise InvalidRequestError(
                f"metadata[{key!r}] must be a string, not {type(item).__name__}",
                param=f"metadata.{key}",
            )
    return value


def _include(value: Any) -> None:
    """``include``: a list of strings. What it asks for (encrypted reasoning, logprobs, hosted
    tools' results) is not produced by a chat-completions upstream, so it is read, not acted on."""
    if value is None:
        return
    if not isinstance(value, list):
        raise InvalidRequestError("include must be a list of strings", param="include")
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise InvalidRequestError(
                f"include[{i}] must be a string, not {type(item).__name__}", param=f"include.{i}"
            )


def _input_items(value: Any) -> list[Mapping[str, Any]]:
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    if not isinstance(value, list):
        raise InvalidRequestError(
            "input must be a string or a list of items, not "
            + ("nothing" if value is None else type(value).__name__),
            param="input",
        )
    for i, item in enumerate(value):
        if not isinstance(item, Mapping):
            raise InvalidRequestError(
                f"input[{i}] must be an object, not {type(item).__name__}", param=f"input.{i}"
            )
    return list(value)


def _messages(
    items: Sequence[Mapping[str, Any]], warnings: list[str], *, offset: int
) -> list[Message]:
    out: list[Message] = []
    names: dict[str, str] = {}  # call_id -> tool name
    dropped: list[str] = []
    for position, item in enumerate(items):
        where = f"input.{position - offset}" if position >= offset else "previous_response_id"
        kind = item.get("type") or ("message" if "role" in item else None)
        if not isinstance(kind, str):
            kind = None  # (a list or object here is no type: the 400 below, not a TypeError)
        if kind == "message":
            out.append(_message(item, where))
        elif kind in ("function_call", "custom_tool_call"):
            call = _call(item, kind, where)
            names[call.id] = call.name
            last = out[-1] if out else None
            if last is not None and last.role == "assistant":
                out[-1] = Message(
                    "assistant", last.content, (*last.tool_calls, call), extra=last.extra
                )
            else:
                out.append(Message("assistant", None, (call,)))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            call_id = _string(item, "call_id", where)
            name = names.get(call_id) or item.get("name")
            out.append(
                Message(
                    "tool",
                    _output_text(item.get("output"), where, warnings),
                    tool_call_id=call_id,
                    name=name if isinstance(name, str) else None,
                )
            )
        elif kind == "mcp_call":  # a hosted MCP call the proxy ran: the call, then its result
            call = ToolCall(
                _string(item, "id", where),
                _string(item, "name", where),
                str(item.get("arguments") or "{}"),
            )
            out.append(Message("assistant", None, (call,)))
            error = item.get("error")
            text = str(item.get("output") or "") if not error else f"Error: {_error_text(error)}"
            out.append(Message("tool", text, tool_call_id=call.id, name=call.name))
        elif kind == "item_reference":
            raise InvalidRequestError(
                f"{where}: item_reference is not supported by toolshim; send the item itself, "
                "or continue with previous_response_id",
                param=where,
            )
        elif kind in _DROPPED_ITEM_TYPES:
            continue
        elif isinstance(kind, str):
            if kind not in dropped:
                dropped.append(kind)
        else:
            raise InvalidRequestError(
                f"{where} has no 'type' (expected 'message', 'function_call', "
                "'function_call_output', ...)",
                param=where,
            )
    for kind in dropped:
        warnings.append(
            f"input items of type {kind!r} dropped: they belong to a tool that toolshim does "
            "not serve"
        )
    return out


def _error_text(error: Any) -> str:
    """An ``mcp_call`` item's error (a string, or an object with a message or text content)."""
    if isinstance(error, Mapping):
        if isinstance(error.get("message"), str):
            return str(error["message"])
        content = error.get("content")
        if isinstance(content, list):
            return " ".join(str(c.get("text", "")) for c in content if isinstance(c, Mapping))
    return str(error)


def _message(item: Mapping[str, Any], where: str) -> Message:
    role = item.get("role")
    if not isinstance(role, str) or role not in _ROLES:
        raise InvalidRequestError(
            f"{where}.role must be one of 'user', 'system', 'developer', 'assistant', not {role!r}",
            param=f"{where}.role",
        )
    content = item.get("content")
    if isinstance(content, str):
        parts: tuple[Mapping[str, Any], ...] | str = content
    elif isinstance(content, list):
        parts = tuple(_part(p, f"{where}.content.{j}") for j, p in enumerate(content))
        if all(p.get("type") == "text" for p in parts):
            parts = "\n".join(str(p["text"]) for p in parts)
    else:
        raise InvalidRequestError(
            f"{where}.content must be a string or a list of content parts", param=f"{where}.content"
        )
    return Message("system" if role == "developer" else str(role), parts)


def _part(part: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(part, Mapping):
        raise InvalidRequestError(f"{where} must be an object", param=where)
    kind = part.get("type")
    if isinstance(kind, str) and kind in _TEXT_PARTS:
        text = part.get("refusal") if kind == "refusal" else part.get("text")
        if not isinstance(text, str):
            raise InvalidRequestError(f"{where}.text must be a string", param=f"{where}.text")
        return {"type": "text", "text": text}
    if kind == "input_image":
        url = part.get("image_url")
        if not isinstance(url, str) or not url:
            raise InvalidRequestError(
                f"{where}: an input_image needs an 'image_url' (a URL or a data: URL); "
                "file_id images are stored on OpenAI's servers, not here",
                param=f"{where}.image_url",
            )
        image: dict[str, Any] = {"url": url}
        if isinstance(part.get("detail"), str):
            image["detail"] = part["detail"]
        return {"type": "image_url", "image_url": image}
    raise InvalidRequestError(
        f"{where}: content parts of type {kind!r} are not supported by toolshim "
        "(input_text, output_text, refusal and input_image are)",
        param=f"{where}.type",
    )


def _call(item: Mapping[str, Any], kind: str, where: str) -> ToolCall:
    call_id = _string(item, "call_id", where)
    name = _string(item, "name", where)
    if kind == "custom_tool_call":
        value = item.get(CUSTOM_INPUT)
        return ToolCall.from_arguments(call_id, name, {CUSTOM_INPUT: value if value else ""})
    arguments = item.get("arguments")
    if arguments is None:
        arguments = "{}"
    elif not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return ToolCall(id=call_id, name=name, arguments=arguments)


def _string(item: Mapping[str, Any], key: str, where: str) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value:
        raise InvalidRequestError(
            f"{where}: a {item.get('type')!r} item needs a non-empty string {key!r}",
            param=f"{where}.{key}",
        )
    return value


def _output_text(output: Any, where: str, warnings: list[str]) -> str:
    """A tool's output as text: a string as it is, content parts' text joined."""
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        texts = []
        for part in output:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif isinstance(part, Mapping):
                warning = (
                    f"tool output parts of type {part.get('type')!r} dropped: a chat-completions "
                    "tool result holds text only"
                )
                if warning not in warnings:
                    warnings.append(warning)
        return "\n".join(texts)
    if output is None:
        raise InvalidRequestError(f"{where}: a tool output needs 'output'", param=f"{where}.output")
    return json.dumps(output, ensure_ascii=False)


def _merge_leading_system(messages: list[Message]) -> list[Message]:
    """Instructions and every system message before the first other message, as one."""
    lead = 0
    while lead < len(messages) and messages[lead].role == "system":
        lead += 1
    if lead <= 1:
        return messages
    text = "\n\n".join(m.text for m in messages[:lead] if m.text)
    return [Message("system", text), *messages[lead:]]


def _params(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The options that go upstream, in chat-completions names."""
    params: dict[str, Any] = {}
    for key in _UPSTREAM_FIELDS:
        value = payload.get(key)
        if value is None:
            continue
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise InvalidRequestError(f"{key} must be a number", param=key)
        params[key] = value
    limit = payload.get("max_output_tokens")
    if limit is not None:
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise InvalidRequestError(
                "max_output_tokens must be a positive integer", param="max_output_tokens"
            )
        params["max_tokens"] = limit
    reasoning = payload.get("reasoning")
    if isinstance(reasoning, Mapping) and isinstance(reasoning.get("effort"), str):
        params["reasoning_effort"] = reasoning["effort"]
    text = payload.get("text")
    fmt = text.get("format") if isinstance(text, Mapping) else None
    if isinstance(fmt, Mapping):
        kind = fmt.get("type")
        if kind == "json_schema":
            if not isinstance(fmt.get("schema"), Mapping):
                raise InvalidRequestError(
                    "text.format json_schema needs a 'schema' object", param="text.format.schema"
                )
            schema = {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt}
            schema.setdefault("name", "response")
            params["response_format"] = {"type": "json_schema", "json_schema": schema}
        elif kind == "json_object":
            params["response_format"] = {"type": "json_object"}
        elif kind not in (None, "text"):
            raise InvalidRequestError(
                f"text.format {kind!r} is not supported: use 'text', 'json_schema' or "
                "'json_object'",
                param="text.format.type",
            )
    return params
