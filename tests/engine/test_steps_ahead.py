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


def test_a_later_command_that_takes_an_earlier_outcome_at_run_time_waits() -> None:
    said = "how many lines of app.log contain error? write the number into a new file errors.txt."
    for later in ("echo $? > errors.txt", "echo $(grep -c ERROR app.log) > errors.txt"):
        plan = [
            ParsedCall("exec_command", {"cmd": "grep -c ERROR app.log"}),
            ParsedCall("exec_command", {"cmd": later}),
        ]
        assert names(calls_ready(plan, said)) == ["exec_command"], later
    backticks = [
        ParsedCall("exec_command", {"cmd": "wc -l data.txt"}),
        ParsedCall("exec_command", {"cmd": "echo `wc -l < data.txt` > count.txt"}),
    ]
    assert len(calls_ready(backticks, "count the lines in data.txt")) == 1
    # After a read (no command to take the outcome of), a command computing its own goes.
    summed = [
        ParsedCall("Read", {"file_path": "numbers.txt"}),
        ParsedCall("Bash", {"command": "echo $(awk '{s+=$1} END {print s}' numbers.txt) > s.txt"}),
    ]
    assert len(calls_ready(summed, "numbers.txt: write their sum into s.txt")) == 2
    # A first call computes at run time as it likes; a later one that does not goes with it.
    alone = [ParsedCall("exec_command", {"cmd": "echo $(wc -l < data.txt) > count.txt"})]
    assert len(calls_ready(alone, "")) == 1
    both = [
        ParsedCall("exec_command", {"cmd": "grep -c ERROR app.log > errors.txt"}),
        ParsedCall("exec_command", {"cmd": "cat errors.txt"}),
    ]
    assert len(calls_ready(both, said)) == 2


def test_a_command_naming_no_file_after_a_read_waits() -> None:
    """The 1.5B planned ``Read(data.txt)``, ``Bash("wc -l")``: its count of nothing was 0."""
    plan = [
        ParsedCall("Read", {"file_path": "/w/data.txt"}),
        ParsedCall("Bash", {"command": "wc -l"}),
    ]
    assert names(calls_ready(plan, "count the lines in data.txt")) == ["Read"]
    named = [
        ParsedCall("Read", {"file_path": "/w/data.txt"}),
        ParsedCall("Bash", {"command": "wc -l data.txt"}),
    ]
    assert names(calls_ready(named, "count the lines in data.txt")) == ["Read", "Bash"]
