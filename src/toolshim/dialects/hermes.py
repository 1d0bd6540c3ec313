"""The ``hermes`` dialect: tools in ``<tools></tools>``, calls in ``<tool_call></tool_call>``.

This is the format Qwen2.5/Qwen3 and the Hermes fine-tunes were trained on; the prompt follows
the Qwen2.5 chat template's own wording ("You are provided with function signatures within
<tools></tools> XML tags"), and tool results come back in ``<tool_response>`` blocks as the
template renders them, each opening with the function's name and call id (the template has
none, so two parallel results would otherwise be told apart only by their order).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from toolshim.dialects._prompt import (
    PromptOptions,
    call_arguments,
    example_arguments,
    tools_needing,
)
from toolshim.dialects.base import Dialect
from toolshim.types import ToolCall, ToolSpec

__all__ = ["HermesDialect"]

_SHAPE = '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'


class HermesDialect(Dialect):
    """Qwen/Hermes tool calling: JSON signatures in, ``<tool_call>`` blocks out."""

    name = "hermes"
    stop_sequences = ("<tool_response>",)
    many_calls = (
        "When the request asks for several things that do not depend on each other "
        "(the same question about two cities, two people, two items), make all those "
        "calls now, one <tool_call></tool_call> block for each."
    )
    results_note = (
        "The results of your calls are inside <tool_response></tool_response> tags, "
        "each starting with the function name and call id; use them to answer the user."
    )

    def render_tools(self, tools: Sequence[ToolSpec], options: PromptOptions) -> str:
        shown = tools_needing(tools, options)
        lines = [
            "# Tools",
            "",
            "You may call one or more functions to assist with the user query.",
            "",
            "You are provided with function signatures within <tools></tools> XML tags:",
            "<tools>",
            *(json.dumps(_signature(t), ensure_ascii=False) for t in shown),
            "</tools>",
            "",
            "For each function call, return a json object with function name and arguments "
            "within <tool_call></tool_call> XML tags:",
            _SHAPE,
        ]
        first = shown[0]
        example = self.render_calls(
            [ToolCall.from_arguments("example", first.name, example_arguments(first))]
        )
        lines += ["", f"For example:\n{example}", ""]
        if options.decision:
            lines.append(
                "Decide whether a function must be called to answer the last message. Reply "
                "with the <tool_call> blocks only, no other text; if no function is needed, "
                "reply with the single word: none"
            )
            decline = "reply with the single word: none"
        else:
            decline = "answer the user directly in plain text, with no <tool_call> block."
        return self.finish_tools(lines, options, decline)

    def render_calls(self, calls: Sequence[ToolCall]) -> str:
        return "\n".join(
            "<tool_call>\n"
            + json.dumps({"name": c.name, "arguments": call_arguments(c)}, ensure_ascii=False)
            + "\n</tool_call>"
            for c in calls
        )

    def continuation(self, calls: Sequence[ToolCall]) -> tuple[str, str] | None:
        opening = '<tool_call>\n{"name": "'
        written = self.render_calls(calls)
        return (f"{written}\n{opening}" if written else opening), opening

    def render_result(self, name: str, call_id: str, content: str) -> str:
        return f"<tool_response>\n{name} (call id {call_id}):\n{content}\n</tool_response>"

    def format_reminder(self, tools: Sequence[ToolSpec], options: PromptOptions) -> str:
        return f"To call a function, write:\n{_SHAPE}"


def _signature(tool: ToolSpec) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool.name}
    if tool.description:
        function["description"] = tool.description.strip()
    function["parameters"] = dict(tool.parameters)
    return {"type": "function", "function": function}
