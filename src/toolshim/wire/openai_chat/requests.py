"""Chat-completions requests on the wire: validated into a :class:`ChatRequest`, written back.

A request is validated with pydantic (a malformed one becomes an ``InvalidRequestError``
naming the offending field) unless a quick structural check shows it plainly valid. Every
field toolshim does not interpret is kept in ``params`` and written back unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from toolshim.errors import ConfigError, InvalidRequestError
from toolshim.types import EMPTY, ChatRequest, ToolChoice, ToolSpec
from toolshim.wire.openai_chat.legacy import has_legacy_fields, upgrade_request
from toolshim.wire.openai_chat.messages import message_from_dict, message_to_dict

__all__ = ["parse_request", "read_request", "request_to_body"]

_REQUEST_FIELDS = frozenset(
    {"model", "messages", "tools", "tool_choice", "parallel_tool_calls", "stream"}
)


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

    The legacy ``functions``/``function_call`` fields (and legacy history messages) are
    upgraded to the tools shape first; ``legacy_functions`` then asks for legacy answers.
    Raises :class:`InvalidRequestError` with ``param`` naming the first offending field.
    """
    if isinstance(data, ChatRequest):
        return data
    if not isinstance(data, Mapping):
        raise InvalidRequestError(
            f"the request body must be a JSON object, not {type(data).__name__}"
        )
    legacy = data.get("functions") is not None
    if has_legacy_fields(data):
        data = upgrade_request(data)
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
        parallel_tool_calls=parallel,
        stream=stream,
        params=params,
        legacy_functions=legacy,
    )


def read_request(data: Any) -> tuple[ChatRequest, Mapping[str, Any]]:
    """A library caller's request (a chat-completions body, or a :class:`ChatRequest`) and
    the per-request engine options of its ``toolshim`` field (see
    :attr:`toolshim.engine.Engine.read_request`)."""
    overrides: Mapping[str, Any] = {}
    if isinstance(data, Mapping) and "toolshim" in data:
        data = dict(data)
        overrides = data.pop("toolshim")
        if not isinstance(overrides, Mapping):
            raise ConfigError(
                'the "toolshim" field must be an object such as {"mode": "force"}, not '
                f"{type(overrides).__name__}",
                param="toolshim",
            )
    return parse_request(data), overrides


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
        if not _each_if_given(m.get("tool_calls"), _plain_call):
            return False
    if not _each_if_given(data.get("tools"), _plain_tool):
        return False
    choice = data.get("tool_choice")
    if choice is not None and not (
        isinstance(choice, dict) or (isinstance(choice, str) and choice in _CHOICES)
    ):
        return False
    return all(
        data.get(key) is None or isinstance(data[key], bool)
        for key in ("parallel_tool_calls", "stream")
    )


def _each_if_given(value: Any, plain: Callable[[Any], bool]) -> bool:
    """``value`` is absent (None), or a list whose every item is ``plain``."""
    return value is None or (isinstance(value, list) and all(plain(item) for item in value))


def _plain_call(call: Any) -> bool:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        return False
    if call.get("id") is not None and not isinstance(call["id"], str):
        return False
    if not isinstance(call.get("type", "function"), str):
        return False
    return isinstance(function.get("arguments"), str | dict | list | None)


def _plain_tool(tool: Any) -> bool:
    if not isinstance(tool, dict) or not isinstance(tool.get("type", "function"), str):
        return False
    function = tool.get("function")
    if function is None:
        return True
    if not isinstance(function, dict):
        return False
    name = function.get("name")
    if not isinstance(name, str) or not name:
        return False
    if function.get("description") is not None and not isinstance(function["description"], str):
        return False
    return function.get("parameters") is None or isinstance(function["parameters"], dict)


def _list_of_dicts(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(p, dict) for p in value)


_FUNCTION_FIELDS = frozenset({"name", "description", "parameters"})


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
                    extra={k: v for k, v in function.items() if k not in _FUNCTION_FIELDS} or EMPTY,
                )
            )
        else:
            name = str(tool.get("name") or kind)
            extra = {k: v for k, v in tool.items() if k != "type"}
            specs.append(ToolSpec(name=name, type=kind, extra=extra or EMPTY))
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


def request_to_body(request: ChatRequest, *, tools: bool = True) -> dict[str, Any]:
    """The request as the JSON body for an upstream; ``tools=False`` leaves every tool field out."""
    body: dict[str, Any] = {}
    if request.model:
        body["model"] = request.model
    body["messages"] = [message_to_dict(m) for m in request.messages]
    if tools and request.tools:
        body["tools"] = [t.to_openai() for t in request.tools]
        if request.tool_choice is not None:
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
