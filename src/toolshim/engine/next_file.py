"""The call a coding agent's request points at next: reading a named file no call has used, or
writing the new file the request asks for.

After results the 1.5B starts its plan over, reading the test it was told to make pass
(``test_calc.py``) again and again and never the file with the bug (``calc.py``), or, asked to
write a value "into a new file name.txt", reads the source of the value once more. The
request names the file of the next step; no call has used it yet
(:mod:`~toolshim.engine.files_named`). This module writes that step as the agent's own tool
would take it:

* a file the request asks to create or write into ("into a new file name.txt", "create
  greeting.txt") → its file-writing tool, the content left for the model to write
  (:func:`writing_opening`: the call opened up to its content), or with a shell only, a
  here-document into the file opened up to its content (``cat > /work/port.txt <<'EOF'``
  and a new line): opened as ``echo``, the 0.5B wrote ``echo 123`` with no redirection, and
  the 1.5B ``echo $? > errors.txt``; :func:`finished_call` ends one the model left open;
* any other named file → its reading tool on that file, or ``cat`` in its shell when it has
  no reading tool (:func:`reading_call`);
* every named file read, none changed, the request asking for a fix → its editing tool on
  the named file that is not a test, opened up to the text to replace
  (:func:`editing_opening`): the 1.5B read ``calc.py``, then said "change it to ``return a +
  b``" instead of making the edit.

Paths are the working directory's (``/work/calc.py``), as the agents want them.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import replace

from toolshim.dialects.base import OPEN_HERE, Dialect
from toolshim.dialects.calls import ParsedCall
from toolshim.engine.code_answer import read_content
from toolshim.engine.files_named import files_named, untouched_since_request
from toolshim.engine.focus import working_directory
from toolshim.types import ChatRequest, ToolCall, ToolSpec

__all__ = [
    "command_opening",
    "editing_opening",
    "file_to_create",
    "finished_call",
    "reading_call",
    "shell_only",
    "writing_opening",
]

_READING_TOOLS = ("Read", "read_file", "read", "view")
_WRITING_TOOLS = ("Write", "write_file", "write", "create_file")
_SHELL_TOOLS = ("exec_command", "shell", "Bash", "bash", "run_command", "run_shell_command")
_COMMAND_PARAMETERS = ("cmd", "command")
_PATH_PARAMETERS = ("file_path", "path", "filepath", "filename")
_CONTENT_PARAMETERS = ("content", "contents", "text", "file_text")
_EDITING_TOOLS = ("Edit", "edit_file", "edit", "str_replace_editor")
_OLD_PARAMETERS = ("old_string", "old_str", "old_text", "search")
_NEW_PARAMETERS = ("new_string", "new_str", "new_text", "replace")
_TEST_FILE = re.compile(r"(^|/)(test_[^/]*|[^/]*_test\.\w+|[^/]*\.test\.\w+|tests?/.*)$")
_CREATED = re.compile(
    r"(?:\bnew\s+(?:\w+\s+)?file|\bcreate|\bwrite|\bmake|\binto|"
    r"\bwrite\b[^.\n]{0,40}\bto|\bsave\b[^.\n]{0,40}\bto)"
    r"(?:\s+(?:a|an|the|new|named|called|file|script|program|module|python|shell|bash|text|"
    r"json|yaml|config))*\s*[`'\"]?$",
    re.IGNORECASE,
)
_HEREDOC = "EOF"
_OPEN_HEREDOC = re.compile(r"\Acat > \S+ <<'EOF'\n")


def _untouched(request: ChatRequest) -> tuple[list[str], list[str]]:
    """The untouched named files the request asks to create, and the others."""
    messages = request.messages
    text = next((m.text for m in reversed(messages) if m.role == "user" and m.text.strip()), "")
    created: list[str] = []
    others: list[str] = []
    for name in untouched_since_request(messages):
        at = text.find(name)
        (created if at >= 0 and _CREATED.search(text[max(0, at - 60) : at]) else others).append(
            name
        )
    return created, others


def _tool(tools: tuple[ToolSpec, ...], names: tuple[str, ...]) -> ToolSpec | None:
    by_name = {t.name: t for t in tools}
    return next((by_name[n] for n in names if n in by_name), None)


def _parameter(tool: ToolSpec, names: tuple[str, ...]) -> str | None:
    properties = tool.parameters.get("properties")
    if not isinstance(properties, dict):
        return None
    return next((n for n in names if n in properties), None)


def _path(request: ChatRequest, name: str) -> str:
    cwd = working_directory(request)
    if cwd and not name.startswith("/"):
        return f"{cwd}/{name.removeprefix('./')}"
    return name


def reading_call(request: ChatRequest, dialect: Dialect) -> str | None:
    """The agent's read of the first named file no call has used (not one the request asks
    to create), written in ``dialect``, or None: its reading tool, or with none its shell
    tool running ``cat`` (Codex's ``exec_command``)."""
    _, others = _untouched(request)
    if not others:
        return None
    path = _path(request, others[0])
    tool = _tool(request.function_tools, _READING_TOOLS)
    key = _parameter(tool, _PATH_PARAMETERS) if tool else None
    arguments: dict[str, str | list[str]]
    if tool is not None and key is not None:
        arguments = {key: path}
    else:
        tool = _tool(request.function_tools, _SHELL_TOOLS)
        key = _parameter(tool, _COMMAND_PARAMETERS) if tool else None
        properties = tool.parameters.get("properties") if tool else None
        schema = properties.get(key) if isinstance(properties, dict) and key else None
        if tool is None or key is None or not isinstance(schema, dict):
            return None
        command = f"cat {shlex.quote(path)}"
        arguments = {key: ["bash", "-lc", command] if schema.get("type") == "array" else command}
    rendered = json.dumps(arguments, ensure_ascii=False)
    return dialect.render_calls([ToolCall("next_file", tool.name, rendered)])


def file_to_create(request: ChatRequest) -> str | None:
    """The path of the first file the request asks to create that no call has used, or None."""
    created, _ = _untouched(request)
    return _path(request, created[0]) if created else None


def shell_only(request: ChatRequest) -> bool:
    """The agent writes files with its shell alone (Codex): no file-writing tool."""
    tools = request.function_tools
    return _tool(tools, _WRITING_TOOLS) is None and _string_shell(request) is not None


def writing_opening(request: ChatRequest, dialect: Dialect) -> str | None:
    """The agent's write of the first file the request asks to create, opened up to its
    content (the model writes the rest), or None."""
    created, _ = _untouched(request)
    tool = _tool(request.function_tools, _WRITING_TOOLS)
    if not created:
        return None
    if tool is None:  # a shell only (Codex): a here-document, for the model to write the rest
        shell = _string_shell(request)
        if shell is None:
            return None
        path = shlex.quote(_path(request, created[0]))
        return dialect.opening_at(shell[0], {shell[1]: f"cat > {path} <<'{_HEREDOC}'\n{OPEN_HERE}"})
    path_key = _parameter(tool, _PATH_PARAMETERS)
    content_key = _parameter(tool, _CONTENT_PARAMETERS)
    if path_key is None or content_key is None:
        return None
    return dialect.opening_at(
        tool.name, {path_key: _path(request, created[0]), content_key: OPEN_HERE}
    )


def finished_call(call: ParsedCall) -> ParsedCall:
    """``call`` with the here-document :func:`writing_opening` opened ended, when the model
    wrote its content and stopped without the ``EOF`` line (bash writes the file all the same,
    but warns, and the warning reads to a small model as a failure)."""
    if not isinstance(call.arguments, dict):
        return call
    arguments = {
        key: _closed_heredoc(value)
        if key in _COMMAND_PARAMETERS and isinstance(value, str)
        else value
        for key, value in call.arguments.items()
    }
    return call if arguments == call.arguments else replace(call, arguments=arguments)


def _closed_heredoc(command: str) -> str:
    if not _OPEN_HEREDOC.match(command):
        return command
    lines = command.rstrip("\n").split("\n")
    for at in range(1, len(lines)):
        # The 0.5B ended it as ``EOF'``, quoting it as the opening line does.
        if lines[at].strip().strip("'\"") == _HEREDOC:
            if lines[at] == _HEREDOC:
                return command
            return "\n".join([*lines[:at], _HEREDOC, *lines[at + 1 :]])
    return "\n".join(lines) + f"\n{_HEREDOC}"


def editing_opening(request: ChatRequest, dialect: Dialect) -> str | None:
    """The agent's edit of the first named file that is not a test and that a call has read
    but none has changed, opened up to the text it replaces, or None."""
    messages = request.messages
    index = next(
        (
            i
            for i in range(len(messages) - 1, -1, -1)
            if messages[i].role == "user" and messages[i].text.strip()
        ),
        None,
    )
    if index is None:
        return None
    tool = _tool(request.function_tools, _EDITING_TOOLS)
    path_key = _parameter(tool, _PATH_PARAMETERS) if tool else None
    old_key = _parameter(tool, _OLD_PARAMETERS) if tool else None
    new_key = _parameter(tool, _NEW_PARAMETERS) if tool else None
    if tool is None or path_key is None or old_key is None or new_key is None:
        return _sed_opening(request, dialect, messages[index].text, index)
    name = _file_to_fix(request, messages[index].text, index)
    if name is None:
        return None
    line = _failing_line(request, name)
    if line is not None:  # the line the traceback points at: the model writes its fix
        arguments = {path_key: _path(request, name), old_key: line, new_key: OPEN_HERE}
        return dialect.opening_at(tool.name, arguments)
    return dialect.opening_at(
        tool.name, {path_key: _path(request, name), old_key: OPEN_HERE, new_key: ""}
    )


def _failing_line(request: ChatRequest, name: str) -> str | None:
    """The line of ``name`` (as a result shows it) that the last traceback naming the file
    points at, when it is there once: opened to write what to replace, the 1.5B wrote
    ``old_string="nam"`` for ``return "Hello, " + nam + "!"``, which matches twice."""
    content = read_content(request.messages, name)
    if content is None:
        return None
    pointed = re.compile(
        rf'File "[^"\n]*(?<![\w.-]){re.escape(name.rsplit("/", 1)[-1])}", line (\d+)'
    )
    for message in reversed(request.messages):
        hits = pointed.findall(message.text) if message.role == "tool" else []
        if hits:
            lines = content.split("\n")
            number = int(hits[-1])
            if 1 <= number <= len(lines) and lines[number - 1].strip():
                line = lines[number - 1]
                return line if content.count(line) == 1 else None
            return None
    return None


def command_opening(request: ChatRequest, dialect: Dialect) -> str | None:
    """The agent's shell call opened up to its command (``[Bash(command="``), or None: opened
    at the tool's name only, the 1.5B wrote ``Bash(rg -l "ERROR" app.log > errors.txt)``,
    no argument name, not a call."""
    shell = _string_shell(request)
    return dialect.opening_at(shell[0], {shell[1]: OPEN_HERE}) if shell else None


def _file_to_fix(request: ChatRequest, text: str, index: int) -> str | None:
    """The first file ``text`` (the request) names that is not a test and that a call after
    it has read but none has changed."""
    messages = request.messages
    untouched = set(untouched_since_request(messages))
    calls = [c for m in messages[index + 1 :] for c in m.tool_calls]
    changed = " ".join(
        c.arguments
        for c in calls
        if c.name in _WRITING_TOOLS + _EDITING_TOOLS or re.search(r"sed\s+-i|>", c.arguments)
    )
    for name in files_named(text):
        if name in untouched or _TEST_FILE.search(name) or name.rsplit("/", 1)[-1] in changed:
            continue
        return name
    return None


def _sed_opening(request: ChatRequest, dialect: Dialect, text: str, index: int) -> str | None:
    """With only a shell (Codex), the fix opened as ``sed -i 's/`` for the model to write the
    text to replace, its replacement and the file."""
    shell = _string_shell(request)
    if shell is None or _file_to_fix(request, text, index) is None:
        return None
    return dialect.opening_at(shell[0], {shell[1]: f"sed -i 's/{OPEN_HERE}"})


def _string_shell(request: ChatRequest) -> tuple[str, str] | None:
    """The agent's shell tool that takes its command as a string, and that parameter."""
    tool = _tool(request.function_tools, _SHELL_TOOLS)
    key = _parameter(tool, _COMMAND_PARAMETERS) if tool else None
    properties = tool.parameters.get("properties") if tool else None
    schema = properties.get(key) if isinstance(properties, dict) and key else None
    if tool is None or key is None or not isinstance(schema, dict) or schema.get("type") == "array":
        return None
    return tool.name, key
