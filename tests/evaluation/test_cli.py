"""``toolshim eval`` end to end against a scripted model served over real HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.evaluation.conftest import OracleModel
from toolshim.cli.main import app
from toolshim.evaluation import INSTALL_COMMAND, bfcl_available, load_cases
from toolshim.testing import FunctionUpstream
from toolshim.testing.server import serve_fake

needs_bfcl = pytest.mark.skipif(
    bfcl_available() is not None, reason=f"bfcl-eval is not usable: {bfcl_available()}"
)


@needs_bfcl
def test_eval_against_an_http_upstream(tmp_path: Path) -> None:
    cases = load_cases(["simple", "irrelevance"], limit=2)
    output = tmp_path / "report.json"
    upstream = FunctionUpstream(OracleModel(cases), models=["oracle-1"])

    def run_args(base_url: str) -> list[str]:
        return [
            "eval",
            "--upstream",
            base_url,
            "--categories",
            "simple,irrelevance",
            "--limit",
            "2",
            "--config",
            "force:json",
            "--mode",
            "auto",
            "-o",
            str(output),
        ]

    with serve_fake(upstream) as server:
        result = CliRunner().invoke(app, run_args(server.base_url), env={"COLUMNS": "140"})
    assert result.exit_code == 0, result.output
    report = json.loads(output.read_text())
    assert report["meta"]["model"] == "oracle-1"  # the upstream's first model
    assert report["meta"]["configs"] == ["native", "bfcl-prompt", "force:json", "auto"]
    assert report["meta"]["categories"] == ["simple_python", "irrelevance"]
    assert len(report["cases"]) == 4 * 4
    assert {c["case_id"] for c in report["cases"]} == {c.id for c in cases}
    accuracy = {
        s["config"]: s["accuracy"] for s in report["summary"] if s["category"] == "simple_python"
    }
    # The oracle answers like Qwen behind llama-server: calls as fenced JSON in content.
    assert accuracy["native"] == 0.0
    assert accuracy["bfcl-prompt"] == 1.0
    assert accuracy["force:json"] == 1.0
    assert accuracy["auto"] == 1.0  # rescued from content (or emulated)
    for word in ("simple_python", "irrelevance", "accuracy", "well-formed", "force:json"):
        assert word in result.stdout
    chart = output.with_suffix(".png")
    assert chart.read_bytes().startswith(b"\x89PNG")

    # --resume: nothing is left to run, and the report keeps every case
    with serve_fake(FunctionUpstream(OracleModel(cases), models=["oracle-1"])) as server:
        again = CliRunner().invoke(
            app,
            [*run_args(server.base_url), "--resume"],
        )
    assert again.exit_code == 0, again.output
    assert "0 runs to do" in again.output
    assert len(json.loads(output.read_text())["cases"]) == 16

    # --report-only: no upstream at all, the tables and the Markdown table from the report
    chart.unlink()
    shown = CliRunner().invoke(
        app, ["eval", "--report-only", "--markdown", "-o", str(output)], env={"COLUMNS": "140"}
    )
    assert shown.exit_code == 0, shown.output
    assert "| configuration | simple_python | irrelevance | all |" in shown.stdout
    assert "| bfcl-prompt | 100% | 100% | 100% |" in shown.stdout
    assert chart.read_bytes().startswith(b"\x89PNG")

    # --report-only --config: only that configuration beside the baselines
    only = CliRunner().invoke(
        app,
        ["eval", "--report-only", "--markdown", "--config", "force:json", "-o", str(output)],
        env={"COLUMNS": "140"},
    )
    assert only.exit_code == 0, only.output
    assert "| force:json |" in only.stdout and "| bfcl-prompt |" in only.stdout
    assert "| auto |" not in only.stdout


@needs_bfcl
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--categories", "klingon"], "unknown BFCL category 'klingon'"),
        (["--config", "force:klingon"], "unknown dialect 'klingon'"),
        (["--baseline", "oracle"], "unknown baseline 'oracle'"),
        (["--model-file", "nowhere.gguf", "--upstream", "http://x"], "not both"),
    ],
)
def test_bad_options_are_one_line_errors(args: list[str], message: str) -> None:
    if "--upstream" not in args:
        args = ["--upstream", "http://127.0.0.1:9/v1", *args]
    result = CliRunner().invoke(app, ["eval", *args])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_report_only_needs_a_report(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["eval", "--report-only", "-o", str(tmp_path / "none.json")])
    assert result.exit_code == 2
    assert "cannot read the eval report" in result.output


def test_missing_bfcl_says_what_to_install() -> None:
    code = (
        "import sys; sys.modules['bfcl_eval'] = None; "
        "sys.argv = ['toolshim', 'eval', '--upstream', 'http://127.0.0.1:9/v1']; "
        "from toolshim.cli.main import main; main()"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 2, done.stderr
    assert INSTALL_COMMAND in " ".join(done.stderr.split())
    assert "Traceback" not in done.stderr


def test_help_explains_the_command() -> None:
    result = CliRunner().invoke(app, ["eval", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for word in (
        "Berkeley Function Calling Leaderboard",
        "--config",
        "--limit",
        "bfcl-prompt",
        "native",
    ):
        assert word in result.output


@needs_bfcl
def test_sigterm_stops_a_run_and_keeps_the_report(tmp_path: Path) -> None:
    cases = load_cases(["simple"], limit=5)
    oracle = OracleModel(cases)

    async def slow(body: dict[str, Any]) -> Any:
        await asyncio.sleep(0.3)
        return oracle(body)

    output = tmp_path / "report.json"
    with serve_fake(FunctionUpstream(slow)) as server:
        command = [sys.executable, "-m", "toolshim.cli.main", "eval", "--upstream"]
        command += [server.base_url, "--categories", "simple", "--limit", "5", "-o", str(output)]
        process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
        assert process.stderr is not None
        lines = []
        for line in process.stderr:  # one line per finished run when stderr is not a terminal
            lines.append(line)
            if line.startswith("[2/"):
                break
        process.send_signal(signal.SIGTERM)
        _, rest = process.communicate(timeout=60)
    assert process.returncode == 130, "".join(lines) + rest
    assert "Traceback" not in rest
    recorded = json.loads(output.read_text())["cases"]
    assert 2 <= len(recorded) < 15
