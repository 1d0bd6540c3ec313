"""The run loop every ``toolshim eval`` suite shares (:class:`toolshim.cli._eval_run.RunLog`):
a line a record, the report written at the end however the run ends, ``--resume``'s records."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from toolshim.cli._eval_run import RunLog, resumed


def log_console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=200), out  # not a terminal: a log file


@pytest.mark.parametrize("bar", [None, ("eval", str)])
async def test_each_record_is_a_line_and_the_report_is_written_at_the_end(
    bar: tuple[str, Callable[[str], str]] | None,
) -> None:
    console, out = log_console()
    written: list[tuple[dict[str, Any], list[str]]] = []

    async def run(*, on_record: Callable[[str], None]) -> None:
        for record in ("a", "b"):
            on_record(record)

    records: list[str] = []
    meta: dict[str, Any] = {"model": "m"}
    log = RunLog(console, lambda r: f"{r} done", bar=bar)

    def write(meta: dict[str, Any], records: list[str]) -> None:
        written.append((dict(meta), list(records)))

    await log.run(run, records, 2, meta, write, wall_before=100.0)
    assert records == ["a", "b"]
    lines = [line for line in out.getvalue().splitlines() if line.startswith("[")]
    assert lines == ["[1/2] a done", "[2/2] b done"]
    (final_meta, final_records), *_ = written[::-1]
    assert final_records == ["a", "b"]
    assert final_meta["model"] == "m" and "finished" in final_meta
    assert final_meta["wall_s"] >= 100.0


async def test_the_report_is_written_when_the_run_is_interrupted() -> None:
    console, _ = log_console()
    written: list[list[str]] = []

    async def run(*, on_record: Callable[[str], None]) -> None:
        on_record("a")
        raise KeyboardInterrupt

    meta: dict[str, Any] = {}
    with pytest.raises(KeyboardInterrupt):
        await RunLog(console, str).run(
            run, [], 3, meta, lambda meta, records: written.append(list(records))
        )
    assert written == [["a"]]
    assert "wall_s" in meta


def test_resuming_keeps_the_wanted_records_of_a_report(tmp_path: Path) -> None:
    report = tmp_path / "report.json"

    def load(path: Path) -> tuple[dict[str, Any], list[str]]:
        data = json.loads(path.read_text())
        return data["meta"], data["cases"]

    assert resumed(report, True, load, lambda r: True) == ({}, [])  # no report yet
    report.write_text(json.dumps({"meta": {"wall_s": 3}, "cases": ["a", "b", "c"]}))
    assert resumed(report, False, load, lambda r: True) == ({}, [])
    assert resumed(report, True, load, lambda r: r != "b") == ({"wall_s": 3}, ["a", "c"])
