"""The ``windlass`` dialect (seed 002): ``{"tool": "name", "arguments": {…}}`` blocks inside prose.

Tools are described the Windlass way ("**run_code** / Parameters: - code (str) (required)"),
each with a ready-made example; the model may explain itself around the JSON, and several
blocks in one reply are several calls. Results come back as "Tool Result (name, call id …):".
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from toolshim.dialects._prompt import (
    Parameter,
    PromptOptions,
    call_arguments,
    default_text,
    example_arguments,
    parameters_of,
    schema_json,
    tools_needing,
    type_label,
)
from toolshim.dialects.base import Dialect
from toolshim.types import ToolCall, ToolSpec

__all__ = ["WindlassDialect"]

_SHAPE = '{"tool": "tool_name", "arguments": {"param": "value"}}'
_DECLINE = '{"tool": "none"}'


class WindlassDialect(Dialect):
    """Markdown tool descriptions; JSON call blocks anywhere in the reply."""

    name = "windlass"
    stop_sequences = ("Tool Result (",)
    many_calls = "To call several tools, output one JSON object per call."
    results_note = "The results of your calls are in the messages that start with 'Tool Result'."

    def render_tools(self, tools: Sequence[ToolSpec], options: PromptOptions) -> str:
        shown = tools_needing(tools, options)
        lines = ["## Available Tools", ""]
        for tool in shown:
            lines.append(f"**{tool.name}**")
            if tool.description.strip():
                lines.append(tool.description.strip())
            params = parameters_of(tool)
            if params:
                lines.append("Parameters:")
                lines += [f"  - {_parameter(p)}" for p in params]
            else:
                lines.append("Parameters: none")
            example = self.render_calls(
                [ToolCall.from_arguments("example", tool.name, example_arguments(tool))]
            )
            lines += ["", "To use: Output JSON in this format:", example, ""]
        lines += ["**Important:** To call a tool, output valid JSON with this structure:", _SHAPE]
        if options.decision:
            lines.append(
                "Decide whether a tool must be called to answer the last message. Output only "
                f"the JSON call(s), no other text; if no tool is needed, output only {_DECLINE}"
            )
            decline = f"output only {_DECLINE}"
        else:
            decline = "answer in plain text, with no tool JSON in your reply."
        return self.finish_tools(lines, options, decline)

    def render_calls(self, calls: Sequence[ToolCall]) -> str:
        return "\n".join(
            json.dumps({"tool": c.name, "arguments": call_arguments(c)}, ensure_ascii=False)
            for c in calls
        )

    def render_result(self, name: str, call_id: str, content: str) -> str:
        return f"Tool Result ({name}, call id {call_id}):\n{content}"

    def format_reminder(self, tools: Sequence[ToolSpec], options: PromptOptions) -> str:
        return f"To call a tool, output valid JSON with this structure: {_SHAPE}"


def _parameter(param: Parameter) -> str:
    kind = type_label(param.schema, python=True)
    text = f"{param.name} ({kind})"
    if param.required:
        text += " (required)"
    elif param.has_default:
        text += f" (optional, default: {default_text(param.schema['default'])})"
    else:
        text += " (optional)"
    if param.description:
        text += f": {param.description}"
    kind_name = param.schema.get("type")
    if kind_name == "object" and isinstance(param.schema.get("properties"), dict):
        text += f" JSON Schema: {schema_json(param.schema)}"
    return text
