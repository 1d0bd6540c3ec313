"""What a parse yields: ParsedCall, Interpretation, and ToolIndex (tolerant lookup of offered tools)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolshim.types import ToolSpec

__all__ = [
    "NAME_PREFIXES",
    "NOT_A_CALL",
    "Interpretation",
    "ParsedCall",
    "ToolIndex",
    "fold_name",
    "strip_prefix",
]

NAME_PREFIXES = ("functions.", "function.", "tools.", "tool.", "default_api.", "api.")
"""Namespaces models put in front of a tool name (OpenAI's ``functions.`` above all)."""


@dataclass(frozen=True, slots=True)
class ParsedCall:
    """A call found in a reply. ``problem`` says what is wrong with it, for the re-ask."""

    name: str
    arguments: Any
    raw: str = ""
    problem: str | None = None
    repaired: bool = False

    @property
    def arguments_json(self) -> str:
        return json.dumps(self.arguments if self.arguments is not None else {}, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class Interpretation:
    """What a value means: calls (possibly none) and whether the model explicitly declined."""

    calls: tuple[ParsedCall, ...] = ()
    declined: bool = False

    @property
    def is_call(self) -> bool:
        return bool(self.calls) or self.declined


NOT_A_CALL = Interpretation()


class ToolIndex:
    """The offered tools, with tolerant name lookup (prefixes, case and ``-``/``_`` drift)."""

    def __init__(self, tools: Sequence[ToolSpec]) -> None:
        self.tools = {t.name: t for t in tools if t.is_function}
        self._folded: dict[str, str] = {}
        for name in self.tools:
            self._folded.setdefault(fold_name(name), name)

    @property
    def names(self) -> list[str]:
        return list(self.tools)

    def resolve(self, name: str) -> str | None:
        """The offered tool ``name`` refers to, or None."""
        name = name.strip().strip("`'\"")
        if name in self.tools:
            return name
        bare = strip_prefix(name)
        if bare in self.tools:
            return bare
        return self._folded.get(fold_name(name)) or self._folded.get(fold_name(bare))

    def canonical(self, name: str) -> str:
        """The offered tool's name if ``name`` refers to one, else ``name`` without prefixes."""
        resolved = self.resolve(name)
        if resolved is not None:
            return resolved
        return strip_prefix(name.strip().strip("`'\""))

    def parameters(self, name: str) -> Mapping[str, Any]:
        """The ``properties`` of a tool's parameter schema (empty when unknown)."""
        tool = self.tools.get(name)
        props = tool.parameters.get("properties") if tool else None
        return props if isinstance(props, Mapping) else {}

    def parameter_order(self, name: str) -> list[str]:
        return list(self.parameters(name))

    def parameter_type(self, name: str, parameter: str) -> str | None:
        """The JSON-Schema type of one parameter (the first non-null one of a union), if known."""
        spec = self.parameters(name).get(parameter)
        if not isinstance(spec, Mapping):
            return None
        kind = spec.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), None)
        if kind is None and isinstance(spec.get("enum"), list) and spec["enum"]:
            return "string" if all(isinstance(v, str) for v in spec["enum"]) else None
        return kind if isinstance(kind, str) else None


def strip_prefix(name: str) -> str:
    low = name.lower()
    for prefix in NAME_PREFIXES:
        if low.startswith(prefix) and len(name) > len(prefix):
            return name[len(prefix) :]
    return name


def fold_name(name: str) -> str:
    return name.lower().replace("-", "_").replace(" ", "_")
