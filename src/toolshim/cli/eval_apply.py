"""``toolshim eval … --apply``: pick the best configuration from the BFCL and agent reports and store it (source ``eval``)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from toolshim.capabilities.facts import Source, Support
from toolshim.cli._common import open_registry
from toolshim.cli.eval_agent import DEFAULT_AGENT_OUTPUT
from toolshim.errors import ToolshimError
from toolshim.evaluation import load_report
from toolshim.evaluation.agent_report import load_agent_report
from toolshim.evaluation.pick import LOOP_BAR, Pick, Report, pick_configuration

__all__ = ["DEFAULT_AGENT_OUTPUT", "DEFAULT_BFCL_OUTPUT", "apply_eval", "show_pick"]

DEFAULT_BFCL_OUTPUT = Path("toolshim-eval.json")

out = Console()
err = Console(stderr=True)


def _paths(suite: str, output: Path, other: Path | None) -> tuple[Path, Path, bool]:
    """(BFCL report, agent report, whether the other one was named explicitly)."""
    if suite == "agent":
        agent = DEFAULT_AGENT_OUTPUT if output == DEFAULT_BFCL_OUTPUT else output
        return other or DEFAULT_BFCL_OUTPUT, agent, other is not None
    return output, other or DEFAULT_AGENT_OUTPUT, other is not None


def _load(path: Path, agent: bool, required: bool) -> Report | None:
    if not path.is_file() and not required:
        return None
    return load_agent_report(path) if agent else load_report(path)


def apply_eval(
    *,
    suite: str,
    output: Path,
    other_report: Path | None,
    registry: str | None,
    one_suite: bool,
) -> Pick:
    """Pick from the suite's report at ``output`` and the other suite's report, print the
    scores side by side, store the pick in ``registry`` (source ``eval``); exit 1 with a
    message when there is nothing to judge on."""
    bfcl_path, agent_path, named = _paths(suite, output, other_report)
    try:
        bfcl = _load(bfcl_path, agent=False, required=suite == "bfcl" or named)
        agent = _load(agent_path, agent=True, required=suite == "agent" or named)
        pick = pick_configuration(
            bfcl,
            agent,
            names=(
                str(bfcl_path) if bfcl else f"BFCL report ({bfcl_path} not found)",
                str(agent_path) if agent else f"agent report ({agent_path} not found)",
            ),
            allow_one_suite=one_suite,
        )
        show_pick(pick, out)
        with open_registry(registry, err) as store:
            for name, value in pick.facts().items():
                store.learn(pick.key, pick.model, name, value, Source.EVAL, detail=pick.detail())
            store.flush()  # "stored" is said only once the store has it
            standing = store.facts(pick.key, pick.model)
            location = store.location
    except ToolshimError as exc:
        err.print(Text.assemble(("error: ", "red"), exc.message, " (nothing stored)"))
        raise typer.Exit(1) from None
    settled = ", ".join(f"{k}={v}" for k, v in pick.facts().items())
    out.print(
        f"Stored for {pick.model} at {pick.key} (source eval, {location}): {settled}",
        highlight=False,
    )
    stronger = [
        f"{n}={f.value} ({f.source.value})"
        for n, f in standing.items()
        if n in pick.facts() and f.source.rank > Source.EVAL.rank
    ]
    if stronger:
        out.print(f"A stronger source still wins for: {', '.join(stronger)}.", highlight=False)
    tools = standing.get("native_tools")
    if pick.best.settings.mode == "force" and (tools is None or tools.support is not Support.NO):
        out.print(
            f"The winner always emulated (mode force); in auto mode {pick.model} is tried "
            f"natively first (native_tools={tools.value if tools else 'unknown'}). To emulate "
            f"it always: toolshim models set {pick.model} --tools no, or serve --mode force.",
            highlight=False,
        )
    return pick


def show_pick(pick: Pick, console: Console) -> None:
    """The candidates' scores side by side, the winner first, and why others were not judged."""
    table = Table(
        title=f"Best configuration for {pick.model} ({pick.basis}, eval of {pick.date})",
        title_justify="left",
    )
    for column in ("configuration", "dialect", "strategy", "constrain", "doubt", "BFCL", "agent"):
        table.add_column(column)
    table.add_column(f"one-call (bar {100 * LOOP_BAR:.0f}%)", justify="right")
    table.add_column("combined" if pick.basis == "bfcl+agent" else "score", justify="right")
    for c in pick.candidates:
        cells = [
            c.config,
            c.settings.dialect,
            c.settings.strategy,
            "yes" if c.settings.constrain else "no",
            "yes" if c.settings.doubt else "no",
            "—" if c.bfcl is None else f"{100 * c.bfcl:.1f}% of {c.bfcl_cases}",
            "—" if c.agent is None else f"{100 * c.agent:.1f}% of {c.agent_tasks}",
            "—"
            if c.one_call is None
            else f"{100 * c.one_call:.0f}%" + ("" if c.meets_loop_bar else " (below)"),
            f"{100 * c.score:.1f}%",
        ]
        table.add_row(*(f"[bold]{x}[/bold]" if c is pick.best else x for x in cells))
    console.print(table)
    if pick.missing:
        console.print(f"Judged on one suite only: {pick.missing}.", highlight=False)
    reasons: dict[str, list[str]] = {}
    for label, why in pick.left_out:
        reasons.setdefault(why, []).append(label)
    for why, labels in reasons.items():
        console.print(f"Not judged ({why}): {', '.join(labels)}.", highlight=False)
    note = pick.loop_bar_note()
    if note:
        console.print(f"Loop bar: {note}.", highlight=False)
    console.print(f"Picked {pick.best.config}: {pick.summary()}.", highlight=False)
