"""A file written whole that its kind cannot read (Python, JSON), or that the request asks to
hold a number and holds more, is re-asked once."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolshim.capabilities import Registry
from toolshim.dialects.interpret import ParsedCall
from toolshim.engine import Engine
from toolshim.engine.checks.file_syntax import rewritten, unreadable, written_file
from toolshim.engine.checks.number_content import number_asked
from toolshim.testing import FunctionUpstream
from toolshim.testing.tools import function_tool


def call(name: str, arguments: dict[str, Any]) -> ParsedCall:
    return ParsedCall(name, arguments, json.dumps(arguments))


@pytest.mark.parametrize(
    ("made", "written"),
    [
        (call("Write", {"file_path": "/w/a.py", "content": "x = 1\n"}), ("/w/a.py", "x = 1\n")),
        (
            call("exec_command", {"cmd": "cat > hello.py <<'EOF'\nprint('hi')\nEOF"}),
            ("hello.py", "print('hi')"),
        ),
        (
            call("Bash", {"command": 'cat > "my file.json" << END\n{"a": 1}\nEND\n'}),
            ("my file.json", '{"a": 1}'),
        ),
        (call("exec_command", {"cmd": "cat hello.py"}), None),
        (call("exec_command", {"cmd": "cat > a.py <<'EOF'\nx = 1\nEOF\npython3 a.py"}), None),
        (call("Read", {"file_path": "/w/a.py"}), None),
        (call("Write", {"file_path": "/w/a.py"}), None),
    ],
)
def test_what_a_call_writes_whole(made: ParsedCall, written: tuple[str, str] | None) -> None:
    assert written_file(made) == written


@pytest.mark.parametrize(
    ("path", "content", "readable"),
    [
        ("hello.py", 'print("Hello, World!")\n', True),
        ("hello.py", "Hello, World!", False),
        ("hello.py", "def f(:\n    pass", False),
        ("HELLO.PY", "import os\nos.remove('x')\n", True),  # compiled, never run
        ("data.json", '{"name": "tiny-widget"}', True),
        ("data.json", "{name: tiny-widget}", False),
        ("notes.txt", "anything at all {", True),
        ("app.js", "Hello, World!", True),  # a kind toolshim does not read
    ],
)
def test_a_file_of_a_kind_read_without_running_it(path: str, content: str, readable: bool) -> None:
    assert (unreadable(path, content) is None) is readable


SHELL = function_tool("exec_command", cmd="string")
ASK = "Create hello.py, a Python program that prints Hello, World!"
TEXT = "[exec_command(cmd=\"cat > hello.py <<'EOF'\\nHello, World!\\nEOF\")]"
PROGRAM = "[exec_command(cmd=\"cat > hello.py <<'EOF'\\nprint('Hello, World!')\\nEOF\")]"


async def served(replies: list[str]) -> tuple[str, list[dict[str, Any]]]:
    seen: list[dict[str, Any]] = []

    def model(body: dict[str, Any]) -> str:
        seen.append(body)
        return replies[min(len(seen), len(replies)) - 1]

    engine = Engine(FunctionUpstream(model), mode="force", dialect="pythonic", registry=Registry())
    completion = await engine.acomplete(
        {"model": "m", "messages": [{"role": "user", "content": ASK}], "tools": [SHELL]}
    )
    (made,) = completion.message.tool_calls
    return json.loads(made.arguments)["cmd"], seen


async def test_text_written_into_a_python_file_is_re_asked_once_with_why() -> None:
    command, seen = await served([TEXT, PROGRAM])
    assert command == "cat > hello.py <<'EOF'\nprint('Hello, World!')\nEOF"
    correction = seen[1]["messages"][-1]["content"]
    assert "hello.py is not valid Python (invalid syntax, line 1)" in correction


async def test_a_second_unreadable_file_stands() -> None:
    command, seen = await served([TEXT, TEXT])
    assert command == "cat > hello.py <<'EOF'\nHello, World!\nEOF"
    assert len(seen) == 2


@pytest.mark.parametrize(
    ("request_text", "asked"),
    [
        (
            "Count the lines in data.txt and write the number into a new file count.txt.",
            {"count.txt": "number"},
        ),
        ("numbers.txt has one number per line. Write their sum into sum.txt.", {"sum.txt": "sum"}),
        ("Write the number of lines of data.txt into out/count.txt", {"count.txt": "number"}),
        ("Save the line count of notes.md to lines.txt.", {"lines.txt": "count"}),
        ("Read config.ini and write the port into port.txt", {}),
    ],
)
def test_the_files_a_request_asks_to_hold_a_number(
    request_text: str, asked: dict[str, str]
) -> None:
    assert number_asked(request_text) == asked


COUNT = "Primary working directory: /w\nCount the lines in data.txt and write the number into count.txt."
WC = ("wc -l data.txt", "17 data.txt\n")


async def coding_turn(ask: str, replies: list[str]) -> tuple[str, list[dict[str, Any]]]:
    """A Codex-like turn (a tool left out makes it a coding agent's) after ``wc -l`` ran."""
    seen: list[dict[str, Any]] = []

    def model(body: dict[str, Any]) -> str:
        seen.append(body)
        return replies[min(len(seen), len(replies)) - 1]

    plan = {"type": "function", "function": {"name": "update_plan", "parameters": {}}}
    ran = {"name": "exec_command", "arguments": json.dumps({"cmd": WC[0]})}
    engine = Engine(
        FunctionUpstream(model),
        mode="force",
        dialect="pythonic",
        registry=Registry(),
        offer_tools="coding",
    )
    completion = await engine.acomplete(
        {
            "model": "m",
            "messages": [
                {"role": "user", "content": ask},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "c1", "type": "function", "function": ran}],
                },
                {"role": "tool", "tool_call_id": "c1", "content": WC[1]},
            ],
            "tools": [SHELL, plan],
        }
    )
    (made,) = completion.message.tool_calls
    return json.loads(made.arguments)["cmd"], seen


def write(content: str) -> str:
    return f"[exec_command(cmd=\"cat > count.txt <<'EOF'\\n{content}\\nEOF\")]"


async def test_a_number_asked_for_written_with_more_is_written_as_its_one_number() -> None:
    command, seen = await coding_turn(COUNT, [write("17 data.txt")])
    assert command == "cat > count.txt <<'EOF'\n17\nEOF" and len(seen) == 1


async def test_a_number_asked_for_written_with_several_numbers_is_re_asked_once() -> None:
    command, seen = await coding_turn(COUNT, [write("47791     1"), write("17")])
    assert command == "cat > count.txt <<'EOF'\n17\nEOF"
    correction = seen[1]["messages"][-1]["content"]
    assert "the number alone in count.txt, and '47791     1' is not one number" in correction


async def test_a_second_reply_with_several_numbers_stands() -> None:
    command, seen = await coding_turn(COUNT, [write("47791     1")])
    assert command == "cat > count.txt <<'EOF'\n47791     1\nEOF" and len(seen) == 2


async def test_a_number_written_alone_is_not_re_asked() -> None:
    command, seen = await coding_turn(COUNT, [write("17")])
    assert command == "cat > count.txt <<'EOF'\n17\nEOF" and len(seen) == 1


async def test_a_file_not_asked_to_hold_a_number_is_not_re_asked() -> None:
    ask = "Primary working directory: /w\nWrite the output of wc -l data.txt into count.txt."
    command, seen = await coding_turn(ask, [write("17 data.txt")])
    assert command == "cat > count.txt <<'EOF'\n17 data.txt\nEOF" and len(seen) == 1


@pytest.mark.parametrize(
    ("made", "content", "now"),
    [
        (
            call("exec_command", {"cmd": "cat > c.txt <<'EOF'\n17 data.txt\nEOF"}),
            "17\n",
            {"cmd": "cat > c.txt <<'EOF'\n17\nEOF"},
        ),
        (
            call("Write", {"file_path": "/w/c.txt", "content": "17 data.txt"}),
            "17\n",
            {"file_path": "/w/c.txt", "content": "17\n"},
        ),
        (call("exec_command", {"cmd": "wc -l data.txt > c.txt"}), "17\n", None),
    ],
)
def test_a_written_file_rewritten(
    made: ParsedCall, content: str, now: dict[str, str] | None
) -> None:
    mended = rewritten(made, content)
    assert (mended.arguments if mended else None) == now
