"""Prompt pieces every dialect shares: the tool_choice rules, how to decline, parameter summaries."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any

from toolshim.types import ToolCall, ToolChoice, ToolSpec

__all__ = [
    "Parameter",
    "PromptOptions",
    "call_arguments",
    "choice_rules",
    "default_text",
    "example_arguments",
    "parameters_of",
    "schema_json",
    "tools_needing",
    "type_label",
]


@dataclass(eq=False, repr=False, slots=True)
class PromptOptions:
    """What the tool prompt must say besides the tools: the tool_choice, parallelism, strategy."""

    choice: ToolChoice = ToolChoice.AUTO
    _: KW_ONLY
    parallel: bool = True
    decision: bool = False
    constrained: bool = False
    """The reply will be held to the dialect's ``response_format`` JSON Schema."""
    results: bool = False
    """The conversation already holds tool results. Only then does the prompt say how
    results look: told about them up front, small models write made-up results
    ("Tool result: {...}") instead of calls."""

    def __repr__(self) -> str:
        return (
            f"PromptOptions({self.choice.describe()}, parallel={self.parallel}, "
            f"decision={self.decision}, constrained={self.constrained})"
        )


def choice_rules(
    options: PromptOptions, *, decline: str, many: str, max_calls: int | None
) -> list[str]:
    """The sentences that carry tool_choice, parallel_tool_calls and the decision strategy.

    ``decline`` says how to answer without a tool in this dialect (used for ``auto``),
    ``many`` how to make several calls (used when more than one call is allowed).
    """
    choice = options.choice
    one = max_calls == 1 or not options.parallel
    rules: list[str] = []
    if choice.kind == "none":
        rules.append("Do not call any tool now: answer in plain text.")
        return rules
    if choice.kind == "required":
        rules.append("You must call at least one tool in this reply; do not answer in text.")
    elif choice.kind == "function":
        rules.append(
            f"You must call the tool {choice.name!r} now, exactly once; do not call any other "
            "tool and do not answer in text."
        )
    else:
        rules.append(
            "Call a tool only when the request needs it. If you can answer from what you "
            "already know, or no listed tool fits the request, do not call a tool: "
            f"{decline}"
        )
        rules.append("Never invent a tool that is not listed, and never make up tool results.")
    if choice.kind != "function":
        rules.append("Make at most one call in this reply." if one else many)
    return rules


@dataclass(frozen=True, slots=True)
class Parameter:
    """One parameter of a tool, summarised from its JSON Schema."""

    name: str
    schema: Mapping[str, Any]
    required: bool

    @property
    def description(self) -> str:
        text = self.schema.get("description")
        return " ".join(text.split()) if isinstance(text, str) else ""

    @property
    def enum(self) -> list[Any] | None:
        values = self.schema.get("enum")
        return list(values) if isinstance(values, list) and values else None

    @property
    def has_default(self) -> bool:
        return "default" in self.schema


def parameters_of(tool: ToolSpec) -> list[Parameter]:
    """The tool's parameters, required ones first, each in the schema's order."""
    props = tool.parameters.get("properties")
    if not isinstance(props, Mapping):
        return []
    needed = set(tool.required)
    out = [
        Parameter(str(name), spec if isinstance(spec, Mapping) else {}, name in needed)
        for name, spec in props.items()
    ]
    return sorted(out, key=lambda p: not p.required)


_TYPE_LABELS = {
    "string": "string",
    "integer": "integer",
    "number": "number",
    "boolean": "boolean",
    "array": "array",
    "object": "object",
    "null": "null",
}


def type_label(schema: Mapping[str, Any], *, python: bool = False) -> str:
    """A short type for a schema: ``string``, ``array of string``, ``"a" or "b"`` (``python``:
    ``str``, ``list[str]``, ``Literal["a", "b"]``)."""
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        values = [json.dumps(v, ensure_ascii=False) for v in enum]
        return f"Literal[{', '.join(values)}]" if python else " or ".join(values)
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if isinstance(k, str) and k != "null"]
        kind = kinds[0] if kinds else None
    if kind == "array":
        items = schema.get("items")
        inner = type_label(items, python=python) if isinstance(items, Mapping) else None
        if python:
            return f"list[{inner}]" if inner and inner != "Any" else "list"
        return f"array of {inner}" if inner and inner != "any" else "array"
    if not isinstance(kind, str):
        for key in ("anyOf", "oneOf"):
            options = schema.get(key)
            if isinstance(options, list) and options:
                labels = [type_label(o, python=python) for o in options if isinstance(o, Mapping)]
                return (" | " if python else " or ").join(dict.fromkeys(labels))
        return "Any" if python else "any"
    if python:
        return {
            "string": "str",
            "integer": "int",
            "number": "float",
            "boolean": "bool",
            "object": "dict",
            "null": "None",
        }.get(kind, kind)
    return _TYPE_LABELS.get(kind, kind)


def default_text(value: Any) -> str:
    """A default value as prose: strings bare (``python``), anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def schema_json(schema: Mapping[str, Any]) -> str:
    return json.dumps(schema, ensure_ascii=False)


_EXAMPLES: dict[str, Any] = {
    "string": "...",
    "integer": 1,
    "number": 1.5,
    "boolean": True,
    "array": [],
    "object": {},
}


def example_arguments(tool: ToolSpec, *, limit: int = 3) -> dict[str, Any]:
    """Placeholder arguments that show a call's shape: required parameters first."""
    params = parameters_of(tool)
    chosen = [p for p in params if p.required] or params[:1]
    out: dict[str, Any] = {}
    for param in chosen[:limit]:
        if param.enum:
            out[param.name] = param.enum[0]
            continue
        kind = param.schema.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "string")
        out[param.name] = _EXAMPLES.get(str(kind), "...")
    return out


def call_arguments(call: ToolCall) -> Any:
    """A call's arguments as a value (the raw text when they are not JSON)."""
    try:
        return call.parsed_arguments()
    except ValueError:
        return call.arguments


def tools_needing(tools: Sequence[ToolSpec], options: PromptOptions) -> Sequence[ToolSpec]:
    """The tools worth describing: only the forced one when tool_choice names a function."""
    if options.choice.kind == "function":
        forced = [t for t in tools if t.name == options.choice.name]
        if forced:
            return forced
    return tools
