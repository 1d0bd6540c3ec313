"""The coding-agent suite's tasks: files laid out in a fresh directory, what to ask a coding
agent (Claude Code, Codex CLI), and a check of the directory afterwards.

Each task is judged on what the agent left behind (a file's content, a test that now passes),
not on what it said, except ``report`` tasks, whose point is the answer (a script's output),
and ``no_tool`` tasks, which must answer without touching the directory. Kinds:

* ``write`` — create a file with given content;
* ``read_write`` — read a value from a file, write it into another (a dependent step);
* ``fix`` — fix a one-line bug so that a given test passes;
* ``count`` — count or grep, write the result into a file;
* ``edit_two`` — edit two files consistently;
* ``report`` — run a script and report its output;
* ``no_tool`` — a question no tool is needed for.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

__all__ = ["CODING_KINDS", "CODING_TASKS", "CodingTask", "Verdict", "load_coding_tasks"]

Kind = Literal["write", "read_write", "fix", "count", "edit_two", "report", "no_tool"]
CODING_KINDS: tuple[Kind, ...] = (
    "write",
    "read_write",
    "fix",
    "count",
    "edit_two",
    "report",
    "no_tool",
)


@dataclass(frozen=True, slots=True)
class Verdict:
    """A task's outcome: passed, and in a few words why not."""

    passed: bool
    reason: str = ""


Check = Callable[[Path, str], Verdict]
"""Judges a task from its directory after the run and the agent's final answer."""


@dataclass(frozen=True)
class CodingTask:
    id: str
    kind: Kind
    prompt: str
    check: Check
    files: Mapping[str, str] = field(default_factory=dict)
    """Files laid out before the run (relative path → content)."""

    def prepare(self, folder: Path) -> None:
        """Lay out the task's files in ``folder`` (an empty directory)."""
        for name, content in self.files.items():
            path = folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8")

    def judge(self, folder: Path, answer: str) -> Verdict:
        try:
            return self.check(folder, answer)
        except Exception as exc:  # a check must never crash the suite
            return Verdict(False, f"check failed: {type(exc).__name__}: {exc}")


# -- checks ---------------------------------------------------------------------------------


def _read(folder: Path, name: str) -> str | None:
    path = folder / name
    return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None


def file_is(name: str, expected: str) -> Check:
    """``name`` holds ``expected`` (surrounding white space and one pair of quotes aside)."""

    def check(folder: Path, answer: str) -> Verdict:
        text = _read(folder, name)
        if text is None:
            return Verdict(False, f"{name} was not written")
        value = text.strip().strip("\"'").strip()
        if value == expected:
            return Verdict(True)
        return Verdict(False, f"{name} holds {text[:80]!r}, not {expected!r}")

    return check


def command_passes(argv: list[str], expect: str | None = None) -> Check:
    """``argv`` (run in the folder, ``python`` being this interpreter) exits 0, printing
    ``expect`` when given."""

    def check(folder: Path, answer: str) -> Verdict:
        command = [sys.executable if a == "python" else a for a in argv]
        run = subprocess.run(
            command, cwd=folder, capture_output=True, text=True, timeout=60, check=False
        )
        if run.returncode != 0:
            tail = (run.stderr or run.stdout).strip().splitlines()[-1:] or [""]
            return Verdict(False, f"{' '.join(argv)} exits {run.returncode}: {tail[0][:120]}")
        if expect is not None and expect not in run.stdout:
            return Verdict(False, f"{' '.join(argv)} prints {run.stdout.strip()[:80]!r}")
        return Verdict(True)

    return check


def all_of(*checks: Check) -> Check:
    def check(folder: Path, answer: str) -> Verdict:
        for one in checks:
            verdict = one(folder, answer)
            if not verdict.passed:
                return verdict
        return Verdict(True)

    return check


def unchanged(files: Mapping[str, str]) -> Check:
    """The folder holds exactly ``files``, as laid out."""

    def check(folder: Path, answer: str) -> Verdict:
        present = {
            str(p.relative_to(folder))
            for p in folder.rglob("*")
            if p.is_file() and not _hidden(p.relative_to(folder))
        }
        extra = sorted(present - set(files))
        if extra:
            return Verdict(False, f"files written: {', '.join(extra)[:120]}")
        for name, content in files.items():
            if _read(folder, name) != content:
                return Verdict(False, f"{name} was changed")
        return Verdict(True)

    return check


def _hidden(relative: Path) -> bool:
    return any(part.startswith(".") for part in relative.parts)


def lines_are(name: str, expected: list[str]) -> Check:
    """``name``'s non-blank lines are ``expected`` (white space at their ends aside)."""

    def check(folder: Path, answer: str) -> Verdict:
        text = _read(folder, name)
        lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
        if lines == expected:
            return Verdict(True)
        return Verdict(False, f"{name} holds {(text or '')[:80]!r}")

    return check


def kept(name: str, content: str) -> Check:
    """``name`` still holds ``content`` (a test the agent must make pass, not rewrite)."""

    def check(folder: Path, answer: str) -> Verdict:
        if _read(folder, name) == content:
            return Verdict(True)
        return Verdict(False, f"{name} was changed")

    return check


def answer_has(*patterns: str) -> Check:
    def check(folder: Path, answer: str) -> Verdict:
        for pattern in patterns:
            if not re.search(pattern, answer, re.IGNORECASE):
                return Verdict(False, f"the answer lacks {pattern!r}: {answer.strip()[:100]!r}")
        return Verdict(True)

    return check


# -- the tasks -------------------------------------------------------------------------------

_CALC = "def add(a, b):\n    return a - b\n"
_TEST_CALC = (
    "from calc import add\n\n"
    "assert add(2, 3) == 5, add(2, 3)\n"
    "assert add(-1, 1) == 0\n"
    'print("ok")\n'
)
_GREET = 'def greet(name):\n    return "Hello, " + nam + "!"\n'
_TEST_GREET = 'from greet import greet\n\nassert greet("Ada") == "Hello, Ada!"\nprint("ok")\n'
_DATA = "".join(f"record {i}: value {i * 7 % 11}\n" for i in range(1, 18))
_LOG = (
    "2026-11-01 10:00:01 INFO start\n"
    "2026-11-01 10:00:02 ERROR disk full\n"
    "2026-11-01 10:00:03 INFO retry\n"
    "2026-11-01 10:00:04 ERROR disk full\n"
    "2026-11-01 10:00:05 WARN slow\n"
    "2026-11-01 10:00:06 INFO done\n"
    "2026-11-01 10:00:07 ERROR timeout\n"
)
_NUMBERS = "12\n7\n30\n1\n"
_QUESTION_FILES = {"README.md": "# scratch\n"}

CODING_TASKS: tuple[CodingTask, ...] = (
    CodingTask(
        "write-greeting",
        "write",
        "Create a file named greeting.txt that contains exactly the text: hello from toolshim",
        file_is("greeting.txt", "hello from toolshim"),
    ),
    CodingTask(
        "write-python",
        "write",
        "Create a Python script hello.py that prints exactly: Hello, World!",
        command_passes(["python", "hello.py"], "Hello, World!"),
    ),
    CodingTask(
        "read-port",
        "read_write",
        "Read config.ini and write the value of its port setting into a new file port.txt "
        "(only the number).",
        file_is("port.txt", "8421"),
        {"config.ini": "[server]\nhost = 127.0.0.1\nport = 8421\nworkers = 3\n"},
    ),
    CodingTask(
        "read-json-name",
        "read_write",
        "Write the value of the name field of package.json into a new file name.txt.",
        file_is("name.txt", "tiny-widget"),
        {
            "package.json": '{\n  "name": "tiny-widget",\n  "version": "0.4.1",\n  "private": true\n}\n'
        },
    ),
    CodingTask(
        "fix-add",
        "fix",
        "python3 test_calc.py fails. Fix the bug in calc.py so that the test passes.",
        all_of(command_passes(["python", "test_calc.py"], "ok"), kept("test_calc.py", _TEST_CALC)),
        {"calc.py": _CALC, "test_calc.py": _TEST_CALC},
    ),
    CodingTask(
        "fix-name",
        "fix",
        "python3 test_greet.py fails with a NameError. Fix greet.py so that the test passes.",
        all_of(
            command_passes(["python", "test_greet.py"], "ok"), kept("test_greet.py", _TEST_GREET)
        ),
        {"greet.py": _GREET, "test_greet.py": _TEST_GREET},
    ),
    CodingTask(
        "count-lines",
        "count",
        "Count the lines in data.txt and write the number into a new file count.txt.",
        file_is("count.txt", "17"),
        {"data.txt": _DATA},
    ),
    CodingTask(
        "grep-errors",
        "count",
        "How many lines of app.log contain ERROR? Write the number into a new file errors.txt.",
        file_is("errors.txt", "3"),
        {"app.log": _LOG},
    ),
    CodingTask(
        "sum-numbers",
        "count",
        "numbers.txt has one number per line. Write their sum into a new file sum.txt.",
        file_is("sum.txt", "50"),
        {"numbers.txt": _NUMBERS},
    ),
    CodingTask(
        "bump-version",
        "edit_two",
        "Change the version from 1.2.3 to 1.3.0 in both VERSION and setup.cfg.",
        all_of(
            file_is("VERSION", "1.3.0"),
            lines_are("setup.cfg", ["[metadata]", "name = widget", "version = 1.3.0"]),
        ),
        {"VERSION": "1.2.3\n", "setup.cfg": "[metadata]\nname = widget\nversion = 1.2.3\n"},
    ),
    CodingTask(
        "run-script",
        "report",
        "Run the script compute.py with python3 and tell me the number it prints.",
        answer_has(r"35350"),
        {"compute.py": "total = sum(range(1, 101)) * 7\nprint(total)\n"},
    ),
    CodingTask(
        "no-tool-capital",
        "no_tool",
        "What is the capital of France? Answer in one word.",
        all_of(answer_has(r"paris"), unchanged(_QUESTION_FILES)),
        _QUESTION_FILES,
    ),
)


def load_coding_tasks(ids: list[str] | None = None, limit: int | None = None) -> list[CodingTask]:
    """The suite's tasks, or those named by ``ids`` (ValueError naming an unknown one), at most
    ``limit`` of them."""
    tasks = list(CODING_TASKS)
    if ids:
        known = {t.id: t for t in tasks}
        unknown = [i for i in ids if i not in known]
        if unknown:
            raise ValueError(
                f"unknown coding task(s) {', '.join(map(repr, unknown))}; known: {', '.join(known)}"
            )
        tasks = [known[i] for i in ids]
    return tasks[:limit] if limit else tasks
