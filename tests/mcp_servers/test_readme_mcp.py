"""The README's MCP and schema-tool snippets are the ones that work."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from typing import Any

from tests.responses.readme import readme_blocks
from toolshim.agent.agentfile import parse_agent_spec
from toolshim.mcp import MCPStdio
from toolshim.testing import FakeUpstream, Reply, call


def test_the_agent_file_block() -> None:
    (block,) = readme_blocks("MCP: servers as tools, for every model", "toml")
    data = tomllib.loads(block + '\n[[phases]]\nname = "read"\n')
    (phase,) = parse_agent_spec(data).phases
    assert phase.mcp == (
        MCPStdio(
            "npx",
            ("-y", "@modelcontextprotocol/server-filesystem@2026.8.31", "."),
            tools=("read_text_file", "list_directory"),
        ),
    )


def test_the_chat_flags_exist() -> None:
    blocks = " ".join(readme_blocks("MCP: servers as tools, for every model", "bash"))
    done = subprocess.run(
        [sys.executable, "-m", "toolshim.cli.main", "chat", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"COLUMNS": "200", "NO_COLOR": "1", "PATH": ""},
    )
    for flag in ("--mcp", "--mcp-tools", "--no-builtin-tools", "--strategy", "--temperature"):
        assert flag in blocks
        assert flag in done.stdout
    serve = subprocess.run(
        [sys.executable, "-m", "toolshim.cli.main", "serve", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"COLUMNS": "200", "NO_COLOR": "1", "PATH": ""},
    )
    assert "--mcp-allow" in blocks
    assert "--mcp-allow" in serve.stdout


def test_the_schema_tool_block() -> None:
    (block,) = [b for b in readme_blocks("Use it", "python") if "from_schema" in b]
    upstream = FakeUpstream(
        [Reply(None, [call("stock", {"sku": "A-1"}), call("stock", {"sku": "B-2"})]), "12 left."]
    )
    namespace: dict[str, Any] = {"FAKE": upstream}
    exec(block.replace('upstream="http://127.0.0.1:8080/v1"', "upstream=FAKE"), namespace)
    result = namespace["agent"].run("How many A-1 and B-2?")
    found, missing = result.tool_runs
    assert found.result == '{"sku":"A-1","stock":12}'
    assert missing.status == "error"
    assert missing.result == "Error: no product 'B-2'"
    assert result.output == "12 left."
