"""The chat's tools: the built-in demo tools and the user's ``module:function`` ones."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable

from toolshim.agent.tools import Tool
from toolshim.builtins import BUILTIN_FUNCTIONS
from toolshim.errors import ConfigError
from toolshim.import_path import import_attribute, split_import_path

__all__ = ["builtin_tools", "load_tool", "load_tools"]


def builtin_tools() -> list[Tool]:
    """The demo tools, as agent tools."""
    return [Tool(function) for function in BUILTIN_FUNCTIONS]


def load_tool(path: str) -> Tool:
    """The function at ``module:function`` (looked up on sys.path and the current directory)."""
    parts = split_import_path(path.strip())
    if parts is None:
        raise ConfigError(
            f"--tools {path!r} must be an import path 'module:function' (e.g. 'my_tools:get_weather')",
            param="tools",
        )
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        target = import_attribute(*parts, looked_up="sys.path and in the current directory")
    except ConfigError as exc:
        raise ConfigError(f"--tools {path!r}: {exc.message}", param="tools") from exc
    if not callable(target):
        raise ConfigError(f"--tools {path!r} is not a function", param="tools")
    try:
        return Tool.from_function(target)
    except ConfigError as exc:
        raise ConfigError(f"--tools {path!r}: {exc.message}", param="tools") from exc


def load_tools(paths: Iterable[str], *, builtin: bool = True) -> list[Tool]:
    """The builtin tools (unless ``builtin`` is False) and the user's ``module:function`` tools.

    Several paths may share one option, separated by commas. A user tool with a builtin's name
    replaces the builtin.
    """
    chosen: dict[str, Tool] = {t.name: t for t in builtin_tools()} if builtin else {}
    for item in paths:
        for path in item.split(","):
            if path.strip():
                loaded = load_tool(path)
                chosen[loaded.name] = loaded
    return list(chosen.values())
