"""`toolshim chat --mcp`: the servers start with the chat, /mcp lists them and their tools, and
a model's call reaches the server (a scripted model, the SDK-written test server on stdio)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.chat.conftest import Upstream
from tests.mcp_servers.conftest import SERVER

pytestmark = pytest.mark.e2e


def _chat(upstream: Upstream, lines: str, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "toolshim.cli.main",
            "chat",
            "--upstream",
            upstream.base_url,
            "--model",
            "llama3.2",
            "--no-refresh",
            *flags,
        ],
        input=lines,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"},
    )


def test_chat_with_an_mcp_server(upstream: Upstream, tmp_path: Path) -> None:
    upstream.script(
        replies=[
            {"tool_calls": [{"name": "weather", "arguments": {"city": "Paris"}}]},
            "Paris: clear, 18 C.",
        ]
    )
    command = shlex.join([sys.executable, str(SERVER)])
    done = _chat(upstream, "/mcp\n/tools\nWeather in Paris?\n", "--mcp", command)
    assert done.returncode == 0, done.stderr[-3000:]
    out = " ".join(done.stdout.split())
    assert "1 MCP server(s)" in out
    assert "ready" in out and "ship_parcel" in out
    assert "weather" in out
    assert "Paris: clear, 18 C." in out
    requests = upstream.requests()
    offered = [t["function"]["name"] for t in requests[0].get("tools", ())]
    assert "weather" in offered and "calculate" in offered
    (result,) = [m for m in requests[-1]["messages"] if m["role"] == "tool"]
    assert json.loads(result["content"]) == {"city": "Paris", "celsius": 18, "sky": "clear"}


def test_a_server_that_cannot_start_is_a_warning(upstream: Upstream) -> None:
    upstream.script(replies=["Hello."])
    done = _chat(upstream, "Hi\n", "--mcp", "/nonexistent/server --stdio")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "could not start" in " ".join(done.stdout.split())
    assert "Hello." in done.stdout
