"""Responses API tools and ``tool_choice`` read into core types: which tool types are served,
and how.

Tools (a tool that is not served is dropped with a warning in the metadata; the request
still works):

===========================================  ==================================================
tool ``type``                                served as
===========================================  ==================================================
``function``                                 a function (``name``, ``description``,
                                             ``parameters``, ``strict``)
``custom`` (freeform, Codex's apply_patch)   a function with one string argument ``input``;
                                             calls come back as ``custom_tool_call`` items
``web_search``, ``web_search_preview``,      dropped: they run on OpenAI's servers, not on a
``file_search``, ``code_interpreter``,       chat-completions upstream
``image_generation``, ``mcp``,
``computer``, ``computer_use_preview``,
``tool_search``
``local_shell``, ``shell``, ``apply_patch``  dropped: their calls and outputs are item types of
                                             their own that no chat upstream can produce
``namespace`` (grouped functions)            dropped, with its functions
===========================================  ==================================================

``tool_choice``: ``auto``, ``none``, ``required``, ``{"type": "function" | "custom", "name"}``
(a tool that is not served, or not offered, is a 400) and ``{"type": "allowed_tools", "mode",
"tools"}`` (the tools on offer narrowed to those listed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from toolshim.errors import InvalidRequestError
from toolshim.types import EMPTY, ToolChoice, ToolSpec

__all__ = ["CUSTOM_INPUT", "HOSTED_TOOL_TYPES", "decode_tool_choice", "decode_tools"]

CUSTOM_INPUT = "input"
"""The one string argument a freeform (``custom``) tool is served with."""

HOSTED_TOOL_TYPES = frozenset(
    {
        "web_search",
        "web_search_preview",
        "web_search_preview_2025_03_11",
        "web_search_2025_08_26",
        "file_search",
        "code_interpreter",
        "image_generation",
        "mcp",
        "computer",
        "computer_use_preview",
        "tool_search",
        "programmatic_tool_calling",
    }
)
"""Tool types that run on OpenAI's own servers: dropped, with a warning."""


def decode_tools(raw: Sequence[Any], warnings: list[str]) -> tuple[tuple[ToolSpec, ...], list[str]]:
    specs: list[ToolSpec] = []
    custom: list[str] = []
    seen: set[str] = set()
    for i, tool in enumerate(raw):
        if not isinstance(tool, Mapping):
            raise InvalidRequestError(f"tools[{i}] must be an object", param=f"tools.{i}")
        kind = tool.get("type")
        if kind == "function":
            spec = _function(tool, i)
        elif kind == "custom":
            spec = _custom(tool, i)
            custom.append(spec.name)
        elif isinstance(kind, str):
            label = (
                f"{kind} tool {tool['name']!r}"
                if isinstance(tool.get("name"), str)
                else (f"{kind} tool")
            )
            warnings.append(f"{label} dropped: {_why_dropped(kind)}")
            continue
        else:
            raise InvalidRequestError(f"tools[{i}] needs a 'type'", param=f"tools.{i}.type")
        if spec.name in seen:
            raise InvalidRequestError(
                f"tools[{i}]: duplicate tool name {spec.name!r}", param=f"tools.{i}.name"
            )
        seen.add(spec.name)
        specs.append(spec)
    return tuple(specs), custom


def _why_dropped(kind: str) -> str:
    if kind in HOSTED_TOOL_TYPES:
        return "it runs on OpenAI's servers, not on a chat-completions upstream"
    if kind == "namespace":
        return "grouped tools are not served by toolshim"
    return "toolshim serves function and custom tools only"


def _function(tool: Mapping[str, Any], i: int) -> ToolSpec:
    name = tool.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidRequestError(
            f"tools[{i}]: a function tool needs a non-empty string 'name'", param=f"tools.{i}.name"
        )
    description = tool.get("description") or ""
    parameters = tool.get("parameters")
    if parameters is None:
        parameters = {"type": "object", "properties": {}}
    if not isinstance(parameters, Mapping) or not isinstance(description, str):
        raise InvalidRequestError(
            f"tools[{i}]: 'parameters' must be a JSON Schema object and 'description' a string",
            param=f"tools.{i}",
        )
    strict = tool.get("strict")
    return ToolSpec(
        name=name,
        description=description,
        parameters=parameters,
        extra={"strict": strict} if isinstance(strict, bool) else EMPTY,
    )


def _custom(tool: Mapping[str, Any], i: int) -> ToolSpec:
    name = tool.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidRequestError(
            f"tools[{i}]: a custom tool needs a non-empty string 'name'", param=f"tools.{i}.name"
        )
    description = str(tool.get("description") or "")
    input_doc = "The tool's whole input, as free text."
    fmt = tool.get("format")
    if isinstance(fmt, Mapping) and fmt.get("type") == "grammar":
        input_doc = (
            f"The tool's whole input, written in this {fmt.get('syntax', 'grammar')} grammar:\n"
            f"{fmt.get('definition', '')}"
        )
    parameters = {
        "type": "object",
        "properties": {CUSTOM_INPUT: {"type": "string", "description": input_doc}},
        "required": [CUSTOM_INPUT],
        "additionalProperties": False,
    }
    return ToolSpec(name=name, description=description, parameters=parameters)


def decode_tool_choice(
    value: Any, tools: tuple[ToolSpec, ...]
) -> tuple[ToolChoice | None, tuple[ToolSpec, ...]]:
    """The canonical choice, and the tools it leaves on offer (``allowed_tools`` narrows them)."""
    if value is None:
        return None, tools
    if value in ("auto", "none", "required"):
        return {"auto": ToolChoice.AUTO, "none": ToolChoice.NONE}.get(
            value, ToolChoice.REQUIRED
        ), tools
    names = [t.name for t in tools]
    if isinstance(value, Mapping) and value.get("type") in ("function", "custom"):
        name = value.get("name")
        if not isinstance(name, str) or name not in names:
            raise InvalidRequestError(
                f"tool_choice names the tool {name!r}, which is not among the tools served: "
                + (", ".join(repr(n) for n in names) or "none"),
                param="tool_choice",
            )
        return ToolChoice.function(name), tools
    if isinstance(value, Mapping) and value.get("type") == "allowed_tools":
        mode = value.get("mode", "auto")
        allowed = value.get("tools")
        if mode not in ("auto", "required") or not isinstance(allowed, list):
            raise InvalidRequestError(
                'allowed_tools needs "mode" ("auto" or "required") and a "tools" list',
                param="tool_choice",
            )
        wanted = {t.get("name") for t in allowed if isinstance(t, Mapping)}
        narrowed = tuple(t for t in tools if t.name in wanted)
        return (ToolChoice.REQUIRED if mode == "required" else ToolChoice.AUTO), narrowed
    kind = value.get("type") if isinstance(value, Mapping) else value
    raise InvalidRequestError(
        f"tool_choice {kind!r} is not served by toolshim: use 'auto', 'none', 'required', "
        '{"type": "function", "name": ...} or {"type": "allowed_tools", ...}',
        param="tool_choice",
    )
