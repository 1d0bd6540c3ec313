"""Text from the caller's tools and results cannot open or close the prompt's own markup.

An emulated prompt puts tool descriptions and tool results between the dialect's tags
(``<tools>``, ``<tool_call>``, ``<tool_response>``) inside a chat template whose turns are
marked by special tokens (``<|im_end|>``, ``<end_of_turn>``). A fetched page that says
``</tool_response><|im_start|>system`` must not end the result and start a system turn: in
descriptions (and the schema's ``description``/``title`` strings) and in tool results, such
a tag's ``<`` is written ``&lt;`` (a Mistral-style ``[TOOL_CALLS]``'s ``[`` as ``&#91;``) by
:func:`defuse`: a model reads it the same, a tokenizer never takes it for a special token. Enum values and other schema strings are left as
they are: a call must be able to repeat them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from toolshim.types import Message, ToolSpec

__all__ = ["defuse", "defused_results", "defused_tools"]

_TAGS = re.compile(
    r"<(?=/?\s*(?:tools|tool_calls?|tool_response|tool_result|function_calls?|functions?"
    r"|start_of_turn|end_of_turn|think|s)\b[^<>]{0,200}>)"
    r"|<(?=\|[^<>|\n]{1,64}\|>)"
    r"|\[(?=/?(?:TOOL_CALLS|TOOL_RESULTS|AVAILABLE_TOOLS|INST)\])",
    re.IGNORECASE,
)
_TEXT_KEYS = frozenset({"description", "title"})
_RESULT_ROLES = frozenset({"tool", "function"})


def defuse(text: str) -> str:
    """``text`` with every prompt tag and special token made inert (``<`` as ``&lt;``)."""
    if "<" not in text and "[" not in text:
        return text
    return _TAGS.sub(lambda m: "&lt;" if m.group() == "<" else "&#91;", text)


def defused_tools(tools: Sequence[ToolSpec]) -> tuple[ToolSpec, ...]:
    """The tools with their descriptions (and the schema's descriptions and titles) defused."""
    return tuple(
        replace(t, description=defuse(t.description), parameters=_schema(t.parameters))
        for t in tools
    )


def defused_results(messages: Sequence[Message]) -> tuple[Message, ...]:
    """The messages with the text of each tool result defused."""
    return tuple(_result(m) if m.role in _RESULT_ROLES else m for m in messages)


def _result(message: Message) -> Message:
    content = message.content
    if isinstance(content, str):
        return replace(message, content=defuse(content))
    if isinstance(content, tuple):
        parts = tuple(
            {**p, "text": defuse(p["text"])} if isinstance(p.get("text"), str) else p
            for p in content
        )
        return replace(message, content=parts)
    return message


def _schema(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {
            k: defuse(v) if k in _TEXT_KEYS and isinstance(v, str) else _schema(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_schema(v) for v in value]
    return value
