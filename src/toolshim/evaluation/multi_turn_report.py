"""The BFCL multi-turn report: the JSON file (every case run), summaries and their tables."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from toolshim.evaluation.agent_report import accuracy_cell, failures_cell, markdown_rows
from toolshim.evaluation.multi_turn_runner import MultiTurnRecord
from toolshim.evaluation.report import ALL_CATEGORIES, read_report, report_json, write_json

__all__ = [
    "MULTI_TURN_REPORT_FORMAT",
    "MultiTurnSummary",
    "load_multi_turn_report",
    "multi_turn_markdown",
    "render_multi_turn_table",
    "summarize_multi_turn",
    "write_multi_turn_report",
]

MULTI_TURN_REPORT_FORMAT = "toolshim-bfcl-multi-turn/1"


@dataclass
class MultiTurnSummary:
    """One configuration on one category (or on ``all``)."""

    category: str
    config: str
    cases: int
    correct: int
    mean_turns: float
    mean_steps: float
    mean_llm_calls: float
    llm_calls_per_turn: float
    """LLM calls over user turns, summed over the cases."""
    mean_prompt_tokens: float
    mean_completion_tokens: float
    mean_seconds: float
    total_seconds: float
    failures: dict[str, int] = field(default_factory=dict)

    @property
    def accuracy(self) -> float:
        return self.correct / self.cases if self.cases else 0.0


def _mean(values: Sequence[float]) -> float:
    return round(sum(values) / len(values), 2) if values else 0.0


def _summary(category: str, config: str, rows: Sequence[MultiTurnRecord]) -> MultiTurnSummary:
    failures: dict[str, int] = {}
    for r in rows:
        if r.failure:
            failures[r.failure] = failures.get(r.failure, 0) + 1
    turns = sum(r.turns for r in rows)
    return MultiTurnSummary(
        category=category,
        config=config,
        cases=len(rows),
        correct=sum(r.valid for r in rows),
        mean_turns=_mean([r.turns for r in rows]),
        mean_steps=_mean([r.steps for r in rows]),
        mean_llm_calls=_mean([r.llm_calls for r in rows]),
        llm_calls_per_turn=round(sum(r.llm_calls for r in rows) / turns, 2) if turns else 0.0,
        mean_prompt_tokens=_mean([r.prompt_tokens for r in rows]),
        mean_completion_tokens=_mean([r.completion_tokens for r in rows]),
        mean_seconds=_mean([r.seconds for r in rows]),
        total_seconds=round(sum(r.seconds for r in rows), 1),
        failures=dict(sorted(failures.items(), key=lambda kv: -kv[1])),
    )


def summarize_multi_turn(records: Sequence[MultiTurnRecord]) -> list[MultiTurnSummary]:
    """Per category, one summary per configuration (in the order they first appear), on the
    cases every configuration finished; then ``all`` when there is more than one category."""
    configs = list(dict.fromkeys(r.config for r in records))
    by_key = {(r.case_id, r.config): r for r in records}
    common = [
        case
        for case in dict.fromkeys(r.case_id for r in records)
        if all((case, c) in by_key for c in configs)
    ]
    categories = list(dict.fromkeys(by_key[(c, configs[0])].category for c in common))
    out: list[MultiTurnSummary] = []
    for category in categories:
        cases = [c for c in common if by_key[(c, configs[0])].category == category]
        out += [_summary(category, k, [by_key[(c, k)] for c in cases]) for k in configs]
    if len(categories) > 1:
        out += [_summary(ALL_CATEGORIES, k, [by_key[(c, k)] for c in common]) for k in configs]
    return out


def write_multi_turn_report(
    path: Path, meta: Mapping[str, Any], records: Sequence[MultiTurnRecord]
) -> None:
    """Write the JSON report atomically (safe to call after every case)."""
    summary = [
        {**asdict(s), "accuracy": round(s.accuracy, 4)} for s in summarize_multi_turn(records)
    ]
    write_json(path, report_json(MULTI_TURN_REPORT_FORMAT, meta, summary, records))


def load_multi_turn_report(path: Path) -> tuple[dict[str, Any], list[MultiTurnRecord]]:
    data = read_report(path, MULTI_TURN_REPORT_FORMAT, "multi-turn", "BFCL multi-turn")
    return dict(data.get("meta") or {}), [MultiTurnRecord.from_dict(c) for c in data["cases"]]


_HEAD = (
    "category",
    "configuration",
    "accuracy",
    "turns",
    "steps",
    "LLM calls",
    "calls/turn",
    "prompt tokens",
    "completion tokens",
    "s/case",
    "failures",
)


def _row(s: MultiTurnSummary) -> list[str]:
    return [
        s.category,
        s.config,
        accuracy_cell(s.correct, s.cases),
        f"{s.mean_turns:.1f}",
        f"{s.mean_steps:.1f}",
        f"{s.mean_llm_calls:.1f}",
        f"{s.llm_calls_per_turn:.2f}",
        f"{s.mean_prompt_tokens:.0f}",
        f"{s.mean_completion_tokens:.0f}",
        f"{s.mean_seconds:.1f}",
        failures_cell(s.failures),
    ]


def multi_turn_markdown(summaries: Sequence[MultiTurnSummary]) -> str:
    """The results as a Markdown table: accuracy with its 95% Wilson interval, then cost."""
    return markdown_rows(_HEAD, (_row(s) for s in summaries), code=1)


def render_multi_turn_table(
    summaries: Sequence[MultiTurnSummary], console: Console, title: str
) -> None:
    table = Table(title=title)
    for column in _HEAD:
        table.add_column(column)
    for s in summaries:
        table.add_row(*_row(s))
    console.print(table)
