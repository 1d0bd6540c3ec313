"""An MCP server written with the SDK (``MCPServer``) for the tests: stdio, or HTTP on 127.0.0.1.

``python tests/mcp_servers/server.py`` serves on stdio; ``python tests/mcp_servers/server.py PORT`` serves
streamable HTTP at ``http://127.0.0.1:PORT/mcp``. ``MCP_TEST_PID_FILE`` (if set) receives the
process id, so a test can kill the server while a call runs.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Annotated, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

app = MCPServer("toolshim-test")


class Address(BaseModel):
    """Where a parcel goes."""

    street: str = Field(description="Street and number, e.g. '12 Rue de Rivoli'")
    city: str = Field(description="City name")
    country: Literal["FR", "DE", "NL"] = Field(description="ISO country code")


@app.tool()
def ship_parcel(
    to: Annotated[Address, Field(description="The delivery address")],
    speed: Annotated[Literal["economy", "express"], Field(description="How fast it travels")],
    weight_kg: Annotated[float, Field(description="Weight in kilograms", gt=0)] = 1.0,
) -> str:
    """Ship a parcel to an address."""
    return f"parcel of {weight_kg} kg to {to.street}, {to.city} ({to.country}) by {speed}"


@app.tool()
def weather(city: str) -> dict[str, object]:
    """Current weather in a city, as data."""
    return {"city": city, "celsius": 18, "sky": "clear"}


@app.tool()
def refuse(reason: str) -> str:
    """Always fails with the reason given."""
    raise ToolError(f"refused: {reason}")


@app.tool()
def slow(seconds: float) -> str:
    """Waits, then answers."""
    time.sleep(seconds)
    return f"waited {seconds} s"


@app.tool()
def crash() -> str:
    """Ends the server's process."""
    print("crashing on purpose", file=sys.stderr, flush=True)
    os._exit(3)


@app.tool()
async def add_tool(ctx: Context) -> str:
    """Adds the tool 'extra' and says the tool list changed."""

    def extra() -> str:
        """A tool added while the server runs."""
        return "extra here"

    app.add_tool(extra)
    await ctx.notify_tools_changed()
    return "added 'extra'"


@app.tool()
def header(name: str, ctx: Context) -> str:
    """The value of an HTTP request header (HTTP only)."""
    return (ctx.headers or {}).get(name.lower(), "(none)")


if __name__ == "__main__":
    pid_file = os.environ.get("MCP_TEST_PID_FILE")
    if pid_file:
        with open(pid_file, "w") as out:
            out.write(str(os.getpid()))
    print("toolshim test MCP server starting", file=sys.stderr, flush=True)
    if len(sys.argv) > 1:
        app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
    else:
        app.run()
