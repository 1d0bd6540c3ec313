"""What a dialect is: one prompt format for describing tools, writing calls and reading them back."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from toolshim.dialects.extract import ParsedReply, ReplyParser, parse_reply
from toolshim.types import ToolCall, ToolChoice, ToolSpec

__all__ = ["Dialect", "PromptOptions", "example_arguments", "schema_json"]


class PromptOptions:
    """What the tool prompt must say besides the tools: the tool_choice, parallelism, strategy."""

    __slots__ = ("choice", "decision", "parallel")

    def __init__(
        self, choice: ToolChoice = ToolChoice.AUTO, *, parallel: bool = True, decision: bool = False
    ) -> None:
        self.choice = choice
        self.parallel = parallel
        self.decision = decision


class Dialect(ABC):
    """A prompt format. Dialects never do I/O; the engine drives them.

    Subclasses render the tool instructions (:meth:`render_tools`), an assistant's calls for
    the history (:meth:`render_calls`), a tool result (:meth:`render_result`), and say how to
    fix a broken reply (:meth:`format_reminder`). Parsing is shared: every dialect reads every
    other dialect's shapes through the tolerant extraction layer.
    """

    name: ClassVar[str]
    max_calls: ClassVar[int | None] = None
    """The most calls the format allows in one reply (None: no limit)."""

    @abstractmethod
    def render_tools(self, tools: Sequence[ToolSpec], options: PromptOptions) -> str:
        """The system-prompt text that describes the tools and how to call them (or not)."""

    @abstractmethod
    def render_calls(self, calls: Sequence[ToolCall]) -> str:
        """An assistant's tool calls written in this dialect, for the rewritten history."""

    @abstractmethod
    def format_reminder(self, tools: Sequence[ToolSpec], options: PromptOptions) -> str:
        """One or two sentences that restate the call format, for re-asks."""

    def render_result(self, name: str, call_id: str, content: str) -> str:
        """A tool's result, as the text of a user message."""
        return f"Tool result for {name} (call id {call_id}):\n{content}"

    def parser(self, tools: Sequence[ToolSpec]) -> ReplyParser:
        """A fresh incremental parser for one reply."""
        return ReplyParser(tools)

    def parse(self, text: str, tools: Sequence[ToolSpec]) -> ParsedReply:
        """Parse a whole reply."""
        return parse_reply(text, tools)

    def response_format(
        self, tools: Sequence[ToolSpec], options: PromptOptions
    ) -> Mapping[str, Any] | None:
        """A JSON-Schema ``response_format`` that admits exactly the valid replies, if any."""
        return None

    def __repr__(self) -> str:
        return f"<dialect {self.name}>"


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
    props = tool.parameters.get("properties")
    if not isinstance(props, Mapping):
        return {}
    required = [p for p in tool.parameters.get("required", []) if p in props]
    names = required or list(props)[:1]
    out: dict[str, Any] = {}
    for name in names[:limit]:
        spec = props.get(name)
        if not isinstance(spec, Mapping):
            out[name] = "..."
            continue
        if isinstance(spec.get("enum"), list) and spec["enum"]:
            out[name] = spec["enum"][0]
            continue
        kind = spec.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "string")
        out[name] = _EXAMPLES.get(str(kind), "...")
    return out
