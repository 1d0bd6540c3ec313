"""The published filesystem server from npm (pinned), driven by the agent loop."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.mcp_servers.conftest import NOTES
from toolshim.agent import Agent
from toolshim.mcp import MCPStdio
from toolshim.testing import FunctionUpstream, Reply, call

pytestmark = pytest.mark.e2e


def test_the_agent_reads_a_file_through_the_filesystem_server(
    filesystem_server: Path, notes_dir: Path, kind: str
) -> None:
    def model(body: dict[str, Any]) -> Any:
        if NOTES in json.dumps(body["messages"]):  # the file came back as a tool result
            return "notes.txt says: " + NOTES
        names = {t["function"]["name"] for t in body.get("tools", ())}
        if kind == "native":
            assert "read_text_file" in names
            return Reply(None, [call("read_text_file", {"path": str(notes_dir / "notes.txt")})])
        arguments = {"path": str(notes_dir / "notes.txt")}
        return json.dumps({"tool_calls": [{"name": "read_text_file", "arguments": arguments}]})

    upstream = FunctionUpstream(model, tools="native" if kind == "native" else "reject")
    server = MCPStdio(str(filesystem_server), [str(notes_dir)], name="files")
    with Agent(mcp=[server], upstream=upstream, model="m") as agent:
        result = agent.run("What does notes.txt say?")
        listed = {t.name for t in agent.tools}
    assert {"read_text_file", "list_directory", "write_file"} <= listed
    (run,) = result.tool_runs
    assert run.status == "ok"
    assert run.result.strip() == NOTES
    assert result.output == "notes.txt says: " + NOTES


def test_a_path_outside_the_allowed_directory_is_an_error_result(
    filesystem_server: Path, notes_dir: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("hidden", encoding="utf-8")

    def model(body: dict[str, Any]) -> Any:
        if body["messages"][-1]["role"] == "tool":
            return "I may not read that file."
        return Reply(None, [call("read_text_file", {"path": str(secret)})])

    upstream = FunctionUpstream(model, tools="native")
    server = MCPStdio(str(filesystem_server), [str(notes_dir)], name="files")
    with Agent(mcp=[server], upstream=upstream, model="m") as agent:
        result = agent.run("Read secret.txt")
    (run,) = result.tool_runs
    assert run.status == "error"
    assert run.error_type == "ToolError"
    assert "hidden" not in run.result
    assert "outside allowed directories" in run.result.lower() or "denied" in run.result.lower()
    assert result.output == "I may not read that file."
