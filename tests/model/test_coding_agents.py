"""Claude Code and Codex CLI, pinned from npm, run headless through ``toolshim serve`` on the
embedded model, end to end: the real CLI serves the real model with the flags a user runs, the
agent gets a task, and the file it asked for exists afterwards. This is the path people install
toolshim for; it must not break unnoticed (the coding-agent suite measures it on 12 tasks).

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

from tests.e2e.conftest import Process, free_port, start
from toolshim.evaluation.coding_clients import CLIENTS
from toolshim.evaluation.coding_tasks import load_coding_tasks

pytestmark = [pytest.mark.model, pytest.mark.e2e]

BUDGET = 900.0
"""Seconds a task may take: a first turn reads ~2,000 tokens of prompt on two shared cores."""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    """``toolshim serve`` on the embedded default model, as the README starts it."""
    from tests.model.conftest import _why_unavailable

    reason = _why_unavailable()
    if reason:
        pytest.skip(reason)
    folder = tmp_path_factory.mktemp("serve")
    port = free_port()
    args = [
        sys.executable,
        "-m",
        "toolshim.cli.main",
        "serve",
        "--port",
        str(port),
        "--registry",
        str(folder / "capabilities.sqlite3"),
    ]
    proxy = start(args, folder / "serve.log", f"http://127.0.0.1:{port}/healthz")
    yield proxy
    proxy.stop()


@pytest.mark.parametrize("name", ["claude", "codex"])
def test_a_coding_agent_writes_the_file_it_was_asked_for(
    served: Process, name: str, tmp_path: Path
) -> None:
    if shutil.which("npm") is None:
        if os.environ.get("CI"):
            pytest.fail("npm is not installed; CI must run the coding agents")
        pytest.skip("npm is not installed (the coding agents come from npm)")
    client = CLIENTS[name]
    client.install()
    (task,) = load_coding_tasks(["write-greeting"])
    work = tmp_path / "work"
    home = tmp_path / "home"
    work.mkdir()
    home.mkdir()
    argv, env = client.command(
        task.prompt, base_url=served.url, model="local", home=home, max_turns=6
    )
    run = subprocess.run(
        argv, cwd=work, env=env, capture_output=True, text=True, timeout=BUDGET, check=False
    )
    log = served.output()
    verdict = task.judge(work, client.read_output(run.stdout, run.returncode, False).answer)
    assert verdict.passed, (
        f"{verdict.reason}\n--- {name} stdout\n{run.stdout[-3000:]}\n--- stderr\n"
        f"{run.stderr[-2000:]}\n--- toolshim serve\n{log[-4000:]}"
    )
    assert "emulated=true" in log
