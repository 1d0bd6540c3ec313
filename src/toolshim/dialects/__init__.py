"""Dialects: prompt formats for tool calling, and the registry that looks them up by name."""

from __future__ import annotations

from toolshim.dialects.base import Dialect, PromptOptions
from toolshim.dialects.extract import ParsedReply, ReplyParser, Segment, parse_reply
from toolshim.dialects.interpret import ParsedCall
from toolshim.dialects.json import JsonDialect
from toolshim.errors import ConfigError

__all__ = [
    "Dialect",
    "JsonDialect",
    "ParsedCall",
    "ParsedReply",
    "PromptOptions",
    "ReplyParser",
    "Segment",
    "available_dialects",
    "get_dialect",
    "parse_reply",
    "register_dialect",
]

_REGISTRY: dict[str, type[Dialect]] = {"json": JsonDialect}


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
