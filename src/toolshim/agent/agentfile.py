"""Declarative agents (seed 002's "cascade"): a TOML or JSON file of phases, checked before any run.

::

    name = "trip"                       # optional; also model, mode, dialect, max_turns defaults

    [[phases]]
    name = "research"
    instructions = "Find the weather in the city the user names."
    tools = ["weather_tools:get_weather", "weather_tools:convert"]
    mode = "force"                      # or seed 002's use_native_tools = false
    max_turns = 6

    [[phases]]
    name = "summarize"
    instructions = "Write one friendly sentence from these notes."

Every problem (unknown keys, wrong types, unknown modes or dialects, tools that cannot be
imported) is collected and raised as one :class:`ConfigError`, one line per problem naming
the file, the phase and the key, before any model is called. Tools are ``module:function``
import paths, resolved from the current directory and the file's own directory too.
"""

from __future__ import annotations

import difflib
import importlib
import json
import os
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolshim.agent.tools import Tool
from toolshim.dialects import available_dialects, get_dialect
from toolshim.errors import ConfigError
from toolshim.types import Mode

__all__ = ["AgentFile", "PhaseSpec", "load_agent_file", "parse_agent_spec"]

PHASE_KEYS = (
    "name",
    "instructions",
    "tools",
    "model",
    "mode",
    "use_native_tools",
    "dialect",
    "max_turns",
)
TOP_KEYS = ("phases", "name", "description", "model", "mode", "dialect", "max_turns")
_HINTS = {
    "tackle": "seed 002's 'tackle' is 'tools' here: a list of 'module:function' paths",
    "cascade_id": "use 'name'",
    "system": "use 'instructions'",
    "prompt": "use 'instructions'",
}


@dataclass(frozen=True, slots=True)
class PhaseSpec:
    """One phase: instructions, tools and how to run them."""

    name: str
    instructions: str = ""
    tools: tuple[Tool, ...] = ()
    tool_paths: tuple[str, ...] = ()
    model: str | None = None
    mode: Mode | None = None
    dialect: str | None = None
    max_turns: int | None = None


@dataclass(frozen=True, slots=True)
class AgentFile:
    """A checked agent file: its phases, in order."""

    source: str
    phases: tuple[PhaseSpec, ...]
    name: str | None = None
    description: str | None = None


def load_agent_file(path: str | os.PathLike[str]) -> AgentFile:
    """Read and check an agent file (``.toml`` or ``.json``); raises ConfigError listing every problem."""
    file = Path(path)
    source = str(path)
    if not file.is_file():
        raise ConfigError(f"{source}: no such agent file")
    suffix = file.suffix.lower()
    text = file.read_text(encoding="utf-8")
    data: Any
    if suffix == ".toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{source}: not valid TOML: {exc}") from exc
    elif suffix == ".json":
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ConfigError(f"{source}: not valid JSON: {exc}") from exc
    else:
        raise ConfigError(f"{source}: an agent file must end in .toml or .json")
    return parse_agent_spec(data, source=source, base_dir=file.resolve().parent)


def parse_agent_spec(
    data: Any, *, source: str = "<agent>", base_dir: str | os.PathLike[str] | None = None
) -> AgentFile:
    """Check an agent spec already read into Python data (see the module docstring)."""
    problems: list[str] = []
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: the top level must be a table/object with 'phases'")
    _unknown_keys(data, TOP_KEYS, source, problems)
    top = _Reader(data, source, problems)
    top_name = top.text("name")
    description = top.text("description")
    defaults = PhaseSpec(
        name="",
        model=top.text("model"),
        mode=top.mode("mode"),
        dialect=top.dialect("dialect"),
        max_turns=top.count("max_turns"),
    )
    phases_data = data.get("phases")
    if not isinstance(phases_data, list) or not phases_data:
        problems.append(
            f"{source}: 'phases' must be a non-empty list of tables ([[phases]] in TOML), "
            f"not {_kind(phases_data)}"
        )
        phases_data = []
    phases: list[PhaseSpec] = []
    seen: set[str] = set()
    _importable_from(Path.cwd(), Path(base_dir) if base_dir else None)
    for number, entry in enumerate(phases_data, start=1):
        where = f"{source}: phase {number}"
        if not isinstance(entry, Mapping):
            problems.append(f"{where}: must be a table/object, not {_kind(entry)}")
            continue
        if isinstance(entry.get("name"), str) and entry["name"].strip():
            where = f"{where} ({entry['name']!r})"
        phase = _phase(entry, number, where, defaults, problems)
        if phase.name in seen:
            problems.append(f"{where}: another phase is already named {phase.name!r}")
        seen.add(phase.name)
        phases.append(phase)
    if problems:
        raise ConfigError("\n".join(problems))
    return AgentFile(source, tuple(phases), top_name, description)


def _phase(
    entry: Mapping[str, Any], number: int, where: str, defaults: PhaseSpec, problems: list[str]
) -> PhaseSpec:
    _unknown_keys(entry, PHASE_KEYS, where, problems)
    read = _Reader(entry, where, problems)
    name = read.text("name") or f"phase{number}"
    instructions = read.text("instructions") or ""
    mode = read.mode("mode")
    native = read.flag("use_native_tools")
    if native is not None:
        implied = Mode.OFF if native else Mode.FORCE
        if mode is not None and mode is not implied:
            problems.append(
                f"{where}: 'use_native_tools = {str(native).lower()}' means mode "
                f"{implied.value!r}, but 'mode' is {mode.value!r}; keep one of them"
            )
        mode = implied
    paths = read.text_list("tools")
    tools = tuple(t for t in (_import_tool(p, where, problems) for p in paths) if t is not None)
    names = [t.name for t in tools]
    for dup in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"{where}: two tools are named {dup!r}")
    return PhaseSpec(
        name=name,
        instructions=instructions,
        tools=tools,
        tool_paths=tuple(paths),
        model=read.text("model") or defaults.model,
        mode=mode or defaults.mode,
        dialect=read.dialect("dialect") or defaults.dialect,
        max_turns=read.count("max_turns") or defaults.max_turns,
    )


class _Reader:
    """Typed reads of one table's keys; each wrong value becomes one problem line."""

    def __init__(self, data: Mapping[str, Any], where: str, problems: list[str]) -> None:
        self.data = data
        self.where = where
        self.problems = problems

    def _bad(self, key: str, expected: str) -> None:
        value = self.data[key]
        self.problems.append(
            f"{self.where}: key {key!r} must be {expected}, not {value!r} ({_kind(value)})"
        )

    def text(self, key: str) -> str | None:
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            self._bad(key, "a string")
            return None
        return value

    def flag(self, key: str) -> bool | None:
        value = self.data.get(key)
        if value is None or isinstance(value, bool):
            return value
        self._bad(key, "true or false")
        return None

    def count(self, key: str) -> int | None:
        value = self.data.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            self._bad(key, "an integer of at least 1")
            return None
        return value

    def mode(self, key: str) -> Mode | None:
        value = self.text(key)
        if value is None:
            return None
        try:
            return Mode(value.strip().lower())
        except ValueError:
            self._bad(key, "one of " + ", ".join(repr(m.value) for m in Mode))
            return None

    def dialect(self, key: str) -> str | None:
        value = self.text(key)
        if value is None:
            return None
        try:
            return get_dialect(value).name
        except ConfigError:
            self._bad(key, "one of " + ", ".join(repr(d) for d in available_dialects()))
            return None

    def text_list(self, key: str) -> list[str]:
        value = self.data.get(key)
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self._bad(key, "a list of 'module:function' strings")
            return []
        return list(value)


def _unknown_keys(
    data: Mapping[str, Any], allowed: tuple[str, ...], where: str, problems: list[str]
) -> None:
    for key in data:
        if key in allowed:
            continue
        hint = _HINTS.get(str(key))
        if hint is None:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f"did you mean {close[0]!r}?" if close else None
        problems.append(
            f"{where}: unknown key {key!r}"
            + (f" ({hint})" if hint else "")
            + f"; allowed: {', '.join(allowed)}"
        )


def _import_tool(path: str, where: str, problems: list[str]) -> Tool | None:
    module_name, colon, attribute = path.partition(":")
    if not colon or not module_name.strip() or not attribute.strip():
        problems.append(
            f"{where}: tool {path!r} must be an import path 'module:function' "
            "(e.g. 'my_tools:get_weather')"
        )
        return None
    try:
        target: Any = importlib.import_module(module_name.strip())
    except ImportError as exc:
        problems.append(
            f"{where}: tool {path!r}: cannot import module {module_name!r} ({exc}); it is "
            "looked up on sys.path, the current directory and the agent file's directory"
        )
        return None
    except Exception as exc:  # the module itself failed while importing: report, do not crash
        problems.append(
            f"{where}: tool {path!r}: importing {module_name!r} raised {type(exc).__name__}: {exc}"
        )
        return None
    module = target
    for part in attribute.strip().split("."):
        if not hasattr(target, part):
            available = sorted(
                n for n, v in vars(module).items() if callable(v) and not n.startswith("_")
            )
            problems.append(
                f"{where}: tool {path!r}: module {module_name!r} has no {attribute!r}; its "
                f"functions are: {', '.join(available) or '(none)'}"
            )
            return None
        target = getattr(target, part)
    if not callable(target):
        problems.append(f"{where}: tool {path!r} is {_kind(target)}, not a function")
        return None
    try:
        return Tool.from_function(target)
    except ConfigError as exc:
        problems.append(f"{where}: tool {path!r}: {exc.message}")
        return None


def _importable_from(*directories: Path | None) -> None:
    """Put ``directories`` on ``sys.path`` (kept: tools may import their siblings when called)."""
    for directory in directories:
        if directory is not None and str(directory) not in sys.path:
            sys.path.insert(0, str(directory))


def _kind(value: Any) -> str:
    names = {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a table",
    }
    if value is None:
        return "missing"
    return names.get(type(value), f"a {type(value).__name__}")
