"""The ``json`` dialect (the default): ``{"tool_calls": [{"name": …, "arguments": {…}}]}`` or prose."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from toolshim.dialects._prompt import (
    PromptOptions,
    call_arguments,
    choice_rules,
    example_arguments,
    schema_json,
    tools_needing,
)
from toolshim.dialects.base import Dialect
from toolshim.types import ToolCall, ToolSpec

__all__ = ["JsonDialect"]

_SHAPE = '{"tool_calls": [{"name": "<tool name>", "arguments": {...}}]}'


class JsonDialect(Dialect):
    """Tools as JSON Schemas; a call is one JSON object holding a ``tool_calls`` list."""

    name = "json"

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
        else:
            lines += [
                "# How to call a tool",
                "",
                f"To call a tool, reply with only this JSON object and no other text: {_SHAPE}",
                f"Example: {example}",
            ]
            decline = "answer in plain text, without any JSON."
        lines += ["", "# Rules", ""]
        lines += choice_rules(
            options,
            decline=decline,
            many="If several calls are needed, put them all in the tool_calls list.",
            max_calls=self.max_calls,
        )
        lines += [
            "Use tool names exactly as listed. Arguments must match the schema.",
            "Tool results come back in messages that start with 'Tool result'; use them to "
            "answer the user.",
        ]
        return "\n".join(lines).strip()

    def render_calls(self, calls: Sequence[ToolCall]) -> str:
        items = [{"name": c.name, "arguments": call_arguments(c)} for c in calls]
        return json.dumps({"tool_calls": items}, ensure_ascii=False)

    def format_reminder(self, tools: Sequence[ToolSpec], options: PromptOptions) -> str:
        return f"To call a tool, reply with only {_SHAPE}."

    def response_format(
        self, tools: Sequence[ToolSpec], options: PromptOptions
    ) -> Mapping[str, Any] | None:
        """In the decision strategy the reply is JSON only: constrain it to calls of the tools."""
        if not options.decision:
            return None
        shown = tools_needing(tools, options)
        call = {
            "anyOf": [
                {
                    "type": "object",
                    "properties": {
                        "name": {"const": t.name},
                        "arguments": dict(t.parameters) or {"type": "object"},
                    },
                    "required": ["name", "arguments"],
                }
                for t in shown
            ]
        }
        calls: dict[str, Any] = {"type": "array", "items": call}
        if options.choice.kind in ("required", "function"):
            calls["minItems"] = 1
        if options.choice.kind == "function" or not options.parallel:
            calls["maxItems"] = 1
        schema = {
            "type": "object",
            "properties": {"tool_calls": calls},
            "required": ["tool_calls"],
        }
        return {"type": "json_schema", "json_schema": {"name": "tool_calls", "schema": schema}}
