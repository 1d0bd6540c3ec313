"""Before a coding agent's turn ends, the file a computed command wrote is looked at."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolshim.engine.look_written import look_call, looked_content
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


def looked(result: str, look: str = "cat name.txt") -> tuple[Message, ...]:
    ask = "Write the value of the name field of package.json into a new file name.txt."
    messages = history("grep name package.json | awk '{print $2}' > name.txt", ask=ask)
    call = ToolCall("c9", "exec_command", json.dumps({"cmd": look}))
    return (
        *messages,
        Message("assistant", "", tool_calls=(call,)),
        Message("tool", result, tool_call_id="c9"),
    )


def test_what_the_look_shows_the_file_holds() -> None:
    shown = looked('Process exited with code 0\nOutput:\n"tiny-widget",\n')
    assert looked_content(shown) == ("name.txt", '"tiny-widget",')  # as the command wrote it
    both = looked(
        '==> package.json <==\n{\n  "name": "tiny-widget"\n}\n\n==> name.txt <==\n"tiny-widget",\n',
        look="head -n 40 package.json name.txt",
    )
    assert looked_content(both) == ("name.txt", '"tiny-widget",')
    # Not a look at the written file, or something came after it.
    assert looked_content(looked("x", look="cat package.json")) is None
    assert looked_content((*shown, Message("user", "thanks"))) is None
    assert looked_content(history("grep name package.json > name.txt")) is None


def test_a_write_with_cat_is_no_look() -> None:
    """toolshim's own rewrite (``cat > name.txt <<EOF``) read as a look was rewritten again."""
    rewrite = "cat > name.txt <<'TOOLSHIM_EOF'\ntiny-widget\nTOOLSHIM_EOF"
    assert looked_content(looked("Process exited with code 0\nOutput:\n", look=rewrite)) is None
