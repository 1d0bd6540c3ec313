"""The step a coding agent's request points at: read the named file no call has used, or
write the new file it asks for, in the agent's own tools and the dialect's own shape."""

from __future__ import annotations

from dataclasses import replace

import pytest

from toolshim.dialects import get_dialect
from toolshim.dialects.calls import ParsedCall
from toolshim.engine.next_file import (
    editing_opening,
    finished_call,
    reading_call,
    writing_opening,
)
from toolshim.types import ChatRequest, Message, ToolCall, ToolSpec

STRING = {"type": "string"}
READ = ToolSpec("Read", "r", {"type": "object", "properties": {"file_path": STRING}})
WRITE = ToolSpec(
    "Write", "w", {"type": "object", "properties": {"file_path": STRING, "content": STRING}}
)


def after_reading(
    request: str, path: str, tools: tuple[ToolSpec, ...] = (READ, WRITE)
) -> ChatRequest:
    return ChatRequest(
        model="m",
        messages=(
            Message("user", f"Primary working directory: /w\n{request}"),
            Message(
                "assistant", "", tool_calls=(ToolCall("c1", "Read", f'{{"file_path": "{path}"}}'),)
            ),
            Message("tool", "x", tool_call_id="c1"),
        ),
        tools=tools,
    )


def test_the_file_with_the_bug_is_read_after_its_test() -> None:
    request = after_reading(
        "python3 test_calc.py fails. Fix the bug in calc.py.", "/w/test_calc.py"
    )
    assert reading_call(request, get_dialect("pythonic")) == '[Read(file_path="/w/calc.py")]'
    assert writing_opening(request, get_dialect("pythonic")) is None


@pytest.mark.parametrize(
    ("dialect", "opening"),
    [
        ("pythonic", '[Write(file_path="/w/name.txt", content="'),
        (
            "hermes",
            '<tool_call>\n{"name": "Write", "arguments": {"file_path": "/w/name.txt", "content": "',
        ),
    ],
)
def test_the_new_file_asked_for_is_opened_up_to_its_content(dialect: str, opening: str) -> None:
    request = after_reading(
        "Write the value of the name field of package.json into a new file name.txt.",
        "/w/package.json",
    )
    assert writing_opening(request, get_dialect(dialect)) == opening
    assert reading_call(request, get_dialect(dialect)) is None  # name.txt is to be created


def test_nothing_is_suggested_without_the_tool_or_an_untouched_file() -> None:
    fixed = after_reading("Fix calc.py", "/w/calc.py")
    assert reading_call(fixed, get_dialect("pythonic")) is None
    no_read = after_reading("Fix calc.py", "/w/x.py", tools=(WRITE,))
    assert reading_call(no_read, get_dialect("pythonic")) is None
    no_write = after_reading("Create greeting.txt saying hi", "/w/x.py", tools=(READ,))
    assert writing_opening(no_write, get_dialect("pythonic")) is None


def test_an_agent_with_only_a_shell_reads_with_cat() -> None:
    """Codex offers exec_command (a string) and older Codex shell (an argv array)."""
    exec_command = ToolSpec(
        "exec_command", "run", {"type": "object", "properties": {"cmd": STRING}}
    )
    shell = ToolSpec(
        "shell",
        "run",
        {"type": "object", "properties": {"command": {"type": "array", "items": STRING}}},
    )
    request = after_reading("Fix the bug in calc.py.", "/w/test_calc.py", tools=(exec_command,))
    assert reading_call(request, get_dialect("pythonic")) == '[exec_command(cmd="cat /w/calc.py")]'
    request = after_reading("Fix the bug in calc.py.", "/w/test_calc.py", tools=(shell,))
    assert reading_call(request, get_dialect("json")) == (
        '{"tool_calls": [{"name": "shell", "arguments": {"command": ["bash", "-lc", "cat /w/calc.py"]}}]}'
    )


EDIT = ToolSpec(
    "Edit",
    "e",
    {
        "type": "object",
        "properties": {"file_path": STRING, "old_string": STRING, "new_string": STRING},
    },
)


def test_a_read_file_to_fix_is_opened_as_its_edit_not_its_test() -> None:
    both_read = ChatRequest(
        model="m",
        messages=(
            Message(
                "user", "Primary working directory: /w\npython3 test_calc.py fails. Fix calc.py."
            ),
            Message(
                "assistant",
                "",
                tool_calls=(
                    ToolCall("c1", "Read", '{"file_path": "/w/test_calc.py"}'),
                    ToolCall("c2", "Read", '{"file_path": "/w/calc.py"}'),
                ),
            ),
            Message("tool", "from calc import add", tool_call_id="c1"),
            Message("tool", "def add(a, b):\n    return a - b", tool_call_id="c2"),
        ),
        tools=(READ, EDIT),
    )
    assert editing_opening(both_read, get_dialect("pythonic")) == (
        '[Edit(file_path="/w/calc.py", old_string="'
    )
    edited = replace(
        both_read,
        messages=(
            *both_read.messages,
            Message(
                "assistant",
                "",
                tool_calls=(
                    ToolCall("c3", "Edit", '{"file_path": "/w/calc.py", "old_string": "-"}'),
                ),
            ),
            Message("tool", "ok", tool_call_id="c3"),
        ),
    )
    assert editing_opening(edited, get_dialect("pythonic")) is None  # changed already
    unread = after_reading("Fix calc.py", "/w/test_calc.py", tools=(READ, EDIT))
    assert editing_opening(unread, get_dialect("pythonic")) is None  # read it first


def test_with_only_a_shell_a_read_file_to_fix_is_opened_as_sed() -> None:
    """Codex: calc.py read with cat, the test run; the fix opened as ``sed -i 's/``."""
    exec_command = ToolSpec(
        "exec_command", "run", {"type": "object", "properties": {"cmd": STRING}}
    )
    request = ChatRequest(
        model="m",
        messages=(
            Message("user", "<cwd>/w</cwd>\npython3 test_calc.py fails. Fix the bug in calc.py."),
            Message(
                "assistant",
                "",
                tool_calls=(
                    ToolCall("c1", "exec_command", '{"cmd": "python3 test_calc.py"}'),
                    ToolCall("c2", "exec_command", '{"cmd": "cat calc.py"}'),
                ),
            ),
            Message("tool", "AssertionError: -1", tool_call_id="c1"),
            Message("tool", "def add(a, b):\n    return a - b", tool_call_id="c2"),
        ),
        tools=(exec_command,),
    )
    assert editing_opening(request, get_dialect("pythonic")) == "[exec_command(cmd=\"sed -i 's/"
    fixed = replace(
        request,
        messages=(
            *request.messages,
            Message(
                "assistant",
                "",
                tool_calls=(ToolCall("c3", "exec_command", '{"cmd": "sed -i s/-/+/ calc.py"}'),),
            ),
            Message("tool", "", tool_call_id="c3"),
        ),
    )
    assert editing_opening(fixed, get_dialect("pythonic")) is None


def test_with_only_a_shell_the_new_file_is_opened_as_a_here_document() -> None:
    """Opened as ``echo``, the 0.5B wrote ``echo 123`` and no redirection: the file to write
    comes first, the model writes only its content."""
    exec_command = ToolSpec(
        "exec_command", "run", {"type": "object", "properties": {"cmd": STRING}}
    )
    request = after_reading(
        "How many lines of app.log contain ERROR? Write the number into a new file errors.txt.",
        "/w/app.log",
        tools=(exec_command,),
    )
    assert (
        writing_opening(request, get_dialect("pythonic"))
        == "[exec_command(cmd=\"cat > /w/errors.txt <<'EOF'\\n"
    )
    assert (
        writing_opening(request, get_dialect("hermes"))
        == '<tool_call>\n{"name": "exec_command", "arguments": {"cmd": "cat > /w/errors.txt'
        " <<'EOF'\\n"
    )


@pytest.mark.parametrize(
    "request_text",
    [
        "Create a Python script hello.py that prints exactly: Hello, World!",
        "Write a new shell script run.sh that prints the date",
        "Create a file named greeting.txt that contains exactly the text: hi",
    ],
)
def test_the_file_a_request_creates_is_written_not_read(request_text: str) -> None:
    request = after_reading(request_text, "/w/other.txt")
    assert reading_call(request, get_dialect("pythonic")) is None
    opening = writing_opening(request, get_dialect("pythonic"))
    assert opening is not None and opening.startswith('[Write(file_path="/w/')


@pytest.mark.parametrize(
    ("command", "finished"),
    [
        ("cat > /w/e.txt <<'EOF'\n3", "cat > /w/e.txt <<'EOF'\n3\nEOF"),
        ("cat > /w/e.txt <<'EOF'\n3\n", "cat > /w/e.txt <<'EOF'\n3\nEOF"),
        ("cat > /w/e.txt <<'EOF'\n3\nEOF", "cat > /w/e.txt <<'EOF'\n3\nEOF"),
        # The 0.5B quoted the end as the opening quotes it.
        ("cat > /w/e.txt <<'EOF'\nhi\nEOF'", "cat > /w/e.txt <<'EOF'\nhi\nEOF"),
        ("cat > /w/e.txt <<'EOF'\nx = 1\nEOF\n", "cat > /w/e.txt <<'EOF'\nx = 1\nEOF\n"),
        ("echo 3 > e.txt", "echo 3 > e.txt"),
        ("cat <<'EOF'\n3", "cat <<'EOF'\n3"),
    ],
)
def test_a_here_document_left_open_is_ended(command: str, finished: str) -> None:
    call = ParsedCall("exec_command", {"cmd": command, "workdir": "EOF"})
    assert finished_call(call).arguments == {"cmd": finished, "workdir": "EOF"}
    assert finished_call(ParsedCall("Write", {"content": command})).arguments == {
        "content": command
    }


def test_a_read_of_the_file_to_create_that_found_nothing_leaves_it_to_write() -> None:
    """The 1.5B read port.txt, which it was asked to create; opened to edit, it changed the
    port in config.ini instead."""
    request = after_reading(
        "Read config.ini and write the value of its port into a new file port.txt",
        "/w/config.ini",
    )
    missing = ToolCall("c2", "Read", '{"file_path": "/w/port.txt"}')
    request = replace(
        request,
        messages=(
            *request.messages,
            Message("assistant", "", tool_calls=(missing,)),
            Message("tool", "Error: File does not exist.", tool_call_id="c2"),
        ),
    )
    assert writing_opening(request, get_dialect("pythonic")) == (
        '[Write(file_path="/w/port.txt", content="'
    )


def test_the_edit_of_a_line_a_traceback_points_at_is_opened_at_its_replacement() -> None:
    """Opened at old_string, the 1.5B wrote "nam", which matches twice in greet.py."""
    read = ToolCall("c1", "Read", '{"file_path": "/w/greet.py"}')
    run = ToolCall("c2", "Bash", '{"command": "python3 test_greet.py"}')
    edit = ToolSpec(
        "Edit",
        "e",
        {
            "type": "object",
            "properties": {"file_path": STRING, "old_string": STRING, "new_string": STRING},
        },
    )
    traceback = (
        'Traceback (most recent call last):\n  File "/w/test_greet.py", line 3, in <module>\n'
        '  File "/w/greet.py", line 2, in greet\n    return "Hello, " + nam + "!"\n'
        "NameError: name 'nam' is not defined"
    )
    request = ChatRequest(
        model="m",
        messages=(
            Message(
                "user", "Primary working directory: /w\npython3 test_greet.py fails. Fix greet.py."
            ),
            Message("assistant", "", tool_calls=(run, read)),
            Message("tool", traceback, tool_call_id="c2"),
            Message(
                "tool",
                '1\tdef greet(name):\n2\t    return "Hello, " + nam + "!"\n',
                tool_call_id="c1",
            ),
        ),
        tools=(READ, WRITE, edit),
    )
    assert editing_opening(request, get_dialect("pythonic")) == (
        '[Edit(file_path="/w/greet.py", old_string="    return \\"Hello, \\" + nam + \\"!\\"", '
        'new_string="'
    )
