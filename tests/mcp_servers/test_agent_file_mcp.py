"""``[[mcp]]`` in agent files: checked with the rest of the file, run by `toolshim run`."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.mcp_servers.conftest import SERVER
from toolshim.agent.agentfile import load_agent_file, parse_agent_spec
from toolshim.agent.phases import arun_agent_file
from toolshim.engine import Engine
from toolshim.errors import ConfigError
from toolshim.mcp import MCPHttp, MCPStdio
from toolshim.testing import FakeUpstream, Reply, call


def test_top_level_and_phase_servers(tmp_path: Path) -> None:
    file = tmp_path / "agent.toml"
    file.write_text(
        f"""
[[mcp]]
name = "test"
command = ["{sys.executable}", "{SERVER}"]
env = {{ MODE = "x" }}
timeout = 5

[[phases]]
name = "look"
instructions = "Find the weather."

[[phases.mcp]]
url = "http://127.0.0.1:9/mcp"
headers = {{ Authorization = "Bearer t" }}

[[phases]]
name = "say"
""",
        encoding="utf-8",
    )
    spec = load_agent_file(file)
    look, say = spec.phases
    assert look.mcp == (
        MCPStdio(sys.executable, (str(SERVER),), {"MODE": "x"}, None, name="test", timeout=5.0),
        MCPHttp("http://127.0.0.1:9/mcp", {"Authorization": "Bearer t"}),
    )
    assert say.mcp == look.mcp[:1]


def test_every_problem_is_listed() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_agent_spec(
            {
                "mcp": [
                    {"command": "x", "url": "http://a"},
                    {"url": "ftp://a", "args": ["-v"]},
                    {"command": 3, "timeout": -1, "colour": "red"},
                ],
                "phases": [{"name": "a", "mcp": {"command": "x"}}],
            },
            source="agent.toml",
        )
    lines = caught.value.message.splitlines()
    assert (
        "agent.toml: mcp 1: give either 'command' (a stdio server) or 'url' (HTTP), not both"
        in lines
    )
    assert "agent.toml: mcp 2: 'args' is for a 'command' server, not a 'url' one" in lines
    assert "agent.toml: mcp 2: 'url' must start with http:// or https://, not 'ftp://a'" in lines
    assert any("mcp 3: unknown key 'colour'" in line for line in lines)
    assert any("mcp 3: 'timeout' must be a positive number" in line for line in lines)
    assert any("mcp 3: 'command' must be a command line" in line for line in lines)
    assert any("phase 1 ('a'): mcp: must be a list of tables" in line for line in lines)


@pytest.mark.e2e
async def test_a_phase_calls_an_mcp_tool() -> None:
    spec = parse_agent_spec(
        {
            "mcp": [{"command": [sys.executable, str(SERVER)], "name": "test"}],
            "phases": [{"name": "look", "instructions": "Use the weather tool."}],
        }
    )
    upstream = FakeUpstream([Reply(None, [call("weather", {"city": "Oslo"})]), "Oslo: clear."])
    engine = Engine(upstream)
    try:
        run = await arun_agent_file(spec, "Weather in Oslo?", engine=engine, model="m")
    finally:
        await engine.aclose()
    (phase,) = run.phases
    assert [r.name for r in phase.result.tool_runs] == ["weather"]
    assert "Oslo" in phase.result.tool_runs[0].result
    assert run.output == "Oslo: clear."
