"""OpenAI's legacy function calling: ``functions``/``function_call`` requests upgraded to the
tools shape, and answers (completions and stream chunks) downgraded back to it.

==========================================  ================================================
legacy (deprecated by OpenAI, still sent)   tools shape used inside toolshim
==========================================  ================================================
``functions: [{name, description, ...}]``   ``tools: [{"type": "function", "function": …}]``
``function_call: "none" | "auto"``          ``tool_choice: "none" | "auto"``
``function_call: {"name": N}``              ``tool_choice: {"type": "function", …N}``
assistant ``function_call: {name, args}``   ``tool_calls: [{"id": "legacy_<k>", …}]``
``{"role": "function", "name": N, …}``      ``{"role": "tool", "tool_call_id": …, "name": N}``
answer ``message.function_call``            ``message.tool_calls[0]`` (one call only)
``finish_reason: "function_call"``          ``finish_reason: "tool_calls"``
==========================================  ================================================

The legacy answer holds one call: downgrading keeps the first and drops the others (the
engine reports that in the ``toolshim`` warnings).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from toolshim.errors import InvalidRequestError

__all__ = [
    "LEGACY_CALL_ID_PREFIX",
    "downgrade_chunk",
    "downgrade_completion",
    "has_legacy_fields",
    "upgrade_request",
]

LEGACY_CALL_ID_PREFIX = "legacy_"
"""Synthetic ids given to legacy assistant calls: ``legacy_0``, ``legacy_1``, …"""


def has_legacy_fields(data: Mapping[str, Any]) -> bool:
    """True when the request uses any legacy field (top level or in its messages)."""
    if "functions" in data or "function_call" in data:
        return True
    messages = data.get("messages")
    return isinstance(messages, list) and any(
        isinstance(m, Mapping) and (m.get("role") == "function" or "function_call" in m)
        for m in messages
    )


def upgrade_request(data: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of the request in the tools shape; every other field is kept as it was.

    Raises :class:`InvalidRequestError` naming the legacy field at fault (``functions``
    together with ``tools``, a malformed function, ``function_call`` naming an unknown one).
    """
    out = {k: v for k, v in data.items() if k not in ("functions", "function_call")}
    functions = data.get("functions")
    choice = data.get("function_call")
    if functions is not None:
        if data.get("tools") is not None:
            raise InvalidRequestError(
                "functions and tools cannot be used together: send either the legacy "
                "'functions' (with 'function_call') or 'tools' (with 'tool_choice')",
                param="functions",
            )
        out["tools"] = _tools(functions)
    if choice is not None:
        if functions is None:
            raise InvalidRequestError(
                "function_call is only allowed together with functions"
                + (" (with tools, use tool_choice)" if data.get("tools") is not None else ""),
                param="function_call",
            )
        if data.get("tool_choice") is not None:
            raise InvalidRequestError(
                "function_call and tool_choice cannot be used together", param="function_call"
            )
        out["tool_choice"] = _tool_choice(choice, [t["function"]["name"] for t in out["tools"]])
    messages = data.get("messages")
    if isinstance(messages, list):
        out["messages"] = _messages(messages)
    return out


def _tools(functions: Any) -> list[dict[str, Any]]:
    if not isinstance(functions, list):
        raise InvalidRequestError(
            f"functions must be a list of function objects, not {type(functions).__name__}",
            param="functions",
        )
    tools = []
    seen: set[str] = set()
    for i, function in enumerate(functions):
        if not isinstance(function, Mapping):
            raise InvalidRequestError(
                f"functions[{i}] must be an object with a 'name', not {type(function).__name__}",
                param=f"functions.{i}",
            )
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidRequestError(
                f"functions[{i}] needs a non-empty string 'name', not {name!r}",
                param=f"functions.{i}.name",
            )
        if name in seen:
            raise InvalidRequestError(
                f"functions[{i}]: duplicate function name {name!r}", param=f"functions.{i}.name"
            )
        seen.add(name)
        for key, kind in (("description", str), ("parameters", Mapping)):
            value = function.get(key)
            if value is not None and not isinstance(value, kind):
                raise InvalidRequestError(
                    f"functions[{i}].{key} must be {'a string' if kind is str else 'an object'}"
                    f", not {type(value).__name__}",
                    param=f"functions.{i}.{key}",
                )
        tools.append({"type": "function", "function": dict(function)})
    return tools


def _tool_choice(choice: Any, names: Sequence[str]) -> str | dict[str, Any]:
    if choice in ("none", "auto"):
        return str(choice)
    name = choice.get("name") if isinstance(choice, Mapping) else None
    if not isinstance(name, str) or not name:
        raise InvalidRequestError(
            f'function_call must be "none", "auto" or {{"name": ...}}, not {choice!r}',
            param="function_call",
        )
    if name not in names:
        available = ", ".join(repr(n) for n in names) or "none"
        raise InvalidRequestError(
            f"function_call names the function {name!r}, which is not among the functions "
            f"(available: {available})",
            param="function_call",
        )
    return {"type": "function", "function": {"name": name}}


def _messages(messages: list[Any]) -> list[Any]:
    """Assistant ``function_call`` entries become ``tool_calls`` with synthetic ids; each
    ``role: "function"`` result answers the latest call of its name before it."""
    out: list[Any] = []
    latest: dict[str | None, str] = {}  # function name -> id of its latest call; None: any
    count = 0
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            out.append(message)  # request validation names it
            continue
        if "function_call" in message:
            message = _assistant_call(message, i, LEGACY_CALL_ID_PREFIX + str(count))
            count += 1
        calls = message.get("tool_calls")
        for call in calls if isinstance(calls, list) else ():  # validation names a bad one
            function = call.get("function") if isinstance(call, Mapping) else None
            if isinstance(function, Mapping) and isinstance(call.get("id"), str):
                name = function.get("name")
                if isinstance(name, str):
                    latest[name] = call["id"]
                latest[None] = call["id"]
        if message.get("role") == "function":
            name = message.get("name")
            answered = latest.get(name) if isinstance(name, str) else latest.get(None)
            if answered is None:  # its call is not in the history (trimmed by the caller)
                answered = LEGACY_CALL_ID_PREFIX + str(count)
                count += 1
            message = {**message, "role": "tool", "tool_call_id": answered}
        out.append(message)
    return out


def _assistant_call(message: Mapping[str, Any], index: int, call_id: str) -> dict[str, Any]:
    rest = {k: v for k, v in message.items() if k != "function_call"}
    legacy = message["function_call"]
    if legacy is None:
        return rest
    if not isinstance(legacy, Mapping) or not isinstance(legacy.get("name"), str):
        raise InvalidRequestError(
            f'messages[{index}].function_call must be {{"name": ..., "arguments": ...}}, '
            f"not {legacy!r}",
            param=f"messages.{index}.function_call",
        )
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": legacy["name"], "arguments": legacy.get("arguments")},
    }
    earlier = message.get("tool_calls")
    rest["tool_calls"] = [*earlier, call] if isinstance(earlier, list) else [call]
    return rest


# -- answers ------------------------------------------------------------------------------


def downgrade_completion(data: Mapping[str, Any]) -> dict[str, Any]:
    """A ``chat.completion`` dict in the legacy shape: the first tool call of each choice as
    ``message.function_call``, ``finish_reason`` ``"function_call"``."""
    return _each_choice(data, _downgrade_choice)


def _each_choice(
    data: Mapping[str, Any], downgrade: Callable[[Mapping[str, Any]], dict[str, Any]]
) -> dict[str, Any]:
    """``data`` with ``downgrade`` applied to each of its choices that is an object."""
    out = dict(data)
    choices = data.get("choices")
    if isinstance(choices, list):
        out["choices"] = [downgrade(c) if isinstance(c, Mapping) else c for c in choices]
    return out


def _downgrade_choice(choice: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(choice)
    message = choice.get("message")
    called = False
    if isinstance(message, Mapping) and "tool_calls" in message:
        message = {k: v for k, v in message.items() if k != "tool_calls"}
        first = _first_call(choice["message"]["tool_calls"])
        if first is not None:
            function = first.get("function") or {}
            message["function_call"] = {
                "name": function.get("name") or "",
                "arguments": function.get("arguments") or "{}",
            }
            called = True
        out["message"] = message
    if choice.get("finish_reason") == "tool_calls" or (
        called and choice.get("finish_reason") == "stop"
    ):
        out["finish_reason"] = "function_call"
    return out


def _first_call(calls: Any) -> Mapping[str, Any] | None:
    if isinstance(calls, list) and calls and isinstance(calls[0], Mapping):
        return calls[0]
    return None


def downgrade_chunk(data: Mapping[str, Any]) -> dict[str, Any]:
    """A ``chat.completion.chunk`` dict in the legacy shape: the deltas of the first call
    (index 0) as ``delta.function_call`` (name first, then argument fragments), the deltas
    of any other call dropped, ``finish_reason`` ``"tool_calls"`` as ``"function_call"``."""
    return _each_choice(data, _downgrade_delta)


def _downgrade_delta(choice: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(choice)
    delta = choice.get("delta")
    if isinstance(delta, Mapping) and "tool_calls" in delta:
        legacy: dict[str, Any] = {}
        for position, call in enumerate(delta["tool_calls"] or ()):
            if not isinstance(call, Mapping) or call.get("index", position) != 0:
                continue
            function = call.get("function") or {}
            for key in ("name", "arguments"):
                if function.get(key) is not None:
                    legacy[key] = legacy.get(key, "") + function[key]
        new_delta = {k: v for k, v in delta.items() if k != "tool_calls"}
        if legacy:
            new_delta["function_call"] = legacy
        out["delta"] = new_delta
    if choice.get("finish_reason") == "tool_calls":
        out["finish_reason"] = "function_call"
    return out
