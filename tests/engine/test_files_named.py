"""The file names a request mentions, and which of them no call has touched."""

from __future__ import annotations

import json

import pytest

from toolshim.engine.files_named import files_named, untouched_files, untouched_since_request
from toolshim.types import Message, ToolCall


@pytest.mark.parametrize(
    ("text", "names"),
    [
        (
            "python3 test_calc.py fails. Fix the bug in calc.py so that the test passes.",
            ["test_calc.py", "calc.py"],
        ),
        (
            "Change the version from 1.2.3 to 1.3.0 in both VERSION and setup.cfg.",
            ["VERSION", "setup.cfg"],
        ),
        ("Write the name field of package.json into name.txt.", ["package.json", "name.txt"]),
        ("Edit src/app.ts and ./run.sh, then .env", ["src/app.ts", "./run.sh", ".env"]),
        ("See https://example.com/a.html, mail a@b.io, e.g. v2.0 or 3.14 or i.e. nothing", []),
        ("How many lines of app.log contain ERROR?", ["app.log"]),
        ("<system-reminder>Mind CLAUDE.md</system-reminder> fix main.go", ["main.go"]),
    ],
)
def test_files_named(text: str, names: list[str]) -> None:
    assert files_named(text) == names


def test_a_file_is_touched_when_a_calls_arguments_name_it_whole() -> None:
    request = "python3 test_calc.py fails. Fix the bug in calc.py."
    read_test = json.dumps({"file_path": "/w/test_calc.py"})
    assert untouched_files(request, [read_test]) == ["calc.py"]
    assert untouched_files(request, [read_test, json.dumps({"command": "cat calc.py"})]) == []
    assert untouched_files(request, [json.dumps({"file_path": "/w/calc.py.bak"})]) == [
        "test_calc.py",
        "calc.py",
    ]


def test_untouched_since_the_last_request() -> None:
    messages = [
        Message("user", "Fix a.py"),
        Message("assistant", "", tool_calls=(ToolCall("c1", "Read", '{"file_path": "a.py"}'),)),
        Message("tool", "x = 1", tool_call_id="c1"),
        Message("user", "Now fix b.py and a.py"),
    ]
    assert untouched_since_request(messages) == ["b.py", "a.py"]
    assert untouched_since_request(messages[:3]) == []
