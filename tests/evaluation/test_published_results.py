"""The headline numbers in README.md and docs/results.md are the committed eval reports' own.

Re-running an eval and committing its report without updating the pages (or the reverse)
fails here: each page's headline row for a model must show the accuracy that
:func:`summarize` computes from ``docs/bfcl-<model>.json`` for native, BFCL's prompt and
toolshim's best setting, on the cases all three finished in the 300-case sample's six
categories (the reports also hold later categories, run for fewer configurations).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from toolshim.evaluation.bfcl import CATEGORY_ALIASES, DEFAULT_CATEGORIES
from toolshim.evaluation.report import ALL_CATEGORIES, load_report, summarize

ROOT = Path(__file__).resolve().parents[2]
HEADLINE = ("native", "bfcl-prompt", "force:pythonic")
SAMPLE = {CATEGORY_ALIASES.get(c, c) for c in DEFAULT_CATEGORIES[:6]}
"""The categories of the published 300-case sample (50 cases each)."""
MODELS = {
    "qwen2.5-coder-0.5b": "Qwen2.5-Coder-0.5B",
    "qwen2.5-coder-1.5b": "Qwen2.5-Coder-1.5B",
}


def headline_accuracy(model: str) -> tuple[int, list[str]]:
    """(cases per configuration, ["17%", "38%", "56%"]) from the committed report."""
    _, records = load_report(ROOT / "docs" / f"bfcl-{model}.json")
    rows = [r for r in records if r.config in HEADLINE and r.category in SAMPLE]
    overall = {s.config: s for s in summarize(rows) if s.category == ALL_CATEGORIES}
    assert set(overall) == set(HEADLINE)
    (cases,) = {s.cases for s in overall.values()}
    return cases, [f"{100 * overall[c].accuracy:.0f}%" for c in HEADLINE]


def row_for(page: str, label: str) -> list[str]:
    """The percentages of the markdown table row that starts with ``label`` (quotes stripped)."""
    text = (ROOT / page).read_text(encoding="utf-8")
    (line,) = [
        ln for ln in text.splitlines() if ln.lstrip("> ").startswith(f"| {label}") and "%" in ln
    ]
    return [cell.strip("* ") for cell in re.findall(r"\*{0,2}\d+%", line)]


@pytest.mark.parametrize("page", ["README.md", "docs/results.md"])
@pytest.mark.parametrize("model", list(MODELS))
def test_headline_rows_are_the_reports_numbers(page: str, model: str) -> None:
    cases, accuracy = headline_accuracy(model)
    assert cases == 300  # 50 per category, as issue 7 asks
    assert row_for(page, MODELS[model])[:3] == accuracy
