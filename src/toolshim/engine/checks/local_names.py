"""Check ``local_names``: a path where the tool's own documentation takes only a name in the
current directory, taken as the walk it means.

Tools over a stateful file system (a shell's ``cat``, ``mv``, ``cp`` …) often take a name in
the current directory and nothing else, and say so: "The name of the file from current
directory to display. No path is allowed." (BFCL's multi-turn file system), "Destination must
be local to the current directory and cannot be a path", "Both source and destination must be
local to the current directory". Small models write the path anyway: the 1.5B found
``./projects/photography/test_image1.jpg`` and then copied it by that path, read
``archive/log.txt`` by its path after moving the file there, and each call failed ("No such
file or directory", "Invalid character") where the step meant was to go into the folder first.

So where such a parameter is given a relative path:

* if the tools include one that changes the current directory (its description says so, one
  string parameter), the call is sent as that tool's calls into each folder of the path, one
  level at a time, then the call with the bare names; folders the conversation already went
  into (its earlier calls of that tool, answered without an error, in this reply or before)
  are not entered again;
* otherwise, or where the call's local parameters do not share one folder (a path beside a
  bare name, two different folders), or the path is absolute or holds ``~``, the reply is
  re-asked, once, with the rule the description states.

Measured on the 1.5B's first 20 BFCL ``multi_turn_base`` cases (docs/results.md): 1/20, the
first case it ever passed through toolshim (``multi_turn_base_3``: its ``cp`` of the paths
``find`` returned became BFCL's own answer, ``cd`` twice and two ``cp`` of the bare names).

Only a parameter the documentation itself restricts is read: a tool that takes paths is never
touched. Emulated replies only, and last of the checks: the others judge the calls as the
model wrote them (a path a tool returned is no made-up value), this one sends them as meant.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace

from toolshim.dialects.interpret import ParsedCall
from toolshim.engine.checks.base import PASS, Check, CheckedReply, Outcome, Reask, Revise
from toolshim.engine.outcomes import call_outcomes
from toolshim.types import ChatRequest, ToolSpec

__all__ = ["CHECK", "change_directory_tool", "local_parameters"]

_LOCAL = re.compile(
    r"no (?:file )?paths? (?:is |are )?allowed"
    r"|cannot be a path|must not be a path|not allowed to be a path"
    r"|must be local to the current (?:working )?directory"
    r"|(?:from|at) (?:the )?current (?:working )?directory"
)
"""Read in lower-cased text: a case-blind search of a coding agent's long tool descriptions,
on every reply, cost three times as much."""
_SENTENCE = re.compile(r"[^.!?]*(?:[.!?]|$)")
_CHANGES_DIRECTORY = re.compile(
    r"\bchange(?:s)? (?:the )?(?:current )?(?:working )?(?:directory|folder)\b", re.IGNORECASE
)


def _restricts(text: str) -> bool:
    return _LOCAL.search(text.lower()) is not None


def local_parameters(tool: ToolSpec) -> tuple[str, ...]:
    """The string parameters of ``tool`` its documentation restricts to a name in the current
    directory: by their own description, or named in a sentence of the tool's that does."""
    properties = tool.parameters.get("properties")
    if not isinstance(properties, Mapping):
        return ()
    names = [
        name
        for name, schema in properties.items()
        if isinstance(schema, Mapping) and schema.get("type", "string") == "string"
    ]
    found: list[str] = []
    for name in names:
        text = str(properties[name].get("description", ""))
        if _restricts(text):
            found.append(name)
    # The sentences are read only when the description says it somewhere: a coding agent's
    # tools carry descriptions of thousands of characters, read on every reply.
    if _restricts(tool.description):
        for sentence in _SENTENCE.findall(tool.description):
            if _restricts(sentence):
                words = set(re.findall(r"\w+", sentence.lower()))
                found += [name for name in names if name.lower() in words]
    return tuple(dict.fromkeys(found))


def change_directory_tool(tools: Sequence[ToolSpec]) -> tuple[str, str] | None:
    """The offered tool that changes the current directory, and its one parameter: the first
    whose description says it changes the directory and that takes one string."""
    for tool in tools:
        properties = tool.parameters.get("properties")
        if not isinstance(properties, Mapping) or len(properties) != 1:
            continue
        ((parameter, schema),) = properties.items()
        if not isinstance(schema, Mapping) or schema.get("type", "string") != "string":
            continue
        if _CHANGES_DIRECTORY.search(tool.description):
            return tool.name, parameter
    return None


def _folders(value: str) -> tuple[list[str], str] | None:
    """A relative path's folders and its last name (``./a/b/c.txt`` -> ``['a', 'b'], 'c.txt'``);
    None for a bare name, and for a path that is not relative to the current directory."""
    text = value.strip().rstrip("/")
    if "/" not in text or text.startswith(("/", "~")) or "://" in text:
        return None
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if not parts:
        return None
    return parts[:-1], parts[-1]


def _entered(request: ChatRequest, cd: tuple[str, str]) -> list[str]:
    """The folders the conversation went into with the change-directory tool (answered
    without an error), ``..`` climbing back out, as far as the conversation tells."""
    path: list[str] = []
    for outcome in call_outcomes(request.messages, whole=True):
        arguments = outcome.arguments
        if outcome.name != cd[0] or not outcome.worked or not isinstance(arguments, dict):
            continue
        folder = arguments.get(cd[1])
        if isinstance(folder, str):
            _walk(path, folder)
    return path


def _walk(path: list[str], folder: str) -> None:
    for part in folder.strip().split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if path:
                path.pop()
        else:
            path.append(part)


def _still_to_enter(path: Sequence[str], folders: Sequence[str]) -> list[str]:
    """``folders`` less the longest run of them the current ``path`` already ends in."""
    for size in range(min(len(path), len(folders)), 0, -1):
        if list(path[-size:]) == list(folders[:size]):
            return list(folders[size:])
    return list(folders)


def _rule(tool: ToolSpec, parameter: str) -> str:
    """The sentence of the documentation that restricts ``parameter``: one that speaks of
    paths first ("No path is allowed.")."""
    schema = tool.parameters.get("properties", {}).get(parameter, {})
    found = [
        sentence.strip()
        for text in (str(schema.get("description", "")), tool.description)
        for sentence in _SENTENCE.findall(text)
        if _restricts(sentence)
    ]
    found.sort(key=lambda sentence: "path" not in sentence.lower())
    return found[0] if found else "it takes a name in the current directory"


def _run(reply: CheckedReply) -> Outcome:
    request = reply.turn.request
    tools = {t.name: t for t in request.function_tools}
    restricted = {name: found for name, t in tools.items() if (found := local_parameters(t))}
    if not restricted:
        return PASS
    cd = change_directory_tool(tuple(tools.values()))
    path = _entered(request, cd) if cd else []
    out: list[ParsedCall] = []
    notes: list[str] = []
    problems: list[str] = []
    for call in reply.calls:
        tool = tools.get(call.name)
        arguments = call.arguments
        if cd and call.name == cd[0] and isinstance(arguments, Mapping):
            folder = arguments.get(cd[1])
            if isinstance(folder, str):
                _walk(path, folder)
        if tool is None or call.problem or not isinstance(arguments, Mapping):
            out.append(call)
            continue
        local = [p for p in restricted.get(call.name, ()) if isinstance(arguments.get(p), str)]
        split = {p: _folders(arguments[p]) for p in local}
        pathed = [p for p in local if split[p] is not None or "/" in arguments[p]]
        if not pathed:
            out.append(call)
            continue
        shared = {tuple(s[0]) if s else () for s in split.values()}
        if cd is None or None in (split[p] for p in pathed) or len(shared) != 1:
            for p in pathed:
                problems.append(
                    f"{call.name}'s {p} {arguments[p]!r} is a path, but {_rule(tool, p)!r}"
                    + (
                        f": call {cd[0]} to go into its folder first, then {call.name} "
                        "with the name alone"
                        if cd
                        else ""
                    )
                )
            out.append(call)
            continue
        folders = list(shared.pop())
        enter = _still_to_enter(path, folders)
        steps = [ParsedCall(cd[0], {cd[1]: folder}) for folder in enter]
        path += enter
        changed = dict(arguments)
        for p in local:
            names = split[p]
            if names is not None:
                changed[p] = names[1]
        fixed = replace(call, arguments=changed)
        out += [*steps, fixed]
        walked = " then ".join(f"{cd[0]}({cd[1]}={f!r})" for f in enter)
        notes.append(
            f"{call.name}'s {', '.join(pathed)} named a path where its description says "
            f"{_rule(tool, pathed[0])!r}: sent as "
            + (f"{walked} then " if walked else "")
            + f"{call.name} with the name alone"
        )
    if problems and "local_names" not in reply.turn.reasked:
        return Reask(tuple(problems))
    if not notes:
        return PASS
    return Revise(tuple(out), reply.finish, tuple(notes))


CHECK = Check("local_names", _run)
