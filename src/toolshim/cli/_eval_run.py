"""What every ``toolshim eval`` suite does around its runner: the records a report already
holds (``--resume``), and the run itself with its progress, one line a record where no bar is
shown, the report written every 20 seconds and at the end, however the run ends."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

__all__ = ["WRITE_EVERY", "RunLog", "resumed"]

R = TypeVar("R")

WRITE_EVERY = 20.0
"""Seconds between two writes of the report while a run goes on."""


def resumed(
    output: Path,
    resume: bool,
    load: Callable[[Path], tuple[dict[str, Any], list[R]]],
    keep: Callable[[R], bool],
) -> tuple[dict[str, Any], list[R]]:
    """The report's metadata and the records of it to keep (``keep``) when resuming from
    ``output``; nothing when not resuming or when there is no report yet."""
    if not (resume and output.is_file()):
        return {}, []
    previous, records = load(output)
    return previous, [r for r in records if keep(r)]


@dataclass(frozen=True)
class RunLog(Generic[R]):
    """How a suite's run shows on ``console``: a line ``[n/total] `` + ``line(record)`` a
    record, and with a ``bar`` (its name, its description of a record) a progress bar, the
    lines then only where the console is not a terminal (a log file)."""

    console: Console
    line: Callable[[R], str]
    bar: tuple[str, Callable[[R], str]] | None = None

    async def run(
        self,
        run: Callable[..., Awaitable[Any]],
        records: list[R],
        total: int,
        meta: dict[str, Any],
        write: Callable[[dict[str, Any], list[R]], object],
        wall_before: float = 0.0,
    ) -> None:
        """Await ``run(on_record=…)``: each record joins ``records`` and is shown, and the
        report is written (``write(meta, records)``) every :data:`WRITE_EVERY` seconds and at
        the end, however the run ends, with ``meta``'s ``finished`` and ``wall_s``
        (``wall_before`` seconds of earlier runs added)."""
        console, bar = self.console, self.bar
        started = last_write = time.monotonic()
        finished = 0
        progress = (
            Progress(
                TextColumn("[progress.description]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=console,
            )
            if bar is not None
            else None
        )
        task = progress.add_task(bar[0], total=total) if progress is not None and bar else None

        def on_record(record: R) -> None:
            nonlocal last_write, finished
            records.append(record)
            finished += 1
            if progress is not None and bar is not None and task is not None:
                progress.update(task, advance=1, description=bar[1](record))
            if progress is None or not console.is_terminal:
                line = f"[{finished}/{total}] {self.line(record)}"
                console.print(line, highlight=False, markup=False)
            if time.monotonic() - last_write > WRITE_EVERY:
                write(meta, records)
                last_write = time.monotonic()

        try:
            if progress is None:
                await run(on_record=on_record)
            else:
                with progress:
                    await run(on_record=on_record)
        finally:
            meta["finished"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
            meta["wall_s"] = round(wall_before + time.monotonic() - started, 1)
            write(meta, records)
