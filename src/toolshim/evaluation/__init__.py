"""Evaluation on the Berkeley Function Calling Leaderboard: cases, runner, scoring and reports.

>>> from toolshim.evaluation import EvalConfig, EvalRunner, load_cases      # doctest: +SKIP
>>> cases = load_cases(["simple", "irrelevance"], limit=20)
>>> runner = EvalRunner(upstream, "qwen", [EvalConfig.parse("native"), EvalConfig.parse("force:json")])
>>> records = asyncio.run(runner.run(cases))

Needs ``pip install 'toolshim[eval]' && pip install --no-deps bfcl-eval==2026.3.23``.
"""

from toolshim.evaluation.bfcl import (
    BFCL_VERSION,
    DEFAULT_CATEGORIES,
    INSTALL_COMMAND,
    BfclCase,
    BfclMissingError,
    bfcl_available,
    canonical_category,
    load_bfcl,
    load_cases,
)
from toolshim.evaluation.bfcl_runner import EvalRunner
from toolshim.evaluation.bfcl_score import Verdict, score
from toolshim.evaluation.report import (
    Summary,
    load_report,
    markdown_table,
    render_tables,
    summarize,
    write_chart,
    write_report,
)
from toolshim.evaluation.runner import BASELINES, CaseRecord, EvalConfig

__all__ = [
    "BASELINES",
    "BFCL_VERSION",
    "DEFAULT_CATEGORIES",
    "INSTALL_COMMAND",
    "BfclCase",
    "BfclMissingError",
    "CaseRecord",
    "EvalConfig",
    "EvalRunner",
    "Summary",
    "Verdict",
    "bfcl_available",
    "canonical_category",
    "load_bfcl",
    "load_cases",
    "load_report",
    "markdown_table",
    "render_tables",
    "score",
    "summarize",
    "write_chart",
    "write_report",
]
