"""How ``toolshim models`` prints: a model's report (facts, sources, what they override), tables' cells, JSON."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from toolshim.capabilities.facts import FACT_NAMES, PREFERENCE_FACTS, SUPPORT_FACTS, Source
from toolshim.capabilities.registry import ANY_UPSTREAM, Evidence, ModelReport, Registry

__all__ = ["ago", "footer", "out", "print_json", "print_report", "report_json", "support_markup"]

out = Console(highlight=False, soft_wrap=True)
"""Where the commands' results go (stdout)."""


def footer(registry: Registry) -> None:
    out.print(f"[dim]registry: {registry.location}[/]")


def print_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, ensure_ascii=False))


def report_json(report: ModelReport, registry: Registry) -> dict[str, Any]:
    return {**report.as_dict(), "registry": registry.location}


def _preference_lines(report: ModelReport) -> list[str]:
    """Where each emulation preference comes from: one line each (the eval's score and date
    are in its detail)."""
    lines = []
    for name in PREFERENCE_FACTS:
        fact_report = report.facts.get(name)
        if fact_report is None:
            default = {"dialect": "json", "strategy": "single", "doubt": "no"}.get(
                name, "as structured_output says"
            )
            lines.append(f"{name}: {default} (nothing stored; the default)")
            continue
        fact = fact_report.winner.fact
        where = f"source {fact.source.value}, {fact_report.winner.scope}"
        if fact.source is Source.EVAL:
            where += f", applied {_iso(fact.updated_at)[:10]}"
        lines.append(
            f"{name}: {fact.value} ({where})" + (f" — {fact.detail}" if fact.detail else "")
        )
    return lines


def print_report(report: ModelReport, registry: Registry) -> None:
    where = "any upstream" if report.upstream == ANY_UPSTREAM else report.upstream
    family = f"profile family {report.family}" if report.family else "no shipped profile"
    out.print(f"[bold]{report.model}[/] at {where} — matched as {report.normalized!r}, {family}")
    notes: list[str] = []
    table = Table()
    table.add_column("fact", no_wrap=True)
    for column in ("value", "source", "scope", "learned", "why"):
        table.add_column(column)
    for name in FACT_NAMES:
        fact_report = report.facts.get(name)
        if fact_report is None:
            table.add_row(name, "[dim]unknown[/]", "[dim]-[/]", "", "", "")
            continue
        table.add_row(name, *_evidence_cells(fact_report.winner, notes, winner=True))
        for item in fact_report.overridden:
            table.add_row("[dim]  overridden[/]", *_evidence_cells(item, notes, winner=False))
    out.print(table)
    for number, note in enumerate(notes, start=1):
        out.print(f"  [dim]\\[{number}][/] {escape(note)}")
    out.print("[bold]How emulation is set up for this model, and where each setting came from:[/]")
    for line in _preference_lines(report):
        out.print(f"  {escape(line)}")
    out.print("[bold]How toolshim serves a request with tools:[/]")
    for line in report.treatment():
        out.print(f"  {line}")
    footer(registry)


def _evidence_cells(item: Evidence, notes: list[str], *, winner: bool) -> list[str]:
    fact = item.fact
    if fact.detail and fact.detail not in notes:
        notes.append(fact.detail)
    why = f"[{notes.index(fact.detail) + 1}]" if fact.detail else ""
    dated = fact.source in (Source.PROFILE, Source.EVAL)
    learned = _iso(fact.updated_at)[:10] if dated else ago(fact.updated_at)
    if not winner:
        cells = [str(fact.value), fact.source.value, item.scope, learned, why]
        return [f"[dim]{escape(c)}[/]" for c in cells]
    value = str(fact.value)
    if fact.name in SUPPORT_FACTS:
        value = support_markup(value)
    return [value, fact.source.value, item.scope, learned, why]


def support_markup(value: str) -> str:
    colour = {"yes": "green", "no": "red"}.get(value, "yellow")
    return f"[{colour}]{value}[/]"


def _iso(stamp: float) -> str:
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def ago(stamp: float | None) -> str:
    """A short age for tables: ``just now``, ``5 min ago``, ``3 h ago``, else the date."""
    if stamp is None:
        return "-"
    seconds = time.time() - stamp
    if 0 <= seconds < 60:
        return "just now"
    if 0 <= seconds < 3600:
        return f"{int(seconds // 60)} min ago"
    if 0 <= seconds < 86400:
        return f"{int(seconds // 3600)} h ago"
    return _iso(stamp)[:10]
