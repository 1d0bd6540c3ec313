"""MCP servers as tool sources for any model (the ``mcp`` SDK: ``pip install 'toolshim[mcp]'``).

::

    from toolshim import Agent
    from toolshim.mcp import MCPStdio

    agent = Agent(mcp=[MCPStdio("npx", ["-y", "@modelcontextprotocol/server-filesystem", "."])])
    print(agent.run("What does notes.txt say?").output)

Only :mod:`toolshim.mcp.connection` imports the SDK, and only once a server starts.
"""

from toolshim.mcp.servers import MCPHttp, MCPServerSpec, MCPStdio, parse_server
from toolshim.mcp.toolset import MCPTool, MCPToolset

__all__ = ["MCPHttp", "MCPServerSpec", "MCPStdio", "MCPTool", "MCPToolset", "parse_server"]
