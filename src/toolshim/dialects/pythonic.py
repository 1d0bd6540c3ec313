"""The ``pythonic`` dialect: tools as Python signatures, calls as ``[get_weather(city="Paris")]``.

Llama 3.2 and the Berkeley Function Calling Leaderboard use this format, and it is the only
one that got a 0.5B model to make several calls in one reply (DESIGN.md, measured facts).
"""

from __future__ import annotations

import json
import keyword
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

from toolshim.dialects._prompt import (
    Parameter,
    PromptOptions,
    call_arguments,
    example_arguments,
    parameters_of,
    schema_json,
    tools_needing,
    type_label,
)
from toolshim.dialects.base import Dialect
from toolshim.types import ToolCall, ToolSpec

__all__ = ["PythonicDialect", "python_call"]

_SHAPE = "[func_name1(param_name1=value1, param_name2=value2), func_name2(param_name=value)]"


class PythonicDialect(Dialect):
    """Python function signatures in, a Python list of calls out."""

    name = "pythonic"
    python_unknown = True
    empty_list_declines = True

    def render_tools(self, tools: Sequence[ToolSpec], options: PromptOptions) -> str:
        shown = tools_needing(tools, options)
        lines = ["# Tools", "", "You can call these Python functions:", ""]
        for tool in shown:
            lines += [_signature(tool), ""]
        first = shown[0]
        example = self.render_calls(
            [ToolCall.from_arguments("example", first.name, example_arguments(first))]
        )
        lines += [
            "To call functions, reply with a Python list of calls and nothing else:",
            _SHAPE,
            f"For example: {example}",
            "Use keyword arguments. Write strings in double quotes; use True, False and None.",
        ]
        if options.decision:
            lines.append(
                "Decide whether a function must be called to answer the last message. Reply "
                "with the list of calls only; if no function is needed, reply exactly: []"
            )
            decline = "reply exactly: []"
        else:
            decline = "answer in plain text, without any function call."
        return self.finish_tools(lines, options, decline)

    def call_opening(self, name: str | None = None) -> str | None:
        return "[" if name is None else f"[{name}("

    def render_calls(self, calls: Sequence[ToolCall]) -> str:
        values = [(c.name, call_arguments(c)) for c in calls]
        if not all(isinstance(args, Mapping) for _, args in values):
            # Not expressible as keyword arguments: the tolerant parser reads this form too.
            items = [{"name": name, "arguments": args} for name, args in values]
            return json.dumps({"tool_calls": items}, ensure_ascii=False)
        return "[" + ", ".join(python_call(name, args) for name, args in values) + "]"

    def format_reminder(self, tools: Sequence[ToolSpec], options: PromptOptions) -> str:
        return f"To call functions, reply with only a Python list of calls: {_SHAPE}"


def python_call(name: str, arguments: Mapping[str, Any]) -> str:
    """``name(a=1, b="x")``; keys that are not identifiers go in a trailing ``**{...}``."""
    plain = []
    other: dict[str, Any] = {}
    for key, value in arguments.items():
        if _keyword_argument(key):
            plain.append(f"{key}={python_literal(value)}")
        else:
            other[key] = value
    if other:
        plain.append(f"**{python_literal(other)}")
    return f"{name}({', '.join(plain)})"


def _keyword_argument(key: str) -> bool:
    """Can ``key`` be written ``key=...``? Python NFKC-normalises identifiers (``ª`` → ``a``)."""
    return (
        key.isidentifier()
        and not keyword.iskeyword(key)
        and unicodedata.normalize("NFKC", key) == key
    )


def python_literal(value: Any) -> str:
    """A JSON value as a Python literal that ``ast`` reads back to the same value."""
    if value is True:
        return "True"
    if value is False:
        return "False"
    if value is None:
        return "None"
    if isinstance(value, Mapping):
        items = (
            f"{json.dumps(str(k), ensure_ascii=False)}: {python_literal(v)}"
            for k, v in value.items()
        )
        return "{" + ", ".join(items) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(python_literal(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def _signature(tool: ToolSpec) -> str:
    params = parameters_of(tool)
    args = [_argument(p) for p in params]
    doc = [tool.description.strip()] if tool.description.strip() else []
    documented = [p for p in params if p.description or _needs_schema(p)]
    if documented:
        if doc:
            doc.append("")
        doc.append("Args:")
        for p in documented:
            text = p.description
            if _needs_schema(p):
                text = f"{text} (JSON Schema: {schema_json(p.schema)})".strip()
            doc.append(f"    {p.name}: {text}")
    head = f"def {tool.name}({', '.join(args)}):"
    if not doc:
        return f"{head}\n    ..."
    body = "\n".join(f"    {line}" if line else "" for line in doc)
    return f'{head}\n    """{body.lstrip()}\n    """'


def _argument(param: Parameter) -> str:
    label = f"{param.name}: {type_label(param.schema, python=True)}"
    if param.required:
        return label
    default = param.schema.get("default")
    return f"{label} = {python_literal(default)}"


def _needs_schema(param: Parameter) -> bool:
    kind = param.schema.get("type")
    if kind == "object":
        return isinstance(param.schema.get("properties"), Mapping)
    if kind == "array":
        items = param.schema.get("items")
        return isinstance(items, Mapping) and items.get("type") == "object"
    return False
