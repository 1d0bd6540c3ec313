"""Server specs from text and tables, their names, and MCP result content as a ToolResult."""

from __future__ import annotations

import pytest

from toolshim.agent.tools import ToolResult
from toolshim.errors import ConfigError
from toolshim.mcp import MCPHttp, MCPStdio, parse_server
from toolshim.mcp.content import tool_result


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("npx -y @modelcontextprotocol/server-filesystem@2026.8.31 /tmp", "server-filesystem"),
        ("uvx mcp-server-fetch", "server-fetch"),
        ("uv run --with mcp weather.py", "weather"),
        ("python3 tools/notes_server.py --stdio", "notes_server"),
        ("/usr/local/bin/mcp-github", "github"),
        ("docker run -i --rm -e TZ=UTC mcp/time", "time"),
        ("https://mcp.example.com/mcp", "mcp_example_com"),
    ],
)
def test_a_server_is_named_after_what_it_runs(text: str, label: str) -> None:
    assert parse_server(text).label == label


def test_text_is_a_url_or_a_shell_command_line() -> None:
    assert parse_server(" https://a.example/mcp ") == MCPHttp("https://a.example/mcp")
    assert parse_server("node 'my server.js' --root \"a b\"") == MCPStdio(
        "node", ("my server.js", "--root", "a b")
    )
    assert MCPStdio("x", name="my.server").label == "my_server"
    assert MCPHttp("https://u:p@a.example/mcp").describe() == "https://a.example/mcp"
    with pytest.raises(ConfigError, match="needs a command"):
        parse_server("   ")
    with pytest.raises(ConfigError, match="cannot read"):
        parse_server("node 'unclosed")


def test_content_blocks_become_text_and_data() -> None:
    blocks = [
        {"type": "text", "text": "first"},
        {"type": "image", "data": "…", "mimeType": "image/png"},
        {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "inside a.txt"}},
        {"type": "resource", "resource": {"uri": "file:///b.bin", "mimeType": "x/bin"}},
        {"type": "resource_link", "uri": "file:///c", "name": "c"},
        {"type": "mystery"},
    ]
    result = tool_result(blocks, {"n": 1}, False)
    assert result.text.split("\n\n") == [
        "first",
        "[image (image/png)]",
        "inside a.txt",
        "[resource file:///b.bin (x/bin)]",
        "[resource link file:///c: c]",
        "[mystery content]",
    ]
    assert result.data == {"n": 1}
    assert tool_result([], {"n": 1}, False).model_text == '{"n":1}'
    assert tool_result([{"type": "text", "text": "no"}], None, True) == ToolResult(
        "no", is_error=True
    )
