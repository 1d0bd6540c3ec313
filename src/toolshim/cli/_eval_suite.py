"""What the BFCL, multi-turn and agent suites of ``toolshim eval`` share around their runner
(they import it as ``suite``): the options they all take, the served upstream and the client
to it, the report's common metadata, resuming, the run of what is left to do, the tables, and
the one way a toolshim error ends the command."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import (
    AsyncIterator,
    Callable,
    Coroutine,
    Iterable,
    Iterator,
    Sequence,
    Sized,
)
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

import typer
from rich.console import Console
from rich.text import Text

from toolshim.capabilities.registry import Registry
from toolshim.cli._eval_run import RunLog
from toolshim.cli._eval_run import resumed as resumed_from
from toolshim.cli._eval_setup import (
    build_configs,
    err_console,
    first_model,
    machine,
    sigterm_as_interrupt,
    upstream_for_eval,
)
from toolshim.errors import ConfigError, ToolshimError
from toolshim.evaluation.pick import engine_settings
from toolshim.evaluation.runner import EvalConfig, SuiteRunner, SuiteSettings
from toolshim.upstreams.openai_http import DEFAULT_TIMEOUT, OpenAIUpstream

__all__ = [
    "Options",
    "ReportView",
    "Resumed",
    "Served",
    "client",
    "errors",
    "meta",
    "on_served",
    "resumed",
    "run_pending",
    "runner_settings",
]

T = TypeVar("T")
R = TypeVar("R")
S = TypeVar("S", bound=Sized)
C = TypeVar("C", bound="_Record")


@dataclass(frozen=True, slots=True)
class Options:
    """The ``toolshim eval`` options the BFCL, multi-turn and agent suites all take."""

    upstream: str | None
    model: str | None
    model_file: Path | None
    local_model: str | None
    ctx_size: int | None
    threads: int | None
    api_key: str | None
    configs: list[str]
    modes: list[str]
    dialects: list[str]
    strategies: list[str]
    baselines: list[str]
    limit: int | None
    seed: int | None
    temperature: float
    max_tokens: int | None
    max_reasks: int
    parallel: int
    output: Path
    resume: bool
    report_only: bool
    markdown: bool

    def eval_configs(self, baselines: list[str]) -> list[EvalConfig]:
        """The configurations named, with ``baselines`` where none was named."""
        return build_configs(
            self.modes, self.dialects, self.strategies, self.configs, self.baselines or baselines
        )


class Served(NamedTuple):
    """The upstream a suite runs against, as :func:`upstream_for_eval` yields it."""

    base_url: str
    model: str | None
    described: dict[str, Any]
    facts: Callable[[Registry], object] | None


def runner_settings(options: Options, served: Served) -> SuiteSettings:
    """What every suite's runner takes from the options and the upstream served."""
    return SuiteSettings(
        temperature=options.temperature, max_reasks=options.max_reasks, served_facts=served.facts
    )


@contextlib.contextmanager
def errors(code: int | None = None) -> Iterator[None]:
    """A toolshim error ends the command with its message and exit ``code`` (None: 2 for a
    configuration error, 1 for any other)."""
    try:
        yield
    except ToolshimError as exc:
        if code is None:
            code = 2 if isinstance(exc, ConfigError) else 1
        err_console.print(Text.assemble(("error: ", "red"), exc.message))
        raise typer.Exit(code) from None


def on_served(
    options: Options,
    run: Callable[[Served], Coroutine[Any, Any, T]],
    ctx_size: int | None,
) -> T:
    """``run`` on the upstream of ``options`` (the embedded model started for it, with
    ``ctx_size`` a slot and a slot a parallel run), SIGTERM stopping it as Ctrl-C does."""
    with (
        sigterm_as_interrupt(),
        upstream_for_eval(
            options.upstream,
            options.model_file,
            options.local_model,
            ctx_size,
            options.threads,
            options.parallel,
        ) as served,
    ):
        return asyncio.run(run(Served(*served)))


@contextlib.asynccontextmanager
async def client(
    served: Served,
    options: Options,
    *,
    budget: float = DEFAULT_TIMEOUT,
) -> AsyncIterator[tuple[OpenAIUpstream, str]]:
    """The client to ``served`` (its facts under the embedded model's stable key, its port
    changing every run), ``budget`` seconds for a read, and the model to ask: ``--model``,
    else the served one, else the upstream's first; closed at the end."""
    upstream = OpenAIUpstream(
        served.base_url,
        api_key=options.api_key,
        key=served.described.get("upstream_key"),
        timeout=budget,
    )
    try:
        yield upstream, options.model or served.model or await first_model(upstream)
    finally:
        await upstream.aclose()


def meta(
    served: Served, previous: dict[str, Any], runner: SuiteRunner[Any, Any], **fields: Any
) -> dict[str, Any]:
    """A report's metadata: what ``served`` says of itself, ``fields``, the runner's model,
    configurations and engine settings (with those of the ``previous`` report resumed), when
    it started (the resumed report's start) and on what machine."""
    model = runner.model
    return {
        **served.described,
        **fields,
        "model": model,
        "configs": list(
            dict.fromkeys([*previous.get("configs", []), *(c.label for c in runner.configs)])
        ),
        "settings": {
            **previous.get("settings", {}),
            **engine_settings(runner.engines, model),
        },
        "started": previous.get("started") or dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
    }


class _Record(Protocol):
    @property
    def config(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Resumed(Generic[C]):
    """What a report continued with ``--resume`` already holds: its metadata (``previous``)
    and the records of the items still asked for, each record's item named by ``item_of``."""

    previous: dict[str, Any]
    records: list[C]
    item_of: Callable[[C], str]

    @property
    def done(self) -> set[tuple[str, str]]:
        """The (item, configuration) runs the records hold."""
        return {(self.item_of(r), r.config) for r in self.records}


def resumed(
    options: Options,
    load: Callable[[Path], tuple[dict[str, Any], list[C]]],
    items: Iterable[Any],
    item_of: Callable[[C], str],
) -> Resumed[C]:
    """What the report at ``--output`` holds of ``items`` when ``--resume`` continues it
    (``item_of``: a record's item id); nothing otherwise."""
    wanted = {item.id for item in items}
    previous, records = resumed_from(
        options.output, options.resume, load, lambda r: item_of(r) in wanted
    )
    return Resumed(previous, records, item_of)


async def run_pending(
    runner: SuiteRunner[Any, C],
    items: Sequence[Any],
    resumed: Resumed[C],
    *,
    parallel: int,
    log: RunLog[C],
    meta: dict[str, Any],
    write: Callable[[dict[str, Any], list[C]], object],
    header: Callable[[int, int], str],
    wall_before: float = 0.0,
) -> None:
    """Run what the ``resumed`` records do not hold yet (they gather the new ones),
    ``parallel`` at a time, ``header(runs to do, runs done)`` said first, each
    record shown by ``log`` and the report written by ``write`` as the run goes; the runner
    (its engines) closed at the end, however the run ends."""
    try:
        done = resumed.done
        total = runner.pending(items, done)
        log.console.print(header(total, len(done)))
        run = partial(runner.run, items, skip=done, parallel=parallel)
        await log.run(run, resumed.records, total, meta, write, wall_before)
    finally:
        await runner.aclose()


@dataclass(frozen=True, slots=True)
class ReportView(Generic[R, S]):
    """How a suite's report is shown: its records ``summarize``d, the summaries ``render``ed
    (on a console, under a title), their Markdown table, and what is said when there are
    none yet (``nothing``)."""

    summarize: Callable[[list[R]], S]
    render: Callable[[S, Console, str], object]
    as_markdown: Callable[[S], str]
    nothing: str

    def __call__(
        self,
        records: list[R],
        console: Console,
        *,
        markdown: bool,
        title: str,
        nothing_on: Console | None = None,
    ) -> S | None:
        """Show ``records`` on ``console`` (with their Markdown table when asked); their
        summaries, or None (``nothing`` said on ``nothing_on``) when there are none yet."""
        summaries = self.summarize(records)
        if not summaries:
            (nothing_on or console).print(self.nothing)
            return None
        self.render(summaries, console, title)
        if markdown:
            console.print(
                self.as_markdown(summaries), markup=False, highlight=False, soft_wrap=True
            )
        return summaries
