"""Before a coding agent's turn ends, the file a computed command wrote is looked at."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolshim.engine.look_written import look_call
from toolshim.types import Message, ToolCall

ASK = "Read config.ini and write the value of its port setting into a new file port.txt."


def history(*commands: str, ask: str = ASK, key: str = "cmd") -> tuple[Message, ...]:
    messages: list[Message] = [Message("user", ask)]
    for i, command in enumerate(commands):
        arguments = json.dumps({key: command, "workdir": "/w"})
        messages += [
            Message("assistant", "", tool_calls=(ToolCall(f"c{i}", "exec_command", arguments),)),
            Message("tool", "Process exited with code 0\nOutput:\n", tool_call_id=f"c{i}"),
        ]
    return tuple(messages)


def test_a_file_a_pipeline_wrote_is_looked_at_in_the_same_tool() -> None:
    call = look_call(history("grep port config.ini | awk '{print $2}' > port.txt"))
    assert call is not None and call.name == "exec_command"
    assert call.arguments == {"cmd": "head -n 40 config.ini port.txt", "workdir": "/w"}
    alone = look_call(history("python3 -c 'print(8421)' > port.txt"))
    assert alone is not None and alone.arguments["cmd"] == "cat port.txt"


@pytest.mark.parametrize(
    "commands",
    [
        # A literal write shows what it wrote.
        ("echo 8421 > port.txt",),
        ("cat > /w/port.txt <<'EOF'\n8421\nEOF",),
        # Looked at already, or written again since.
        ("grep port config.ini | cut -d= -f2 > port.txt", "cat port.txt"),
        ("grep port config.ini | awk '{print $2}' > port.txt", "echo 8421 > port.txt"),
        # No file the request names.
        ("grep port config.ini > /tmp/scratch.txt",),
        ("python3 test_calc.py 2>&1",),
    ],
)
def test_nothing_to_look_at(commands: tuple[str, ...]) -> None:
    assert look_call(history(*commands)) is None


def test_a_command_given_as_a_list_is_looked_at_as_a_list() -> None:
    messages = list(history())
    arguments: dict[str, Any] = {"command": ["bash", "-lc", "wc -l < data.txt > count.txt"]}
    messages.append(
        Message("assistant", "", tool_calls=(ToolCall("c9", "shell", json.dumps(arguments)),))
    )
    messages.append(Message("tool", "", tool_call_id="c9"))
    messages[0] = Message("user", "Count the lines of data.txt into a new file count.txt")
    call = look_call(messages)
    assert call is not None and call.arguments == {
        "command": ["bash", "-lc", "head -n 40 data.txt count.txt"]
    }
