"""Claude Code and Codex CLI, pinned from npm, run headless through ``toolshim serve`` on the
embedded Qwen2.5-Coder-1.5B (``toolshim serve --local-model qwen2.5-coder-1.5b``, the model the
README gives these clients), end to end: the real CLI serves the real model, the agent gets a
task, and the task is checked on what it left: Claude Code creates a file (it
exists afterwards, with the text asked for); Codex runs a script and reports the number it
printed (the coding suite measures both models on twelve tasks, ``docs/results.md``; the 0.5B
creates the file in some runs only). This is the path people install toolshim for; it must
not break unnoticed. ``.ci/run`` installs the 1.5B (``toolshim[local-1-5b]``); elsewhere the
test is skipped without it.

A task gets two tries: the prompt holds the task's temporary folder, and a different path can
tip a greedy small model one way or the other; two failures in a row fail the test.

The clients are installed into the test cache on first use; without npm the test fails under
CI and is skipped elsewhere.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolshim.evaluation.coding_clients import CLIENTS
from toolshim.evaluation.coding_tasks import load_coding_tasks
from toolshim.testing import Process, free_port, start_process

pytestmark = [pytest.mark.model, pytest.mark.e2e]

BUDGET = 900.0
"""Seconds a task may take: a first turn reads ~2,000 tokens of prompt on two shared cores."""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    """``toolshim serve --local-model qwen2.5-coder-1.5b``, as the README starts it."""
    from tests.model.conftest import _why_unavailable
    from toolshim.local import missing_packages

    reason = _why_unavailable()
    missing = missing_packages("qwen2.5-coder-1.5b")
    if missing and not reason:
        reason = "the 1.5B's parts are not installed: pip install 'toolshim[local-1-5b]'"
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI runs the coding agents on the 1.5B")
        pytest.skip(reason)
    folder = tmp_path_factory.mktemp("serve")
    port = free_port()
    args = [
        sys.executable,
        "-m",
        "toolshim.cli.main",
        "serve",
        "--local-model",
        "qwen2.5-coder-1.5b",
        "--port",
        str(port),
        "--registry",
        str(folder / "capabilities.sqlite3"),
    ]
    proxy = start_process(args, folder / "serve.log", f"http://127.0.0.1:{port}/healthz")
    yield proxy
    proxy.stop()


@pytest.mark.parametrize(
    ("name", "task_id"), [("claude", "write-greeting"), ("codex", "run-script")]
)
def test_a_coding_agent_finishes_a_task_on_the_embedded_model(
    served: Process, name: str, task_id: str, tmp_path: Path
) -> None:
    if shutil.which("npm") is None:
        if os.environ.get("CI"):
            pytest.fail("npm is not installed; CI must run the coding agents")
        pytest.skip("npm is not installed (the coding agents come from npm)")
    client = CLIENTS[name]
    client.install()
    (task,) = load_coding_tasks([task_id])
    failures = []
    for attempt in range(2):
        work = tmp_path / f"work{attempt}"
        home = tmp_path / f"home{attempt}"
        work.mkdir()
        home.mkdir()
        task.prepare(work)
        argv, env = client.command(
            task.prompt, base_url=served.url, model="local", home=home, max_turns=6
        )
        run = subprocess.run(
            argv, cwd=work, env=env, capture_output=True, text=True, timeout=BUDGET, check=False
        )
        answer = client.read_output(run.stdout, run.returncode, False).answer
        verdict = task.judge(work, answer)
        if verdict.passed:
            break
        failures.append(
            f"try {attempt + 1}: {verdict.reason}\n--- {name} stdout\n{run.stdout[-2000:]}\n"
            f"--- stderr\n{run.stderr[-1000:]}"
        )
    log = served.output()
    assert verdict.passed, "\n".join(failures) + f"\n--- toolshim serve\n{log[-4000:]}"
    assert "emulated=true" in log
