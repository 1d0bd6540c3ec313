"""Claude Code itself (from npm, pinned), headless, through `toolshim serve`: a scripted model
asks for a Bash command that writes a file; Claude Code runs it, sends the result back, and the
run ends with the model's final text. Once on a model without native tools (emulated), once
on one with them.

Claude Code is installed into a cache folder on first use (``TOOLSHIM_TEST_CACHE``, default
``~/.cache/toolshim-tests``); the test is skipped only where npm is not installed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from toolshim.testing import FunctionUpstream, Reply, call, free_port, start_serve
from toolshim.testing.npm import npm_executable
from toolshim.testing.server import serve_fake

pytestmark = pytest.mark.e2e

CLAUDE_CODE_VERSION = "2.1.332"
FINAL = "FINAL: hello.txt is written."
ASK = "Please write the file hello.txt with the Bash tool."


@pytest.fixture(scope="session")
def claude() -> Path:
    """The ``claude`` executable of the pinned Claude Code, installed once into the cache."""
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed (Claude Code comes from npm)")
    return npm_executable("@anthropic-ai/claude-code", CLAUDE_CODE_VERSION, "claude")


def _script(target: Path, *, native: bool) -> Any:
    """The model: ask for the Bash command until the file exists, then say the final text."""
    command = f"echo toolshim-was-here > {target} && echo wrote-$((40 + 2))"

    def reply(body: dict[str, Any]) -> Any:
        if target.exists():
            return FINAL
        if ASK not in json.dumps(body["messages"]):
            return "ok"  # (Claude Code's side requests: titles, quota checks)
        arguments = {"command": command, "description": "Write hello.txt"}
        if native:
            assert any(t["function"]["name"] == "Bash" for t in body.get("tools", ()))
            return Reply(None, [call("Bash", arguments)])
        return json.dumps({"tool_calls": [{"name": "Bash", "arguments": arguments}]})

    return reply


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


@pytest.mark.parametrize("native", [False, True], ids=["emulated", "native"])
def test_claude_code_runs_a_bash_tool_through_toolshim(
    claude: Path, tmp_path: Path, workdir: Path, native: bool
) -> None:
    target = workdir / "hello.txt"
    upstream = FunctionUpstream(
        _script(target, native=native), tools="native" if native else "reject"
    )
    with serve_fake(upstream) as fake:
        port = free_port()
        proxy = start_serve(
            upstream=fake.base_url,
            port=port,
            registry=tmp_path / "capabilities.sqlite3",
            log=tmp_path / "serve.log",
        )
        try:
            home = tmp_path / "home"
            home.mkdir()
            env = {
                "PATH": os.environ["PATH"],
                "HOME": str(home),
                "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}",
                "ANTHROPIC_API_KEY": "sk-ant-toolshim-test",
                "DISABLE_TELEMETRY": "1",
                "DISABLE_AUTOUPDATER": "1",
                "DISABLE_ERROR_REPORTING": "1",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            }
            run = subprocess.run(
                [
                    str(claude),
                    "-p",
                    ASK,
                    "--model",
                    "fake-model",
                    "--allowedTools",
                    "Bash",
                    "--output-format",
                    "json",
                ],
                env=env,
                cwd=workdir,
                capture_output=True,
                text=True,
                timeout=300,
            )
        finally:
            proxy.stop()
    log = proxy.output()
    assert run.returncode == 0, f"{run.stdout}\n{run.stderr}\n{log}"
    result = json.loads(run.stdout)
    assert result["result"] == FINAL, result
    assert result["is_error"] is False
    assert target.read_text().strip() == "toolshim-was-here"
    # The request after the call carried the tool's result (the command's output, which its
    # own text does not contain): natively as a tool message answering the call's toolu_ id;
    # emulated, in the history as the emulation writes it for a model without tools.
    after = [b for b in upstream.history if "wrote-42" in json.dumps(b["messages"])]
    assert after, "no request carried the tool_result"
    last = after[-1]["messages"]
    if native:
        result = next(m for m in last if m["role"] == "tool")
        assert result["tool_call_id"].startswith("toolu_call_")
        assert "wrote-42" in result["content"]
    else:
        assert all(m["role"] in ("system", "user", "assistant") for m in last)
        assert "tools" not in after[-1]
    assert f"emulated={str(not native).lower()}" in log
