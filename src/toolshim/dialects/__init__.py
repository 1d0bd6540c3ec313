"""Dialects: prompt formats for tool calling, and the registry that looks them up by name.

=========  =====================================================  ==========================
name       a call looks like                                      for
=========  =====================================================  ==========================
json       ``{"tool_calls": [{"name": …, "arguments": {…}}]}``    the default, any model
hermes     ``<tool_call>{"name": …, "arguments": {…}}</tool_call>``  Qwen, Hermes fine-tunes
pythonic   ``[get_weather(city="Paris"), get_time()]``            Llama 3.2, several calls
compact    ``{"tool":"get_weather","city":"Paris"}``              models under 1B
windlass   ``{"tool": …, "arguments": {…}}`` inside prose         seed 002's agents
=========  =====================================================  ==========================

Every dialect's parser reads every other dialect's shapes (see :mod:`.extract`).
"""

from __future__ import annotations

from toolshim.dialects.base import _PURE_RENDERERS, Dialect, PromptOptions, rendered_tools
from toolshim.dialects.calls import ParsedCall, ToolIndex
from toolshim.dialects.compact import CompactDialect
from toolshim.dialects.extract import MARKUPS, ParsedReply, ReplyParser, Segment, parse_reply
from toolshim.dialects.hermes import HermesDialect
from toolshim.dialects.json import JsonDialect
from toolshim.dialects.pythonic import PythonicDialect
from toolshim.dialects.windlass import WindlassDialect
from toolshim.errors import ConfigError

__all__ = [
    "MARKUPS",
    "CompactDialect",
    "Dialect",
    "HermesDialect",
    "JsonDialect",
    "ParsedCall",
    "ParsedReply",
    "PromptOptions",
    "PythonicDialect",
    "ReplyParser",
    "Segment",
    "ToolIndex",
    "WindlassDialect",
    "available_dialects",
    "get_dialect",
    "parse_reply",
    "register_dialect",
    "rendered_tools",
]

_BUILT_IN: tuple[type[Dialect], ...] = (
    JsonDialect,
    HermesDialect,
    PythonicDialect,
    CompactDialect,
    WindlassDialect,
)
_REGISTRY: dict[str, type[Dialect]] = {cls.name: cls for cls in _BUILT_IN}
_PURE_RENDERERS.update(_BUILT_IN)


def register_dialect(cls: type[Dialect]) -> type[Dialect]:
    """Make a dialect available by its ``name`` (usable as a class decorator)."""
    _REGISTRY[cls.name] = cls
    return cls


def available_dialects() -> list[str]:
    return sorted(_REGISTRY)


def get_dialect(name: str | Dialect) -> Dialect:
    """The dialect called ``name``; raises ConfigError listing the known ones otherwise."""
    if isinstance(name, Dialect):
        return name
    cls = _REGISTRY.get(name.strip().lower())
    if cls is None:
        raise ConfigError(
            f"unknown dialect {name!r}; available: {', '.join(available_dialects())}",
            param="dialect",
        )
    return cls()
