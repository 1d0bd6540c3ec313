"""`toolshim serve --mcp-allow` as a process: the openai SDK's hosted mcp tool is run by the
proxy against the SDK-written test server, in front of the scripted upstream process."""

from __future__ import annotations

import json

import openai
import pytest

from tests.e2e.conftest import FakeUpstreamProcess, ProxyFactory

pytestmark = pytest.mark.e2e


def test_serve_runs_an_allowed_mcp_tool(
    serve: ProxyFactory,
    fake_upstream: FakeUpstreamProcess,
    http_server: str,
) -> None:
    fake_upstream.script(
        models=["m"],
        replies=[
            {"tool_calls": [{"name": "weather", "arguments": {"city": "Oslo"}}]},
            "Oslo is clear.",
        ],
    )
    proxy = serve("--mcp-allow", http_server)
    client = openai.OpenAI(base_url=proxy.url, api_key="sk", max_retries=0)
    try:
        response = client.responses.create(
            model="m",
            input="Weather in Oslo?",
            tools=[
                {
                    "type": "mcp",
                    "server_label": "test",
                    "server_url": http_server,
                    "require_approval": "never",
                    "allowed_tools": ["weather"],
                }
            ],
        )
    finally:
        client.close()
    assert [item.type for item in response.output] == ["mcp_list_tools", "mcp_call", "message"]
    assert json.loads(response.output[1].output or "")["city"] == "Oslo"
    assert response.output_text == "Oslo is clear."
