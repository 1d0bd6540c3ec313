"""Eval reports: per-category summaries, rich tables, the JSON report (written as a run goes) and the PNG chart."""

from __future__ import annotations

import importlib
import json
import os
import statistics
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from toolshim.errors import ConfigError
from toolshim.evaluation.runner import CaseRecord

__all__ = [
    "ALL_CATEGORIES",
    "REPORT_FORMAT",
    "Summary",
    "load_report",
    "markdown_table",
    "render_tables",
    "summarize",
    "write_chart",
    "write_report",
]

REPORT_FORMAT = "toolshim-eval/1"
ALL_CATEGORIES = "all"
"""The pseudo-category of the summary rows over every case of a configuration."""


@dataclass(frozen=True)
class Summary:
    """One configuration on one category (or on ``all``)."""

    category: str
    config: str
    cases: int
    accuracy: float
    well_formed: float | None
    """Share of cases whose output decoded into calls to offered functions (None: irrelevance)."""
    called: float
    """Share of cases where the output made at least one call."""
    mean_llm_calls: float
    mean_latency_s: float
    failed_requests: int


def _summary(category: str, config: str, rows: Sequence[CaseRecord]) -> Summary:
    shaped = [r.well_formed for r in rows if r.well_formed is not None]
    return Summary(
        category=category,
        config=config,
        cases=len(rows),
        accuracy=sum(r.valid for r in rows) / len(rows),
        well_formed=(sum(shaped) / len(shaped)) if shaped else None,
        called=sum(r.called for r in rows) / len(rows),
        mean_llm_calls=statistics.fmean(r.llm_calls for r in rows),
        mean_latency_s=statistics.fmean(r.latency_s for r in rows),
        failed_requests=sum(r.error_type == "request_failed" for r in rows),
    )


def summarize(records: Iterable[CaseRecord], *, common_only: bool = True) -> list[Summary]:
    """A summary per (category, configuration), then per configuration over ``all``.

    With ``common_only``, only cases that every configuration ran are counted, so that a run
    stopped midway compares configurations on the same cases.
    """
    rows = list(records)
    configs = list(dict.fromkeys(r.config for r in rows))
    if common_only and configs:
        by_config: dict[str, set[str]] = {}
        for r in rows:
            by_config.setdefault(r.config, set()).add(r.case_id)
        common = set.intersection(*by_config.values())
        rows = [r for r in rows if r.case_id in common]
    categories = list(dict.fromkeys(r.category for r in rows))
    out: list[Summary] = []
    for category in [*categories, ALL_CATEGORIES]:
        for config in configs:
            selected = [
                r
                for r in rows
                if r.config == config and (category == ALL_CATEGORIES or r.category == category)
            ]
            if selected:
                out.append(_summary(category, config, selected))
    return out


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.0f}%"


def render_tables(summaries: Sequence[Summary], console: Console, *, title: str = "") -> None:
    """One rich table per category (best accuracy in bold), then the overall table."""
    categories = list(dict.fromkeys(s.category for s in summaries))
    for category in categories:
        rows = [s for s in summaries if s.category == category]
        best = max(s.accuracy for s in rows)
        heading = "all categories" if category == ALL_CATEGORIES else category
        table = Table(
            title=f"{title} — {heading}" if title else heading,
            title_justify="left",
            show_edge=False,
        )
        table.add_column("configuration")
        table.add_column("cases", justify="right")
        table.add_column("accuracy", justify="right")
        table.add_column("well-formed", justify="right")
        table.add_column("called", justify="right")
        table.add_column("LLM calls", justify="right")
        table.add_column("latency", justify="right")
        table.add_column("failed", justify="right")
        for s in rows:
            accuracy = _pct(s.accuracy)
            table.add_row(
                s.config,
                str(s.cases),
                f"[bold]{accuracy}[/bold]" if s.accuracy == best else accuracy,
                _pct(s.well_formed),
                _pct(s.called),
                f"{s.mean_llm_calls:.2f}",
                f"{s.mean_latency_s:.1f}s",
                str(s.failed_requests) if s.failed_requests else "",
            )
        console.print(table)
        console.print()


def markdown_table(summaries: Sequence[Summary]) -> str:
    """The accuracy of every configuration per category, as one Markdown table."""
    categories = list(dict.fromkeys(s.category for s in summaries))
    configs = list(dict.fromkeys(s.config for s in summaries))
    cell = {(s.category, s.config): s for s in summaries}
    lines = [
        "| configuration | " + " | ".join(categories) + " | well-formed | LLM calls | latency |",
        "| --- | " + " | ".join("---:" for _ in categories) + " | ---: | ---: | ---: |",
    ]
    for config in configs:
        overall = cell.get((ALL_CATEGORIES, config))
        accs = [_pct(cell[(c, config)].accuracy) if (c, config) in cell else "" for c in categories]
        extra = (
            [
                _pct(overall.well_formed),
                f"{overall.mean_llm_calls:.2f}",
                f"{overall.mean_latency_s:.1f}s",
            ]
            if overall
            else ["", "", ""]
        )
        lines.append(f"| {config} | " + " | ".join(accs + extra) + " |")
    return "\n".join(lines)


def write_report(
    path: Path, meta: Mapping[str, Any], records: Sequence[CaseRecord]
) -> dict[str, Any]:
    """Write the JSON report atomically (safe to call after every case); returns it."""
    report = report_json(REPORT_FORMAT, meta, [asdict(s) for s in summarize(records)], records)
    write_json(path, report)
    return report


def report_json(
    form: str,
    meta: Mapping[str, Any],
    summary: list[dict[str, Any]],
    records: Sequence[Any],
    key: str = "cases",
) -> dict[str, Any]:
    """A suite's JSON report: its ``form``, ``meta``, ``summary`` and the ``records`` (each
    ``to_dict()``) under ``key``."""
    return {
        "format": form,
        "meta": dict(meta),
        "summary": summary,
        key: [r.to_dict() for r in records],
    }


def read_report(path: Path, form: str, name: str, kind: str) -> dict[str, Any]:
    """The JSON report of the ``form`` at ``path``; ConfigError, naming the ``name`` report
    (a toolshim ``kind`` report), when it cannot be read or is another."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the {name} report {str(path)!r}: {exc}") from exc
    if not isinstance(data, dict) or data.get("format") != form:
        raise ConfigError(f"{str(path)!r} is not a toolshim {kind} report (format {form!r})")
    return data


def write_json(path: Path, data: Any) -> None:
    """Write ``data`` as indented JSON, atomically (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out, indent=1, ensure_ascii=False)
            out.write("\n")
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it private; a report is not secret
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def load_report(path: Path) -> tuple[dict[str, Any], list[CaseRecord]]:
    """The meta and the case records of a JSON report written by :func:`write_report`."""
    data = read_report(path, REPORT_FORMAT, "eval", "eval")
    return dict(data.get("meta") or {}), [CaseRecord.from_dict(c) for c in data["cases"]]


def write_chart(path: Path, summaries: Sequence[Summary], *, title: str = "") -> Path:
    """A grouped bar chart of accuracy per category and configuration, as a PNG (headless)."""
    try:
        matplotlib: Any = importlib.import_module("matplotlib")
        matplotlib.use("Agg")
        plt: Any = importlib.import_module("matplotlib.pyplot")
    except ModuleNotFoundError as exc:
        raise ConfigError(
            f"the chart needs matplotlib ({exc}); run: pip install 'toolshim[eval]'"
        ) from exc

    categories = list(dict.fromkeys(s.category for s in summaries))
    configs = list(dict.fromkeys(s.config for s in summaries))
    cell = {(s.category, s.config): s.accuracy for s in summaries}
    width = 0.8 / max(1, len(configs))
    width_in = min(16.0, max(8.0, 1.0 + len(categories) * (0.22 * len(configs) + 0.5)))
    figure, axes = plt.subplots(figsize=(width_in, 5.0))
    colors = plt.get_cmap("tab10")
    for j, config in enumerate(configs):
        xs = [i + (j - (len(configs) - 1) / 2) * width for i in range(len(categories))]
        ys = [100 * cell.get((c, config), 0.0) for c in categories]
        bars = axes.bar(xs, ys, width, label=config, color=colors(j % 10))
        axes.bar_label(bars, labels=[f"{y:.0f}" for y in ys], fontsize=6, padding=1)
    counts = {c: max(s.cases for s in summaries if s.category == c) for c in categories}
    axes.set_xticks(
        range(len(categories)),
        [f"{c.replace('_', chr(10))}\n(n={counts[c]})" for c in categories],
    )
    axes.set_ylabel("accuracy (%), BFCL AST checker")
    axes.set_ylim(0, 105)
    axes.legend(
        fontsize=8, ncols=min(4, len(configs)), loc="upper center", bbox_to_anchor=(0.5, -0.2)
    )
    axes.grid(axis="y", alpha=0.3)
    if title:
        axes.set_title(title, fontsize=10)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=130)
    plt.close(figure)
    return path
