"""The ``json`` dialect (the default): ``{"tool_calls": [{"name": …, "arguments": {…}}]}`` or prose."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from toolshim.dialects._prompt import (
    PromptOptions,
    call_arguments,
    example_arguments,
    schema_json,
    tools_needing,
)
from toolshim.dialects.base import Dialect
from toolshim.schema_quirks import as_meant
from toolshim.types import ToolCall, ToolSpec

__all__ = ["JsonDialect"]

_SHAPE = '{"tool_calls": [{"name": "<tool name>", "arguments": {...}}]}'
_ANSWER = '{"answer": "<your answer>"}'
ANSWER_MAX_LENGTH = 8000
"""Longest text answer a constrained reply may hold."""
STRING_MAX_LENGTH = 2000
"""Longest string argument a constrained call may hold when its schema sets no bound."""


def bounded(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``schema`` whose unbounded strings get ``maxLength`` (recursively)."""
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if isinstance(value, Mapping):
            if key in ("properties", "$defs", "definitions", "patternProperties"):
                out[key] = {
                    k: bounded(v) if isinstance(v, Mapping) else v for k, v in value.items()
                }
            else:
                out[key] = bounded(value)
        elif isinstance(value, list) and key in ("anyOf", "oneOf", "allOf", "prefixItems"):
            out[key] = [bounded(v) if isinstance(v, Mapping) else v for v in value]
        else:
            out[key] = value
    kinds = out.get("type")
    is_string = kinds == "string" or (isinstance(kinds, list) and "string" in kinds)
    if is_string and "maxLength" not in out and "enum" not in out and "const" not in out:
        out["maxLength"] = STRING_MAX_LENGTH
    return out


class JsonDialect(Dialect):
    """Tools as JSON Schemas; a call is one JSON object holding a ``tool_calls`` list."""

    name = "json"
    many_calls = "If several calls are needed, put them all in the tool_calls list."

    def render_tools(self, tools: Sequence[ToolSpec], options: PromptOptions) -> str:
        shown = tools_needing(tools, options)
        lines = [
            "# Tools",
            "",
            "You can call the following tools. Each one is listed with the JSON Schema of its "
            "arguments.",
            "",
        ]
        for tool in shown:
            lines.append(f"## {tool.name}")
            if tool.description:
                lines.append(tool.description.strip())
            lines.append(f"Arguments schema: {schema_json(tool.parameters)}")
            lines.append("")
        first = shown[0]
        example = json.dumps(
            {"tool_calls": [{"name": first.name, "arguments": example_arguments(first)}]},
            ensure_ascii=False,
        )
        if options.decision:
            lines += [
                "# Your reply",
                "",
                "Decide whether a tool must be called to answer the last message. Reply with "
                f"JSON only, no other text: {_SHAPE}",
                'If no tool is needed, reply exactly: {"tool_calls": []}',
                f"Example: {example}",
            ]
            decline = 'reply {"tool_calls": []}.'
        elif options.constrained:
            lines += [
                "# Your reply",
                "",
                f"Reply with one JSON object. To call tools: {_SHAPE}",
                f"Example: {example}",
                f"To answer without a tool: {_ANSWER}",
            ]
            decline = f"reply {_ANSWER}."
        else:
            lines += [
                "# How to call a tool",
                "",
                f"To call a tool, reply with only this JSON object and no other text: {_SHAPE}",
                f"Example: {example}",
            ]
            decline = "answer in plain text, without any JSON."
        lines += ["", "# Rules", ""]
        return self.finish_tools(
            lines,
            options,
            decline,
            "Use tool names exactly as listed. Arguments must match the schema.",
        )

    def render_calls(self, calls: Sequence[ToolCall]) -> str:
        items = [{"name": c.name, "arguments": call_arguments(c)} for c in calls]
        return json.dumps({"tool_calls": items}, ensure_ascii=False)

    def continuation(self, calls: Sequence[ToolCall]) -> tuple[str, str] | None:
        opening = '{"name": "'
        items = [
            json.dumps({"name": c.name, "arguments": call_arguments(c)}, ensure_ascii=False)
            for c in calls
        ]
        return '{"tool_calls": [' + "".join(f"{item}, " for item in items) + opening, opening

    def format_reminder(self, tools: Sequence[ToolSpec], options: PromptOptions) -> str:
        if options.constrained and not options.decision:
            return f"To call a tool, reply with only {_SHAPE}; to answer, {_ANSWER}."
        return f"To call a tool, reply with only {_SHAPE}."

    def response_format(
        self, tools: Sequence[ToolSpec], options: PromptOptions
    ) -> Mapping[str, Any] | None:
        """A JSON Schema that admits exactly the valid replies: calls of the offered tools (names
        as constants, their argument schemas, at most one call without parallel calls) or, unless
        tool_choice forbids it, a text answer. Strings are bounded so that a small model held to
        the schema cannot run on inside one."""
        shown = tools_needing(tools, options)
        call = {
            "anyOf": [
                {
                    "type": "object",
                    "properties": {
                        "name": {"const": t.name},
                        "arguments": bounded(as_meant(dict(t.parameters)) or {"type": "object"}),
                    },
                    "required": ["name", "arguments"],
                    "additionalProperties": False,
                }
                for t in shown
            ]
        }
        calls: dict[str, Any] = {"type": "array", "items": call}
        forced = options.choice.kind in ("required", "function")
        if forced:
            calls["minItems"] = 1
        if options.choice.kind == "function" or not options.parallel or self.max_calls == 1:
            calls["maxItems"] = 1
        branches: list[dict[str, Any]] = [
            {
                "type": "object",
                "properties": {"tool_calls": calls},
                "required": ["tool_calls"],
                "additionalProperties": False,
            }
        ]
        if not options.decision and not forced:
            branches.append(
                {
                    "type": "object",
                    "properties": {"answer": {"type": "string", "maxLength": ANSWER_MAX_LENGTH}},
                    "required": ["answer"],
                    "additionalProperties": False,
                }
            )
        schema = branches[0] if len(branches) == 1 else {"anyOf": branches}
        return {
            "type": "json_schema",
            "json_schema": {"name": "tool_calls", "strict": True, "schema": schema},
        }
