"""Eval reports: summaries, the JSON report and its round trip, tables, the Markdown table and the PNG chart."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from rich.console import Console

from toolshim.errors import ConfigError
from toolshim.evaluation import CaseRecord, load_report, markdown_table, render_tables, summarize
from toolshim.evaluation.report import ALL_CATEGORIES, REPORT_FORMAT, write_chart, write_report


def record(case: str, category: str, config: str, valid: bool, **extra: object) -> CaseRecord:
    fields: dict[str, object] = {
        "well_formed": None if category == "irrelevance" else valid,
        "called": category != "irrelevance" or not valid,
        "llm_calls": 1,
        "latency_s": 2.0,
    }
    fields.update(extra)
    return CaseRecord(case_id=case, category=category, config=config, valid=valid, **fields)  # type: ignore[arg-type]


RECORDS = [
    record("s1", "simple_python", "native", False, well_formed=False, called=False),
    record("s1", "simple_python", "force:json", True),
    record("s2", "simple_python", "native", False, well_formed=False, called=False),
    record(
        "s2", "simple_python", "force:json", False, well_formed=True, llm_calls=3, latency_s=5.0
    ),
    record("i1", "irrelevance", "native", True),
    record("i1", "irrelevance", "force:json", False),
]


def test_summaries_per_category_and_overall() -> None:
    summaries = {(s.category, s.config): s for s in summarize(RECORDS)}
    force = summaries[("simple_python", "force:json")]
    assert (force.cases, force.accuracy, force.well_formed) == (2, 0.5, 1.0)
    assert force.mean_llm_calls == 2.0 and force.mean_latency_s == 3.5
    native = summaries[("simple_python", "native")]
    assert (native.accuracy, native.well_formed, native.called) == (0.0, 0.0, 0.0)
    assert summaries[("irrelevance", "native")].well_formed is None
    overall = summaries[(ALL_CATEGORIES, "force:json")]
    assert overall.cases == 3 and overall.accuracy == pytest.approx(1 / 3)
    assert overall.well_formed == 1.0  # irrelevance cases do not count for well-formedness


def test_summaries_compare_only_cases_every_config_ran() -> None:
    partial = [*RECORDS, record("s3", "simple_python", "native", True)]
    summaries = {(s.category, s.config): s for s in summarize(partial)}
    assert summaries[("simple_python", "native")].cases == 2
    every = {(s.category, s.config): s for s in summarize(partial, common_only=False)}
    assert every[("simple_python", "native")].cases == 3


def test_json_report_shape_and_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "out" / "report.json"
    meta = {"model": "m", "configs": ["native", "force:json"]}
    write_report(path, meta, RECORDS)
    data = json.loads(path.read_text())
    assert data["format"] == REPORT_FORMAT
    assert data["meta"] == meta
    assert len(data["cases"]) == len(RECORDS)
    case = data["cases"][1]
    for key in (
        "case_id",
        "category",
        "config",
        "raw_output",
        "tool_calls",
        "parsed_calls",
        "valid",
        "well_formed",
        "error",
        "llm_calls",
        "latency_s",
    ):
        assert key in case
    assert {(s["category"], s["config"]) for s in data["summary"]} >= {("all", "native")}
    loaded_meta, loaded = load_report(path)
    assert loaded_meta == meta and loaded == RECORDS
    assert not list(path.parent.glob("*.tmp"))
    mask = os.umask(0)
    os.umask(mask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~mask  # like any new file, not mkstemp's 0600


def test_a_file_that_is_not_a_report_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.json"
    path.write_text('{"cases": []}')
    with pytest.raises(ConfigError, match="is not a toolshim eval report"):
        load_report(path)
    with pytest.raises(ConfigError, match="cannot read the eval report"):
        load_report(tmp_path / "missing.json")


def test_tables_show_every_category_and_config() -> None:
    console = Console(record=True, width=120)
    render_tables(summarize(RECORDS), console)
    text = console.export_text()
    for word in ("simple_python", "irrelevance", "all categories", "native", "force:json", "50%"):
        assert word in text
    table = markdown_table(summarize(RECORDS))
    lines = table.splitlines()
    assert lines[0].startswith("| configuration | simple_python | irrelevance | all |")
    assert lines[2].startswith("| native | 0% | 100% | 33% |")


def test_chart_is_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the chart needs matplotlib (toolshim[eval])")
    path = write_chart(tmp_path / "chart.png", summarize(RECORDS), title="test")
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(data) > 5_000
