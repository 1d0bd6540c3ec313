"""The agent suite's report: the JSON file (every task run), summaries and their tables."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from toolshim.evaluation.agent_runner import FAILURE_KINDS, AgentRecord
from toolshim.evaluation.agent_tasks import KINDS
from toolshim.evaluation.report import read_report, report_json, write_json

__all__ = [
    "AGENT_REPORT_FORMAT",
    "AgentSummary",
    "accuracy_cell",
    "agent_markdown",
    "failures_cell",
    "load_agent_report",
    "markdown_rows",
    "render_agent_table",
    "summarize_agent",
    "wilson",
    "write_agent_report",
]

AGENT_REPORT_FORMAT = "toolshim-agent-eval/1"


@dataclass
class AgentSummary:
    """One configuration over the tasks it ran."""

    config: str
    tasks: int
    correct: int
    by_kind: dict[str, tuple[int, int]] = field(default_factory=dict)
    """kind -> (correct, tasks)."""
    failures: dict[str, int] = field(default_factory=dict)
    mean_turns: float = 0.0
    mean_llm_calls: float = 0.0
    mean_tokens: float = 0.0
    mean_seconds: float = 0.0

    @property
    def accuracy(self) -> float:
        return self.correct / self.tasks if self.tasks else 0.0

    @property
    def one_call(self) -> float:
        right, total = self.by_kind.get("one_call", (0, 0))
        return right / total if total else 0.0


def summarize_agent(records: Sequence[AgentRecord]) -> list[AgentSummary]:
    """One summary per configuration, in the order they first appear."""
    groups: dict[str, list[AgentRecord]] = {}
    for record in records:
        groups.setdefault(record.config, []).append(record)
    out = []
    for config, group in groups.items():
        kinds: dict[str, tuple[int, int]] = {}
        for kind in KINDS:
            runs = [r for r in group if r.kind == kind]
            if runs:
                kinds[kind] = (sum(r.correct for r in runs), len(runs))
        failures = {k: sum(r.failure == k for r in group) for k in FAILURE_KINDS}
        out.append(
            AgentSummary(
                config=config,
                tasks=len(group),
                correct=sum(r.correct for r in group),
                by_kind=kinds,
                failures={k: v for k, v in failures.items() if v},
                mean_turns=_mean([r.turns for r in group]),
                mean_llm_calls=_mean([r.llm_calls for r in group]),
                mean_tokens=_mean([r.prompt_tokens + r.completion_tokens for r in group]),
                mean_seconds=_mean([r.seconds for r in group]),
            )
        )
    return out


def _mean(values: Sequence[float]) -> float:
    return round(sum(values) / len(values), 2) if values else 0.0


def write_agent_report(path: Path, meta: Mapping[str, Any], records: Sequence[AgentRecord]) -> None:
    """Write the JSON report atomically (safe to call after every task)."""
    summary = [asdict(s) for s in summarize_agent(records)]
    write_json(path, report_json(AGENT_REPORT_FORMAT, meta, summary, records, "tasks"))


def load_agent_report(path: Path) -> tuple[dict[str, Any], list[AgentRecord]]:
    data = read_report(path, AGENT_REPORT_FORMAT, "agent", "agent")
    return dict(data.get("meta") or {}), [AgentRecord.from_dict(t) for t in data["tasks"]]


def wilson(right: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval (95% by default) of ``right`` out of ``total``."""
    if not total:
        return 0.0, 0.0
    p = right / total
    denominator = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denominator
    spread = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denominator
    return max(0.0, centre - spread), min(1.0, centre + spread)


def accuracy_cell(right: int, total: int) -> str:
    """``right/total (percent, Wilson interval)`` for a results table; ``–`` for none."""
    if not total:
        return "–"
    low, high = wilson(right, total)
    return f"{right}/{total} ({100 * right / total:.0f}%, {100 * low:.0f}–{100 * high:.0f})"


def failures_cell(failures: Mapping[str, int]) -> str:
    """``kind count, …`` for a results table; ``–`` for none."""
    return ", ".join(f"{k} {v}" for k, v in failures.items()) or "–"


def markdown_rows(head: Sequence[str], rows: Iterable[Sequence[str]], *, code: int) -> str:
    """A Markdown table of ``rows`` under ``head``, column ``code`` (the configuration) as
    code."""
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for row in rows:
        cells = [f"`{cell}`" if i == code else cell for i, cell in enumerate(row)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _kinds(summaries: Sequence[AgentSummary]) -> list[str]:
    """The task kinds the summaries have results for, in :data:`KINDS` order."""
    return [k for k in KINDS if any(k in s.by_kind for s in summaries)]


def _row(s: AgentSummary, kinds: Sequence[str]) -> list[str]:
    """A configuration's cells: correct answers in all and per kind, then cost, failures."""
    return [
        s.config,
        accuracy_cell(s.correct, s.tasks),
        *(accuracy_cell(*s.by_kind.get(k, (0, 0))) for k in kinds),
        f"{s.mean_turns:.1f}",
        f"{s.mean_llm_calls:.1f}",
        f"{s.mean_tokens:.0f}",
        f"{s.mean_seconds:.1f}",
        failures_cell(s.failures),
    ]


def agent_markdown(summaries: Sequence[AgentSummary]) -> str:
    """The results table as Markdown: correct final answers per kind, with 95% intervals."""
    kinds = _kinds(summaries)
    head = ["configuration", "all", *kinds, "turns", "LLM calls", "tokens", "s/task", "failures"]
    return markdown_rows(head, (_row(s, kinds) for s in summaries), code=0)


def render_agent_table(summaries: Sequence[AgentSummary], console: Console, title: str) -> None:
    kinds = _kinds(summaries)
    table = Table(title=title)
    for column in ("configuration", "all", *kinds, "turns", "calls", "tokens", "s/task"):
        table.add_column(column)
    table.add_column("failures")
    for s in summaries:
        table.add_row(*_row(s, kinds))
    console.print(table)
