"""Codex CLI itself (``@openai/codex`` from npm, pinned) completes a tool-using task through
``toolshim serve`` on a scripted model without native tools: the model asks for a shell command
through Codex's ``exec_command`` tool (emulated), Codex runs it, sends its output back as a
``function_call_output``, and the run ends with the model's final text.

Codex is installed once into a cache folder (``TOOLSHIM_TEST_CACHE``, default
``~/.cache/toolshim-tests``) with npm; its npm package carries its native binary, so nothing
else is downloaded. Without ``npm`` on the machine the test is skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import free_port, start
from toolshim.testing.server import ScriptedUpstream, serve_fake

pytestmark = pytest.mark.e2e

CODEX_VERSION = "0.171.0"
FINAL = "Done: proof.txt holds the greeting."
COMMAND = "printf 'hello from codex' > proof.txt"


@pytest.fixture(scope="session")
def codex() -> Path:
    """The pinned Codex CLI, installed with npm into the test cache on first use."""
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed (Codex CLI comes from the npm registry)")
    cache = Path(os.environ.get("TOOLSHIM_TEST_CACHE") or Path.home() / ".cache/toolshim-tests")
    prefix = cache / f"codex-{CODEX_VERSION}"
    binary = prefix / "node_modules" / ".bin" / "codex"
    if not binary.exists():
        prefix.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                npm,
                "install",
                "--prefix",
                str(prefix),
                "--no-fund",
                "--no-audit",
                "--no-save",
                f"@openai/codex@{CODEX_VERSION}",
            ],
            check=True,
            timeout=600,
            capture_output=True,
        )
    version = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60)
    assert CODEX_VERSION in version.stdout, version.stdout + version.stderr
    return binary


@pytest.fixture
def scripted_model() -> Iterator[tuple[str, ScriptedUpstream]]:
    """A model that rejects native tools, as Ollama does for a model without them."""
    call = {"tool_calls": [{"name": "exec_command", "arguments": {"cmd": COMMAND}}]}
    upstream = ScriptedUpstream({"tools": "reject", "replies": [json.dumps(call), FINAL]})
    with serve_fake(upstream) as server:
        yield server.base_url, upstream


def test_codex_runs_an_emulated_shell_call_through_toolshim(
    codex: Path, scripted_model: tuple[str, ScriptedUpstream], tmp_path: Path
) -> None:
    upstream_url, upstream = scripted_model
    port = free_port()
    proxy = start(
        [
            sys.executable,
            "-m",
            "toolshim.cli.main",
            "serve",
            "--upstream",
            upstream_url,
            "--port",
            str(port),
            "--registry",
            str(tmp_path / "capabilities.sqlite3"),
        ],
        tmp_path / "serve.log",
        f"http://127.0.0.1:{port}/healthz",
    )
    home, work = tmp_path / "codex-home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (home / "config.toml").write_text(
        'model = "fake-model"\n'
        'model_provider = "toolshim"\n\n'
        "[model_providers.toolshim]\n"
        'name = "toolshim"\n'
        f'base_url = "http://127.0.0.1:{port}/v1"\n'
        'wire_api = "responses"\n'
    )
    try:
        run = subprocess.run(
            [
                str(codex),
                "exec",
                "--skip-git-repo-check",
                "--dangerously-bypass-approvals-and-sandbox",
                "--ephemeral",
                "-C",
                str(work),
                "-o",
                str(tmp_path / "last.txt"),
                "Write the greeting into proof.txt",
            ],
            env={**os.environ, "CODEX_HOME": str(home)},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=180,
        )
    finally:
        proxy.stop()
    report = f"codex:\n{run.stdout}\n{run.stderr}\ntoolshim:\n{proxy.output()}"
    assert run.returncode == 0, report
    assert (work / "proof.txt").read_text() == "hello from codex", report
    assert (tmp_path / "last.txt").read_text().strip() == FINAL, report

    sent = upstream.history
    # the native attempt (rejected: learned), the emulated call, the answer after the result
    assert len(sent) == 3, report
    assert "tools" in sent[0] and "tools" not in sent[1] and "tools" not in sent[2]
    assert "exec_command" in sent[1]["messages"][0]["content"]  # described in the prompt
    result = json.dumps(sent[2]["messages"], ensure_ascii=False)
    assert "Process exited with code 0" in result, result  # Codex's function_call_output
    assert "proof.txt" in result  # with the call it answers
