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

    [[mcp]]                             # MCP servers whose tools every phase may call
    command = "npx -y @modelcontextprotocol/server-filesystem ."
    # or: url = "https://example.com/mcp" with headers = { Authorization = "Bearer ..." }

A phase may list its own servers too (``[[phases.mcp]]``, after the phase's table), beside the
top-level ones; the keys are those of :func:`toolshim.mcp.servers.server_from_table`
(``name``, ``command`` and ``args``, ``env``, ``cwd``, or ``url`` and ``headers``,
``timeout``). A phase's servers start when the phase starts and stop when it ends.

Seed 002's cascade files load as they are: its key names are accepted as aliases
(``cascade_id`` for the top-level ``name``, ``tackle`` for a phase's ``tools``; a key given
both ways is an error), and ``use_native_tools`` is a phase's ``mode`` (``false``: force,
``true``: off).

A tool is a ``module:function`` import path, resolved from the current directory and the
file's own directory too, or the bare name of one of toolshim's built-in demo tools
(``calculate``, ``convert_units``, ``current_time``).

Every problem (unknown keys, wrong types, unknown modes or dialects, tools that cannot be
imported) is collected and raised as one :class:`ConfigError`, one line per problem naming
the file, the phase and the key, before any model is called.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import sys
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from toolshim.agent.tools import Tool
from toolshim.builtins import BUILTIN_FUNCTIONS
from toolshim.dialects import available_dialects, get_dialect
from toolshim.errors import ConfigError
from toolshim.import_path import import_attribute, split_import_path
from toolshim.mcp.servers import MCPServerSpec, servers_from_tables
from toolshim.types import Mode

__all__ = ["AgentFile", "PhaseSpec", "load_agent_file", "parse_agent_spec"]

T = TypeVar("T")

PHASE_KEYS = (
    "name",
    "instructions",
    "tools",
    "model",
    "mode",
    "use_native_tools",
    "dialect",
    "max_turns",
    "mcp",
)
TOP_KEYS = ("phases", "name", "description", "model", "mode", "dialect", "max_turns", "mcp")
TOP_ALIASES = {"cascade_id": "name"}
"""Seed 002's key names at the top level, and the key each one means here."""
PHASE_ALIASES = {"tackle": "tools"}
"""Seed 002's key names in a phase, and the key each one means here."""
_HINTS = {
    "system": "use 'instructions'",
    "prompt": "use 'instructions'",
}
_TOP_HINTS = {
    **_HINTS,
    "tools": "tools belong to a phase: put them in its 'tools'",
    "tackle": "seed 002's 'tackle' (tools) belongs to a phase: put it in its 'tools'",
    "instructions": "instructions belong to a phase",
}
_PHASE_HINTS = {
    **_HINTS,
    "cascade_id": "'cascade_id' names the whole file: put it at the top level",
    "phases": "phases cannot be nested",
}
_SOURCE_SCAN_LIMIT = 200
"""At most this many ``.py`` files per directory are read for the hint on a bare tool name."""
_SOURCE_SIZE_LIMIT = 512 * 1024


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
    mcp: tuple[MCPServerSpec, ...] = ()
    """MCP servers whose tools the phase may call: the file's, then the phase's own."""


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
    _check_keys(data, TOP_KEYS, TOP_ALIASES, _TOP_HINTS, source, problems)
    top = _Reader(data, source, problems, TOP_ALIASES)
    top_name = top.text("name")
    description = top.text("description")
    defaults = PhaseSpec(
        name="",
        model=top.text("model"),
        mode=top.mode("mode"),
        dialect=top.dialect("dialect"),
        max_turns=top.count("max_turns"),
        mcp=servers_from_tables(data.get("mcp"), f"{source}: mcp", problems),
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
    directory = Path(base_dir) if base_dir else None
    _importable_from(Path.cwd(), directory)
    for number, entry in enumerate(phases_data, start=1):
        where = f"{source}: phase {number}"
        if not isinstance(entry, Mapping):
            problems.append(f"{where}: must be a table/object, not {_kind(entry)}")
            continue
        if isinstance(entry.get("name"), str) and entry["name"].strip():
            where = f"{where} ({entry['name']!r})"
        phase = _phase(entry, number, where, defaults, problems, directory)
        if phase.name in seen:
            problems.append(f"{where}: another phase is already named {phase.name!r}")
        seen.add(phase.name)
        phases.append(phase)
    if problems:
        raise ConfigError("\n".join(problems))
    return AgentFile(source, tuple(phases), top_name, description)


def _phase(
    entry: Mapping[str, Any],
    number: int,
    where: str,
    defaults: PhaseSpec,
    problems: list[str],
    base_dir: Path | None,
) -> PhaseSpec:
    _check_keys(entry, PHASE_KEYS, PHASE_ALIASES, _PHASE_HINTS, where, problems)
    read = _Reader(entry, where, problems, PHASE_ALIASES)
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
    resolved = (_resolve_tool(p, where, problems, base_dir) for p in paths)
    tools = tuple(t for t in resolved if t is not None)
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
        mcp=(*defaults.mcp, *servers_from_tables(entry.get("mcp"), f"{where}: mcp", problems)),
    )


class _Reader:
    """Typed reads of one table's keys; each wrong value becomes one problem line.

    A key is read under its alias (seed 002's name) when only the alias is given, and wrong
    values are reported under the name the file used.
    """

    def __init__(
        self,
        data: Mapping[str, Any],
        where: str,
        problems: list[str],
        aliases: Mapping[str, str] | None = None,
    ) -> None:
        self.data = data
        self.where = where
        self.problems = problems
        self.alias_of = {key: alias for alias, key in (aliases or {}).items()}

    def _key(self, key: str) -> str:
        alias = self.alias_of.get(key)
        if alias is not None and key not in self.data and alias in self.data:
            return alias
        return key

    def _bad(self, key: str, expected: str) -> None:
        value = self.data[key]
        self.problems.append(
            f"{self.where}: key {key!r} must be {expected}, not {value!r} ({_kind(value)})"
        )

    def text(self, key: str) -> str | None:
        key = self._key(key)
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            self._bad(key, "a string")
            return None
        return value

    def flag(self, key: str) -> bool | None:
        key = self._key(key)
        value = self.data.get(key)
        if value is None or isinstance(value, bool):
            return value
        self._bad(key, "true or false")
        return None

    def count(self, key: str) -> int | None:
        key = self._key(key)
        value = self.data.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            self._bad(key, "an integer of at least 1")
            return None
        return value

    def mode(self, key: str) -> Mode | None:
        return self._one_of(
            key, lambda v: Mode(v.strip().lower()), [m.value for m in Mode], ValueError
        )

    def dialect(self, key: str) -> str | None:
        return self._one_of(key, lambda v: get_dialect(v).name, available_dialects(), ConfigError)

    def _one_of(
        self,
        key: str,
        read: Callable[[str], T],
        names: Iterable[str],
        refused: type[Exception],
    ) -> T | None:
        """The text at ``key`` read by ``read``; where ``read`` raises ``refused``, a problem
        that lists the ``names`` it takes."""
        value = self.text(key)
        if value is None:
            return None
        try:
            return read(value)
        except refused:
            self._bad(key, "one of " + ", ".join(repr(n) for n in names))
            return None

    def text_list(self, key: str) -> list[str]:
        key = self._key(key)
        value = self.data.get(key)
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self._bad(key, "a list of tool names (built-in names or 'module:function' paths)")
            return []
        return list(value)


def _check_keys(
    data: Mapping[str, Any],
    allowed: tuple[str, ...],
    aliases: Mapping[str, str],
    hints: Mapping[str, str],
    where: str,
    problems: list[str],
) -> None:
    """One problem per unknown key, and per key given both under its name and its alias."""
    also = "".join(f" (and seed 002's {a!r} for {k!r})" for a, k in aliases.items())
    for key in data:
        if key in allowed:
            continue
        if key in aliases:
            if aliases[key] in data:
                problems.append(
                    f"{where}: {key!r} is seed 002's name for {aliases[key]!r}, and both are "
                    "given; keep one of them"
                )
            continue
        hint = hints.get(str(key))
        if hint is None:
            close = difflib.get_close_matches(str(key), [*allowed, *aliases], n=1)
            hint = f"did you mean {close[0]!r}?" if close else None
        problems.append(
            f"{where}: unknown key {key!r}"
            + (f" ({hint})" if hint else "")
            + f"; allowed: {', '.join(allowed)}{also}"
        )


def _resolve_tool(path: str, where: str, problems: list[str], base_dir: Path | None) -> Tool | None:
    """A ``module:function`` path, or the bare name of a built-in demo tool."""
    name = path.strip()
    if ":" in path or not name.isidentifier():
        return _import_tool(path, where, problems)
    builtins = _builtin_tools()
    if name in builtins:
        return builtins[name]
    found = _modules_defining(name, Path.cwd(), base_dir)
    if found:
        example = " or ".join(repr(f"{module}:{name}") for module, _ in found)
        example += f" ({', '.join(file for _, file in found)} defines it)"
    else:
        example = repr(f"my_tools:{name}")
    close = difflib.get_close_matches(name, builtins, n=1)
    problems.append(
        f"{where}: tool {path!r} is not a built-in tool (the built-ins are "
        f"{', '.join(repr(b) for b in builtins)}); give a function of your own as an import "
        f"path 'module:function', e.g. {example}"
        + (f"; did you mean the built-in {close[0]!r}?" if close else "")
    )
    return None


def _builtin_tools() -> dict[str, Tool]:
    """The built-in demo tools by name."""
    tools = [Tool(function) for function in BUILTIN_FUNCTIONS]
    return {tool.name: tool for tool in tools}


def _modules_defining(name: str, *directories: Path | None) -> list[tuple[str, str]]:
    """``(module, file)`` for the ``.py`` files in ``directories`` that define ``name`` at their
    top level: read as text, never imported (importing runs the file)."""
    pattern = re.compile(rf"^(?:async\s+)?def\s+{re.escape(name)}\s*\(", re.MULTILINE)
    found: list[tuple[str, str]] = []
    seen: set[Path] = set()
    for directory in directories:
        if directory is None:
            continue
        try:
            files = sorted(directory.glob("*.py"))[:_SOURCE_SCAN_LIMIT]
        except OSError:
            continue
        for file in files:
            try:
                real = file.resolve()
                if real in seen or not file.stem.isidentifier():
                    continue
                seen.add(real)
                if file.stat().st_size > _SOURCE_SIZE_LIMIT:
                    continue
                text = file.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if pattern.search(text):
                found.append((file.stem, file.name))
    return found


def _import_tool(path: str, where: str, problems: list[str]) -> Tool | None:
    parts = split_import_path(path)
    if parts is None:
        dotted = path.strip().rpartition(".")
        hint = (
            f"; did you mean {f'{dotted[0]}:{dotted[2]}'!r}?"
            if ":" not in path and dotted[0] and dotted[2]
            else ""
        )
        problems.append(
            f"{where}: tool {path!r} must be an import path 'module:function' "
            "(e.g. 'my_tools:get_weather') or the name of a built-in tool "
            f"({', '.join(repr(b) for b in _builtin_tools())}){hint}"
        )
        return None
    try:
        target = import_attribute(
            *parts, looked_up="sys.path, the current directory and the agent file's directory"
        )
    except ConfigError as exc:
        problems.append(f"{where}: tool {path!r}: {exc.message}")
        return None
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
