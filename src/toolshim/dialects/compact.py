"""The ``compact`` dialect for sub-1B models: ``{"tool":"get_weather","city":"Paris"}``, one per reply.

It follows seed 003 (a Gemma 3n 1B client: ``{"tool":"name"}``, or ``{"tool":"none"}`` and then
the answer) and improves on it: arguments sit flat next to ``"tool"`` instead of being
impossible, the prompt carries few-shot examples, and the parser tolerates key case,
whitespace, missing quotes and a missing closing brace (the failure list of seed 003).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from toolshim.dialects._prompt import (
    Parameter,
    PromptOptions,
    call_arguments,
    example_arguments,
    parameters_of,
    tools_needing,
    type_label,
)
from toolshim.dialects.base import Dialect
from toolshim.dialects.interpret import RESERVED_KEYS
from toolshim.types import ToolCall, ToolSpec

__all__ = ["DECLINE", "CompactDialect", "compact_call"]

DECLINE = '{"tool":"none"}'


class CompactDialect(Dialect):
    """One flat JSON object per reply; ``{"tool":"none"}`` then the answer when no tool fits."""

    name = "compact"
    max_calls = 1

    def render_tools(self, tools: Sequence[ToolSpec], options: PromptOptions) -> str:
        shown = tools_needing(tools, options)
        lines = ["You can use these tools:"]
        lines += [f"- {_describe(tool)}" for tool in shown]
        first = shown[0]
        call = compact_call(first.name, example_arguments(first))
        must = options.choice.kind in ("required", "function")
        lines += ["", "How to reply:"]
        if options.choice.kind == "function":
            lines.append(f"- You must use the tool {first.name} now. Reply with only: {call}")
        else:
            lines.append(f"- To use a tool, reply with only one line of JSON, like: {call}")
        lines.append('- Put each argument next to "tool". Use one tool per reply, never more.')
        if must:
            lines.append("- You must use a tool now; do not answer in text.")
        elif options.decision:
            lines.append(f"- If no tool is needed, reply with only: {DECLINE}")
        else:
            lines.append(
                f"- If no tool is needed, or no tool fits, reply {DECLINE} and then your "
                "answer on the next line."
            )
        lines.append("- Only use the tools listed above. Never make up tool results.")
        lines += [
            "",
            "Examples:",
            f"User: (asks for something {first.name} can do)",
            f"You: {call}",
        ]
        if not must:
            lines += [
                "User: Hi! How are you?",
                f"You: {DECLINE}"
                + ("" if options.decision else "\nHello! I'm fine, thanks. How can I help you?"),
            ]
        if options.results:
            lines += [
                "",
                "The results of your calls are in the messages that start with 'Tool result'.",
            ]
        return "\n".join(lines)

    def render_calls(self, calls: Sequence[ToolCall]) -> str:
        return "\n".join(compact_call(c.name, call_arguments(c)) for c in calls)

    def format_reminder(self, tools: Sequence[ToolSpec], options: PromptOptions) -> str:
        if options.choice.kind in ("required", "function"):
            return 'Reply with only one line of JSON: {"tool":"<tool name>", <arguments>}.'
        return (
            'Reply with only one line of JSON: {"tool":"<tool name>", <arguments>}, or '
            f"{DECLINE} and then your answer."
        )

    def response_format(
        self, tools: Sequence[ToolSpec], options: PromptOptions
    ) -> Mapping[str, Any] | None:
        """In the decision strategy the reply is one JSON object: constrain it."""
        if not options.decision:
            return None
        shown = tools_needing(tools, options)
        choices: list[dict[str, Any]] = []
        for tool in shown:
            props = dict(tool.parameters.get("properties") or {})
            required = list(tool.required)
            choices.append(
                {
                    "type": "object",
                    "properties": {"tool": {"const": tool.name}, **props},
                    "required": ["tool", *required],
                }
            )
        if options.choice.kind not in ("required", "function"):
            choices.append(
                {"type": "object", "properties": {"tool": {"const": "none"}}, "required": ["tool"]}
            )
        schema = {"anyOf": choices}
        return {"type": "json_schema", "json_schema": {"name": "tool_decision", "schema": schema}}


def compact_call(name: str, arguments: Any) -> str:
    """``{"tool":"name","a":1}``; nested under ``"arguments"`` when a key would be ambiguous."""
    if isinstance(arguments, Mapping) and not any(
        str(k).strip().lower() in RESERVED_KEYS or str(k) != str(k).strip() for k in arguments
    ):
        return json.dumps({"tool": name, **arguments}, ensure_ascii=False, separators=(",", ":"))
    return json.dumps(
        {"tool": name, "arguments": arguments}, ensure_ascii=False, separators=(",", ":")
    )


def _describe(tool: ToolSpec) -> str:
    text = tool.name
    if tool.description.strip():
        text += f": {' '.join(tool.description.split())}"
    params = parameters_of(tool)
    if not params:
        return f"{text} No arguments."
    return f"{text} Arguments: " + "; ".join(_argument(p) for p in params)


def _argument(param: Parameter) -> str:
    notes = [type_label(param.schema)]
    if param.required:
        notes.append("required")
    text = f"{param.name} ({', '.join(notes)})"
    return f"{text}: {param.description.rstrip('.')}" if param.description else text
