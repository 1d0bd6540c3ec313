"""Which of a coding agent's planned calls go out with its first: those that need no result."""

from __future__ import annotations

from toolshim.dialects.interpret import ParsedCall
from toolshim.engine.steps_ahead import calls_ready


def names(calls: list[ParsedCall]) -> list[str]:
    return [c.name for c in calls]


def test_a_shell_command_needs_only_its_numbers_said() -> None:
    said = "numbers.txt has one number per line. write their sum into a new file sum.txt."
    plan = [
        ParsedCall("Read", {"file_path": "numbers.txt"}),
        ParsedCall("Bash", {"command": "awk '{s += $1} END {print s}' numbers.txt > sum.txt"}),
    ]
    assert names(calls_ready(plan, said)) == ["Read", "Bash"]
    made_up = [
        ParsedCall("Read", {"file_path": "config.ini"}),
        ParsedCall("Bash", {"command": "echo 8421 > port.txt"}),
    ]
    assert names(calls_ready(made_up, "read config.ini and write its port into port.txt")) == [
        "Read"
    ]


def test_a_write_of_words_nobody_said_waits_and_so_does_everything_after_it() -> None:
    said = "change the version from 1.2.3 to 1.3.0 in version and setup.cfg"
    plan = [
        ParsedCall("Read", {"file_path": "VERSION"}),
        ParsedCall("Edit", {"file_path": "VERSION", "old_string": "1.2.3", "new_string": "1.3.0"}),
        ParsedCall("Write", {"file_path": "NOTES", "content": "released"}),
        ParsedCall("Read", {"file_path": "setup.cfg"}),
    ]
    assert names(calls_ready(plan, said)) == ["Read", "Edit"]
