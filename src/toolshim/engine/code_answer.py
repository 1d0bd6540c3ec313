"""A file's new content written in an answer, made the call that writes it: the step a small
model in a coding agent describes instead of taking.

Asked to fix ``greet.py``, the 1.5B read it, then answered "Here's the corrected code:" and
the whole fixed file in a fenced block, where the next step was a call that writes it; opened
as a call, it started its plan over. When a coding agent's turn asked for a change and no call
has made one (:func:`~toolshim.engine.asked.action_left`), an answer with one such block
becomes a call of the agent's own tool: its file-writing tool (``Write(file_path, content)``)
or, with none, its shell tool running ``cat > FILE <<'EOF'`` (Codex's ``exec_command``).

The same goes for a reply that is Python writing the file (``[open("hello.py",
"w").write('print("Hello, World!")')]``: the 1.5B's answer through Codex, whose one tool is a
shell), when the request names the file.

A block is taken only when it is unmistakably a whole file:

* the file is named by the block's first line (``# greet.py``, ``// app.js``: the label is not
  written) or, failing that, is the one such file the text before the block names ("To fix
  the `NameError` in `greet.py` … Here's the corrected code:"); and the user's request names
  that file, or a call in the conversation has used it;
* the block is not a shell session (``bash``, ``sh``, ``console``, lines opening with ``$``);
* when a result in the conversation holds the file (a read of it), the block keeps at least
  half of its lines and changes something: a snippet of a long file is an excerpt to show,
  not the file's new content.
"""

from __future__ import annotations

import ast
import difflib
import json
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from toolshim.dialects.interpret import ParsedCall
from toolshim.engine.client_tools import SHELL_TOOLS
from toolshim.engine.files_named import files_named
from toolshim.engine.focus import working_directory
from toolshim.types import ChatRequest, Message, ToolSpec

__all__ = ["read_content", "writing_call", "written_file_call"]

_FENCE = re.compile(r"```([\w+#.-]*)[ \t]*\n(.*?)\n?```", re.DOTALL)
_LABEL = re.compile(r"^\s*(?:#|//|--|;|<!--|/\*)\s*(?:file(?:name)?:\s*)?(\S+?)\s*(?:-->|\*/)?\s*$")
_SHELL_LANGUAGES = frozenset(
    {"bash", "sh", "shell", "console", "zsh", "terminal", "cmd", "powershell"}
)
_PATH_PARAMETERS = ("file_path", "path", "filepath", "filename", "file")
_CONTENT_PARAMETERS = ("content", "contents", "text", "file_text", "data")
_COMMAND_PARAMETERS = ("command", "cmd")
_WRITING_TOOLS = frozenset({"write", "write_file", "create_file"})
_TEST_FILE = re.compile(r"(^|/)(test_[^/]*|[^/]*_test\.\w+|[^/]*\.test\.\w+|tests?/.*)$")
_NUMBERED = re.compile(r"^\s*\d+\t", re.MULTILINE)
"""Claude Code's ``Read`` numbers each line (``12\\t…``)."""


def written_file_call(request: ChatRequest, text: str) -> ParsedCall | None:
    """The call that writes the one whole file ``text`` gives (see the module docstring)."""
    found = _the_block(request, text) or _python_write(request, text) or _patched(request, text)
    if found is None:
        return None
    name, content = found
    path = _path_for(request, name)
    return writing_call(request.function_tools, path, content)


def _the_block(request: ChatRequest, text: str) -> tuple[str, str] | None:
    request_names = _request_names(request.messages)
    used = _used_names(request.messages)
    blocks: list[tuple[str, str]] = []
    start = 0
    for match in _FENCE.finditer(text):
        language, body = match.group(1).lower(), match.group(2)
        before = text[start : match.start()]
        start = match.end()
        if language in _SHELL_LANGUAGES or body.lstrip().startswith("$ "):
            continue
        lines = body.split("\n")
        label = _LABEL.match(lines[0]) if lines else None
        if label and files_named(label.group(1)):
            name, body = files_named(label.group(1))[0], "\n".join(lines[1:])
        else:
            named = {n for n in files_named(before) if _is_known(n, request_names, used)}
            if len(named) != 1:
                continue
            name = named.pop()
        if not _is_known(name, request_names, used):
            continue
        if _TEST_FILE.search(name) and read_content(request.messages, name) is None:
            continue  # a test the request runs, not one it asks for: tests are left as they are
        blocks.append((name, body.rstrip("\n") + "\n"))
    if len({name for name, _ in blocks}) != 1:
        return None
    name, content = blocks[-1]
    original = read_content(request.messages, name)
    if original is not None and not _replaces(original, content):
        return None
    return name, content


def _patched(request: ChatRequest, text: str) -> tuple[str, str] | None:
    """A file read in the conversation with the lines a code block of ``text`` changes in it
    (see :func:`_changed_lines`): the 1.5B read ``greet.py``, then answered "To fix the code
    in `test_greet.py` …" with a block holding the fixed function and a test after it, named
    for the wrong file and not the whole of either. Test files are left as they are."""
    found: list[tuple[str, str]] = []
    for match in _FENCE.finditer(text):
        language, body = match.group(1).lower(), match.group(2)
        if language in _SHELL_LANGUAGES or body.lstrip().startswith("$ "):
            continue
        label = _LABEL.match(body.split("\n", 1)[0])
        labelled = files_named(label.group(1)) if label else []
        for name in _request_names(request.messages):
            if _TEST_FILE.search(name) or (labelled and labelled[0] != name):
                continue
            original = read_content(request.messages, name)
            changed = _changed_lines(original, body) if original else None
            if changed is not None and (name, changed) not in found:
                found.append((name, changed))
    return found[0] if len(found) == 1 else None


def _changed_lines(original: str, block: str) -> str | None:
    """``original`` with each of its lines that ``block`` holds changed (a line of the block
    at least 80% like it, in order) replaced, when the block holds at least half of its other
    lines as they are and changes one or more; lines the block adds are not taken (a usage
    example after the fixed function is not the file's)."""
    old = original.split("\n")
    new = block.split("\n")
    matcher = difflib.SequenceMatcher(a=[x.rstrip() for x in old], b=[x.rstrip() for x in new])
    result = list(old)
    kept = changed = 0
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            kept += sum(1 for line in old[i1:i2] if line.strip())
        elif tag == "replace":
            at = j1
            for i in range(i1, i2):
                for j in range(at, j2):
                    if difflib.SequenceMatcher(a=old[i], b=new[j]).ratio() >= 0.8:
                        result[i], at = new[j], j + 1
                        changed += 1
                        break
    lines = sum(1 for line in old if line.strip())
    if not changed or (kept + changed) * 2 < lines:
        return None
    return "\n".join(result)


def _python_write(request: ChatRequest, text: str) -> tuple[str, str] | None:
    """``open("hello.py", "w").write("print(...)")`` written as the reply (the 1.5B's answer
    through Codex, whose one tool is a shell): the file and its content, when that is the
    whole reply, the file is one the request names and the content a plain string."""
    source = text.strip().removeprefix("[").removesuffix("]").strip()
    try:
        tree = ast.parse(source, mode="eval")
    except (SyntaxError, ValueError):
        return None
    call = tree.body
    if not (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "write"
        and len(call.args) == 1
        and isinstance(call.args[0], ast.Constant)
        and isinstance(call.args[0].value, str)
    ):
        return None
    opened = call.func.value
    if not (
        isinstance(opened, ast.Call)
        and isinstance(opened.func, ast.Name)
        and opened.func.id == "open"
        and len(opened.args) == 2
        and all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in opened.args)
    ):
        return None
    path, mode = (str(a.value) for a in opened.args if isinstance(a, ast.Constant))
    if mode not in ("w", "wt") or not _is_known(path, _request_names(request.messages), []):
        return None
    content = call.args[0].value
    return path, content if content.endswith("\n") else content + "\n"


def _request_names(messages: Sequence[Message]) -> list[str]:
    for message in reversed(messages):
        if message.role == "user" and message.text.strip():
            return files_named(message.text)
    return []


def _used_names(messages: Sequence[Message]) -> list[str]:
    return [c.arguments for m in messages for c in m.tool_calls]


def _is_known(name: str, request_names: Sequence[str], used: Sequence[str]) -> bool:
    base = name.rsplit("/", 1)[-1]
    if any(n.rsplit("/", 1)[-1] == base for n in request_names):
        return True
    return any(re.search(rf"(?<![\w.-]){re.escape(base)}(?![\w-]|\.\w)", a) for a in used)


def read_content(messages: Sequence[Message], name: str) -> str | None:
    """The latest result of a call that used ``name`` and did not fail: the file as read."""
    base = re.escape(name.rsplit("/", 1)[-1])
    calls = {
        c.id: c
        for m in messages
        for c in m.tool_calls
        if re.search(rf"(?<![\w.-]){base}(?![\w-]|\.\w)", c.arguments)
    }
    for message in reversed(messages):
        if message.role == "tool" and message.tool_call_id in calls:
            text = message.text
            if text.lstrip()[:5].lower() == "error":
                continue
            head, found, output = text.partition("Output:\n")  # Codex's exec_command
            if found and "exited with code 0" in head:
                text = output
            return _NUMBERED.sub("", text)
    return None


def _replaces(original: str, content: str) -> bool:
    """``content`` is a new version of ``original``, not an excerpt of it or the same text."""
    old = [line for line in original.splitlines() if line.strip()]
    new = [line for line in content.splitlines() if line.strip()]
    if [line.rstrip() for line in old] == [line.rstrip() for line in new]:
        return False
    return len(new) * 2 >= len(old)


def _path_for(request: ChatRequest, name: str) -> str:
    """The path a call in the conversation used for ``name``, or ``name`` in the working
    directory, or ``name`` as written."""
    base = name.rsplit("/", 1)[-1]
    for message in reversed(request.messages):
        for call in message.tool_calls:
            try:
                arguments = json.loads(call.arguments)
            except ValueError:
                continue
            if not isinstance(arguments, dict):
                continue
            for value in arguments.values():
                if isinstance(value, str) and value.rsplit("/", 1)[-1] == base and " " not in value:
                    return value
    cwd = working_directory(request)
    if cwd and not name.startswith("/"):
        return f"{cwd.rstrip('/')}/{name.removeprefix('./')}"
    return name


def writing_call(tools: Sequence[ToolSpec], path: str, content: str) -> ParsedCall | None:
    for tool in tools:
        properties = _properties(tool)
        if tool.name.lower() in _WRITING_TOOLS:
            path_key = _first(properties, _PATH_PARAMETERS)
            content_key = _first(properties, _CONTENT_PARAMETERS)
            if path_key and content_key:
                return _call(tool.name, {path_key: path, content_key: content})
    for tool in tools:
        properties = _properties(tool)
        command_key = _first(properties, _COMMAND_PARAMETERS)
        if tool.name.lower() not in SHELL_TOOLS or command_key is None:
            continue
        marker = "TOOLSHIM_EOF"
        while marker in content:
            marker += "_"
        script = f"cat > {shlex.quote(path)} <<'{marker}'\n{content}{marker}"
        schema = properties[command_key]
        if isinstance(schema, Mapping) and schema.get("type") == "array":
            return _call(tool.name, {command_key: ["bash", "-lc", script]})
        return _call(tool.name, {command_key: script})
    return None


def _properties(tool: ToolSpec) -> Mapping[str, Any]:
    properties = tool.parameters.get("properties")
    return properties if isinstance(properties, Mapping) else {}


def _first(properties: Mapping[str, Any], names: Sequence[str]) -> str | None:
    return next((n for n in names if n in properties), None)


def _call(name: str, arguments: dict[str, Any]) -> ParsedCall:
    raw = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    return ParsedCall(name, arguments, raw)
