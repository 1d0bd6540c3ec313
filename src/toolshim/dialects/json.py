"""The ``json`` dialect (the default): ``{"tool_calls": [{"name": …, "arguments": {…}}]}`` or prose."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from toolshim.dialects.base import Dialect, PromptOptions, example_arguments, schema_json
from toolshim.types import ToolCall, ToolSpec

__all__ = ["JsonDialect"]


class JsonDialect(Dialect):
    name = "json"

    def render_tools(self, tools: Sequence[ToolSpec], options: PromptOptions) -> str:
        lines = [
            "# Tools",
            "",
            "You can call the following tools. Each one is listed with the JSON Schema of its "
            "arguments.",
            "",
        ]
        for tool in tools:
            lines.append(f"## {tool.name}")
            if tool.description:
                lines.append(tool.description.strip())
            lines.append(f"Arguments schema: {schema_json(tool.parameters)}")
            lines.append("")
        first = tools[0]
        example = json.dumps(
            {"tool_calls": [{"name": first.name, "arguments": example_arguments(first)}]},
            ensure_ascii=False,
        )
        if options.decision:
            lines += [
                "# Your reply",
                "",
                "Decide whether a tool must be called to answer the last message. Reply with "
                "JSON only, no other text:",
                '{"tool_calls": [{"name": "<tool name>", "arguments": {...}}]}',
                'If no tool is needed, reply exactly: {"tool_calls": []}',
                f"Example: {example}",
            ]
        else:
            lines += [
                "# How to call a tool",
                "",
                "To call a tool, reply with only this JSON object and no other text:",
                '{"tool_calls": [{"name": "<tool name>", "arguments": {...}}]}',
                f"Example: {example}",
                "",
                "# When not to call a tool",
                "",
                "If no tool is needed (you can answer directly, or no listed tool fits the "
                "request), do not write JSON: answer in plain text. Never call a tool that is "
                "not listed above, and never make up tool results.",
            ]
        lines += ["", *self._rules(tools, options)]
        return "\n".join(lines).strip()

    def _rules(self, tools: Sequence[ToolSpec], options: PromptOptions) -> list[str]:
        rules = [
            "Use tool names exactly as listed. Arguments must match the schema.",
            "Tool results come back in messages that start with 'Tool result'; use them to "
            "answer the user.",
        ]
        if options.choice.kind == "required":
            rules.append("You must call at least one tool in this reply; do not answer in text.")
        elif options.choice.kind == "function":
            rules.append(
                f"You must call the tool {options.choice.name!r} now, exactly once; do not "
                "answer in text."
            )
        if not options.parallel:
            rules.append("Call at most one tool in this reply.")
        elif options.choice.kind != "function":
            rules.append("If several calls are needed, put them all in the tool_calls list.")
        return rules

    def render_calls(self, calls: Sequence[ToolCall]) -> str:
        items = [{"name": c.name, "arguments": _arguments(c)} for c in calls]
        return json.dumps({"tool_calls": items}, ensure_ascii=False)

    def format_reminder(self, tools: Sequence[ToolSpec], options: PromptOptions) -> str:
        return (
            'To call a tool, reply with only {"tool_calls": [{"name": "<tool name>", '
            '"arguments": {...}}]}.'
        )


def _arguments(call: ToolCall) -> Any:
    try:
        return call.parsed_arguments()
    except ValueError:
        return call.arguments
