"""What a small model is shown of a long tool list: only the tools an operator lists, and
schemas condensed for the prompt.

Coding agents send many tools with long descriptions: Claude Code 2.1 sends 14 (33,000
characters of schema: ``Agent``, ``Workflow``, ``ScheduleWakeup`` … beside ``Bash``, ``Read``,
``Write`` and ``Edit``), Codex 0.171 eight. Rendered into an emulated prompt that is 12,000
tokens a small model reads on every turn (minutes on a CPU) and most of it is about tools it
cannot use well; the 0.5B then called a tool named ``Greeting``.

* :func:`focus_tools` keeps the tools ``offer_tools`` names (names or shell patterns; the word
  ``coding`` stands for :data:`CODING_TOOLS`, the tools that read, write, edit and run) when
  the request has at least one of them, in the list's order, and says which it left out. A
  request with none of them keeps all its tools: an application's own tools are never dropped
  for a list written for coding agents.
* :func:`brief_system` replaces a coding agent's own instructions (Claude Code's are 16,000
  characters: sub-agents, skills, git etiquette, its deferred tools) with a short brief for a
  small model, keeping the lines that say where it works (working directory, platform, shell,
  date). Used where tools were left out for a small model, and said in the warnings.
* :func:`condense_tools` shortens what the prompt says of each tool: a description's first
  sentences, a parameter's first sentence, no examples. Names, types, enums, required
  parameters and nested structure stay whole. Calls are still checked against the caller's
  full schemas.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from toolshim.dialects.calls import ParsedCall
from toolshim.types import ChatRequest, Message, ToolSpec

__all__ = [
    "BRIEF",
    "CODING_TOOLS",
    "COMPACT_OVER",
    "brief_system",
    "brief_warning",
    "condense_tools",
    "focus_tools",
    "left_out_warning",
    "parse_offer_tools",
    "repair_paths",
    "schema_size",
    "working_directory",
]

CODING_TOOLS = (
    # Claude Code
    "Bash",
    "Read",
    "Write",
    "Edit",
    "MultiEdit",
    "Glob",
    "Grep",
    "LS",
    # Codex CLI
    "exec_command",
    "shell",
    "apply_patch",
    # OpenCode, Aider-style and other agents
    "bash",
    "read",
    "write",
    "edit",
    "glob",
    "grep",
    "list",
    "read_file",
    "write_file",
    "edit_file",
    "list_files",
    "run_command",
    "run_shell_command",
)
"""What ``--offer-tools coding`` keeps: the tools of coding agents that read, write, edit and
run, by the names the common agents give them."""

COMPACT_OVER = 8000
"""Tool schemas longer than this (characters of JSON, all tools together) are condensed for the
prompt unless told otherwise: Claude Code's are 33,000; one weather tool is 300."""

_DESCRIPTION_LIMIT = 320
_PARAMETER_LIMIT = 140
_DROPPED_KEYS = frozenset({"examples", "example", "$comment", "$schema", "title"})
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"'(\[])|\n\s*\n")


BRIEF = (
    "You are a coding agent working on the user's files. Do what the user asks with the "
    "tools: read a file before you change it, run commands to compute or check things, and "
    "write or edit files to make changes. When a step needs the result of an earlier one (a "
    "value read from a file, a command's output), make that call first, then use its result "
    "in the next call. Name files by their path relative to the working directory, as the "
    "user does. To fix code, read the file that has the bug, not its "
    "test, then edit it; leave the tests as they are. After results: if a step the request "
    "asks for is still not done (a file to write or change, a command to run, information the "
    "results do not give), make that call now with the values the results hold; never repeat "
    "a call whose result you already have. When everything asked is done, say so in one short "
    "sentence, without a tool call."
)
"""What a small model is told in place of a coding agent's own instructions."""

_ENVIRONMENT = re.compile(
    r"(?im)^[ \t-]*(?:primary working directory|working directory|cwd|platform|shell|"
    r"os version|is a git repository|today'?s date|current date)\b[^\n]{0,200}$"
    r"|<(cwd|shell|current_date|timezone)>[^<\n]{0,300}</\1>"
)


def without_environment(text: str) -> str:
    """``text`` without the environment lines :func:`brief_system` moves into the first user
    message (and their ``Environment:`` heading): the user's own words."""
    kept = _ENVIRONMENT.sub("", text)
    return re.sub(r"(?m)^Environment:[ \t]*$", "", kept)


def brief_system(request: ChatRequest) -> tuple[ChatRequest, int]:
    """The request with its system and developer messages replaced by :data:`BRIEF`, the
    environment lines they held moved to the start of the first user message, and how many
    characters of instructions were left out (0 when there were none: the brief is then
    added).

    The system message is then the same for every session (the brief, then the tools), so the
    upstream's cache serves it to the next task too; what differs per session (the working
    directory) comes after it, as Codex itself sends its environment."""
    system = [m for m in request.messages if m.role in ("system", "developer")]
    if not system:  # the brief all the same: it says what to do after results
        return replace(request, messages=(Message("system", BRIEF), *request.messages)), 0
    text = "\n\n".join(m.text for m in system)
    facts = list(dict.fromkeys(" ".join(m.group(0).split()) for m in _ENVIRONMENT.finditer(text)))
    kept = [m for m in request.messages if m.role not in ("system", "developer")]
    if facts:
        environment = "Environment:\n" + "\n".join(f"- {f.lstrip('- ')}" for f in facts)
        first = next((i for i, m in enumerate(kept) if m.role == "user"), None)
        if first is None:
            kept.insert(0, Message("user", environment))
        else:
            kept[first] = kept[first].with_text(f"{environment}\n\n{kept[first].text}")
    messages = (Message("system", BRIEF), *kept)
    return replace(request, messages=messages), max(0, len(text) - len(BRIEF))


def parse_offer_tools(value: str | Sequence[str] | None) -> tuple[str, ...] | None:
    """``--offer-tools`` as a tuple of names and patterns (``coding`` expanded); None or
    ``all`` (or an empty value) mean every tool."""
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else [p for v in value for p in v.split(",")]
    names: list[str] = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        if item.lower() == "all":
            return None
        names.extend(CODING_TOOLS if item.lower() == "coding" else [item])
    return tuple(dict.fromkeys(names)) or None


def _offered(name: str, patterns: Sequence[str]) -> bool:
    return any(name == p or fnmatch.fnmatchcase(name, p) for p in patterns)


def focus_tools(
    request: ChatRequest, offer: Sequence[str] | None
) -> tuple[ChatRequest, tuple[str, ...]]:
    """The request with only the offered tools, and the names of those left out (see the
    module docstring). A tool that ``tool_choice`` names is always kept."""
    if not offer or not request.tools:
        return request, ()
    forced = request.choice.name if request.choice.kind == "function" else None
    kept = [t for t in request.tools if _offered(t.name, offer) or t.name == forced]
    if not kept or len(kept) == len(request.tools):
        return request, ()
    left = tuple(t.name for t in request.tools if t not in kept)
    kept.sort(key=lambda t: _rank(t.name, offer))
    return replace(request, tools=tuple(kept)), left


def _rank(name: str, offer: Sequence[str]) -> int:
    """Where ``name`` stands in the offer list: a small model leans to the tools it reads
    first (the 0.5B took ``Edit``, listed before ``Write``, to create a file)."""
    return next((i for i, p in enumerate(offer) if name == p or fnmatch.fnmatchcase(name, p)), 0)


def brief_warning(characters: int) -> str:
    """The warning that says the caller's instructions were replaced by the brief."""
    return (
        f"system prompt condensed for a small model: {characters} characters of the client's "
        "instructions left out, its environment lines kept (--full-system keeps them all)"
    )


def left_out_warning(names: Sequence[str]) -> str:
    """The warning that says which tools the model was not offered."""
    shown = ", ".join(names[:20]) + (f" and {len(names) - 20} more" if len(names) > 20 else "")
    return f"tools left out (not offered to the model, --offer-tools): {shown}"


def schema_size(tools: Sequence[ToolSpec]) -> int:
    """Characters of the tools' descriptions and parameter schemas, as JSON."""
    total = 0
    for tool in tools:
        try:
            total += len(tool.description) + len(json.dumps(tool.parameters, ensure_ascii=False))
        except (TypeError, ValueError):
            total += len(tool.description) + len(str(tool.parameters))
    return total


def condense_tools(
    tools: Sequence[ToolSpec], *, required_only: bool = False
) -> tuple[ToolSpec, ...]:
    """The tools as the prompt shows them when condensed (see the module docstring);
    ``required_only`` shows only the parameters a call must give (a coding agent's turn on a
    small model: the 1.5B read one line of config.ini with ``Read``'s optional ``limit=1``, and
    wrote a made-up port). A call may still give the others: it is checked against the full
    schema."""
    return tuple(
        replace(
            tool,
            description=first_sentences(tool.description, _DESCRIPTION_LIMIT),
            parameters=_condensed_schema(
                _required_only(tool.parameters) if required_only else tool.parameters
            ),
        )
        for tool in tools
    )


def _required_only(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    properties = schema.get("properties")
    required = schema.get("required")
    if not isinstance(properties, Mapping) or not isinstance(required, list) or not required:
        return schema
    kept = {k: v for k, v in properties.items() if k in required}
    return {**schema, "properties": kept} if kept else schema


def first_sentences(text: str, limit: int) -> str:
    """As many whole sentences of ``text`` as fit in ``limit`` characters (at least the first,
    cut at a word if it alone is longer), white space collapsed."""
    text = text.strip()
    if len(text) <= limit:
        return " ".join(text.split())
    out = ""
    for sentence in _SENTENCE_END.split(text):
        sentence = " ".join(sentence.split())
        if not sentence:
            continue
        joined = f"{out} {sentence}".strip()
        if len(joined) > limit:
            break
        out = joined
    if not out:
        words = " ".join(text.split())[: limit - 1].rsplit(" ", 1)[0]
        out = f"{words}…"
    return out


def _condensed_schema(schema: Mapping[str, Any], depth: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _DROPPED_KEYS:
            continue
        if key == "description" and isinstance(value, str):
            out[key] = first_sentences(value, _PARAMETER_LIMIT)
        elif key in ("properties", "$defs", "definitions") and isinstance(value, Mapping):
            out[key] = {
                name: _condensed_schema(sub, depth + 1) if isinstance(sub, Mapping) else sub
                for name, sub in value.items()
            }
        elif key in ("items", "additionalProperties") and isinstance(value, Mapping):
            out[key] = _condensed_schema(value, depth + 1)
        elif key in ("anyOf", "oneOf", "allOf") and isinstance(value, list):
            out[key] = [
                _condensed_schema(v, depth + 1) if isinstance(v, Mapping) else v for v in value
            ]
        else:
            out[key] = value
    return out


_WORKDIR = re.compile(
    r"(?:primary )?working directory:\s*(/[^\s<]+)|<cwd>\s*(/[^<\s]+)\s*</cwd>", re.IGNORECASE
)
_PATH_KEYS = frozenset({"file_path", "path", "notebook_path", "filepath", "filename", "file"})


def working_directory(request: ChatRequest) -> str | None:
    """The working directory a coding agent's messages name (Claude Code's "Primary working
    directory: …", Codex's ``<cwd>…</cwd>``), if any."""
    for message in request.messages:
        found = _WORKDIR.search(message.text)
        if found:
            return (found.group(1) or found.group(2)).rstrip("/")
    return None


def repair_paths(
    request: ChatRequest, calls: Sequence[ParsedCall]
) -> tuple[list[ParsedCall], list[str]]:
    """Calls whose file path names a file in a folder *above* the working directory, a path
    nobody wrote, pointed at that file's place in the working directory, and what was changed.

    The 1.5B writes absolute paths that drop the working directory's last folder
    (``/tmp/task/greeting.txt`` for ``/tmp/task/work``): the file is then written where no one
    looks, or "does not exist". A path the conversation holds is left as it is."""
    cwd = working_directory(request)
    if cwd is None:
        return list(calls), []
    said = "\n".join(m.text for m in request.messages)
    out: list[ParsedCall] = []
    notes: list[str] = []
    for call in calls:
        arguments = call.arguments
        if call.problem or not isinstance(arguments, Mapping):
            out.append(call)
            continue
        changed = dict(arguments)
        for key, value in arguments.items():
            if not isinstance(value, str):
                continue
            if key.lower() in _COMMAND_KEYS:
                command, moved = _command_under(cwd, value, said)
                if moved:
                    changed[key] = command
                    notes.append(
                        f"{call.name}'s {key} names {', '.join(map(repr, moved))}, above the "
                        "working directory; sent with the working directory's own"
                    )
                continue
            if key.lower() not in _PATH_KEYS:
                continue
            fixed = _under(cwd, value)
            if fixed is not None and value not in said:
                changed[key] = fixed
                notes.append(
                    f"{call.name}'s {key} {value!r} is above the working directory; "
                    f"sent as {fixed!r}"
                )
        out.append(replace(call, arguments=changed) if changed != arguments else call)
    return out, notes


_COMMAND_KEYS = frozenset({"command", "cmd"})
_COMMAND_PATH = re.compile(r"(?<![\w.~$/-])/[^\s'\"|;&<>()`]+")


def _command_under(cwd: str, command: str, said: str) -> tuple[str, list[str]]:
    """A shell command with each absolute path above ``cwd`` that nobody wrote moved into it
    (:func:`_under`), and the paths moved: the 1.5B ran ``wc -l /tmp/task/data.txt`` for
    ``/tmp/task/work/data.txt`` through Claude Code's Bash, and answered that it did not
    exist."""
    moved: list[str] = []

    def move(found: re.Match[str]) -> str:
        path = found.group()
        fixed = _under(cwd, path)
        if fixed is None or path in said:
            return path
        moved.append(path)
        return fixed

    return _COMMAND_PATH.sub(move, command), moved


def _under(cwd: str, path: str) -> str | None:
    """``path`` moved into ``cwd`` when its folder is an ancestor of ``cwd`` (not the root)."""
    if not path.startswith("/") or path.startswith(cwd + "/"):
        return None
    if cwd == path.rstrip("/") or cwd.startswith(path.rstrip("/") + "/"):
        return None  # the working directory itself, or a folder above it (``cd /tmp/task``)
    folder, _, name = path.rpartition("/")
    if not folder or not name or not cwd.startswith(folder + "/"):
        return None
    return f"{cwd}/{name}"
