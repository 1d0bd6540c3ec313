"""The embedded 0.5B answers from an MCP server's tool: the published filesystem server (npm,
pinned) on a temporary directory, through ``Agent`` and through ``toolshim chat --mcp``.

Measured on this model (temperature 0, emulated): offered all 14 of the server's tools it
answers "What does notes.txt say?" without calling any (it makes up the file's text) in the
hermes and json dialects, single and decision strategies, with or without a system prompt;
offered read_text_file and list_directory it reads the file only under the decision strategy
(not with four tools). So the tests offer those two, with the decision strategy.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import openai
import pytest

import anthropic
from tests.mcp_servers.conftest import install_filesystem_server, run_http_server, write_notes
from tests.model.conftest import _why_unavailable
from toolshim import Agent
from toolshim.capabilities.registry import Registry
from toolshim.engine import Engine
from toolshim.local import EmbeddedServer
from toolshim.mcp import MCPStdio
from toolshim.server import create_app
from toolshim.testing import ServedApp
from toolshim.upstreams.openai_http import OpenAIUpstream

pytestmark = pytest.mark.model

pytest.importorskip("mcp")

QUESTION = "What does notes.txt say?"
TOOLS = ("read_text_file", "list_directory")


def test_the_agent_answers_from_the_filesystem_server(qwen: EmbeddedServer, tmp_path: Path) -> None:
    server = install_filesystem_server()
    notes = write_notes(tmp_path)
    registry = Registry.open(tmp_path / "capabilities.sqlite3")
    qwen.record_capabilities(registry)
    engine = Engine(OpenAIUpstream(qwen.base_url, key=qwen.key, timeout=300), registry=registry)
    files = MCPStdio(str(server), [str(notes)], name="files", tools=TOOLS)
    with Agent(
        mcp=[files],
        upstream=engine,
        model=qwen.model,
        strategy="decision",
        params={"temperature": 0},
    ) as agent:
        result = agent.run(QUESTION)
    engine.close()
    reads = [r for r in result.tool_runs if r.name == "read_text_file" and r.status == "ok"]
    assert reads, result.to_dict()
    assert "Thursday" in result.output and "room 4" in result.output, result.output


def test_toolshim_chat_answers_from_the_filesystem_server(tmp_path: Path) -> None:
    reason = _why_unavailable()
    if reason:
        pytest.skip(reason)
    server = install_filesystem_server()
    notes = write_notes(tmp_path)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "toolshim.cli.main",
            "chat",
            "--mcp",
            f"{server} {notes}",
            "--mcp-tools",
            ",".join(TOOLS),
            "--no-builtin-tools",
            "--strategy",
            "decision",
            "--temperature",
            "0",
        ],
        input=QUESTION + "\n",
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    read = [i for i, line in enumerate(lines) if "✓ read_text_file" in line]
    assert read, done.stdout[-3000:]
    answer = " ".join(lines[read[-1] + 1 :])  # the reply after the tool's result line
    assert "Thursday" in answer and "room 4" in answer, done.stdout[-3000:]
    assert "Traceback" not in done.stderr


def test_the_proxy_runs_a_hosted_mcp_tool_for_the_model(
    qwen: EmbeddedServer, tmp_path: Path
) -> None:
    """Responses (openai SDK) and Messages (anthropic SDK) through the proxy on the 0.5B, with
    the SDK-written test server on HTTP allowed by ``mcp_allow``: measured, it calls weather
    with the default strategy and answers from the result on both."""
    registry = Registry.open(tmp_path / "capabilities.sqlite3")
    qwen.record_capabilities(registry)
    engine = Engine(OpenAIUpstream(qwen.base_url, key=qwen.key, timeout=300), registry=registry)
    with run_http_server(tmp_path) as url:
        app = create_app(engine, default_model=qwen.model, pin_model=True, mcp_allow=(url,))
        with ServedApp(app) as served:
            client = openai.OpenAI(base_url=served.base_url, api_key="unused", max_retries=0)
            response = client.responses.create(
                model=qwen.model,
                input="What is the weather in Paris?",
                temperature=0,
                tools=[
                    {
                        "type": "mcp",
                        "server_label": "weather",
                        "server_url": url,
                        "require_approval": "never",
                        "allowed_tools": ["weather"],
                    }
                ],
            )
            client.close()
            messages = anthropic.Anthropic(base_url=served.url, api_key="unused", max_retries=0)
            message = messages.beta.messages.create(
                model=qwen.model,
                max_tokens=200,
                messages=[{"role": "user", "content": "What is the weather in Paris?"}],
                mcp_servers=[
                    {
                        "type": "url",
                        "url": url,
                        "name": "weather",
                        "tool_configuration": {"allowed_tools": ["weather"]},
                    }
                ],
                betas=["mcp-client-2025-04-04"],
                extra_body={"temperature": 0},
            )
            messages.close()
    kinds = [item.type for item in response.output]
    assert kinds == ["mcp_list_tools", "mcp_call", "message"], response.model_dump()
    assert "18" in response.output_text, response.output_text
    blocks = [block.type for block in message.content]
    assert blocks[:2] == ["mcp_tool_use", "mcp_tool_result"], message.model_dump()
    assert "18" in message.content[-1].text, message.model_dump()
