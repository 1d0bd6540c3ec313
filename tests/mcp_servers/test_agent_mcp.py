"""MCP servers as the agent's tools, on real servers: the SDK-written test server over stdio and
HTTP, driven by a scripted model (native tool calls, or emulated in the prompt)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.agent.conftest import Kind, calls_reply, fake_for
from tests.mcp_servers.conftest import SERVER, sdk_server
from toolshim.agent import Agent
from toolshim.errors import MCPServerError
from toolshim.mcp import MCPHttp, MCPStdio, MCPToolset
from toolshim.testing import FunctionUpstream, Reply, call

pytestmark = pytest.mark.e2e


def _listed_schemas() -> dict[str, Any]:
    """The test server's tools' inputSchema, as the SDK's own client reads them."""
    import anyio

    async def read() -> dict[str, Any]:
        parameters = StdioServerParameters(command=sys.executable, args=[str(SERVER)])
        async with Client(parameters) as client:
            listing = await client.list_tools()
            return {t.name: t.input_schema for t in listing.tools}

    return anyio.run(read)


@pytest.mark.parametrize("dialect", ["json", "hermes"])
def test_a_nested_schema_reaches_the_prompt_whole(dialect: str) -> None:
    """Nested objects, an enum and descriptions: the prompt holds the server's inputSchema as is."""
    expected = _listed_schemas()["ship_parcel"]
    assert expected["$defs"]["Address"]["properties"]["country"]["enum"] == ["FR", "DE", "NL"]
    upstream = fake_for("emulated", "Nothing to ship.")
    with Agent(mcp=[sdk_server()], upstream=upstream, dialect=dialect, model="m") as agent:
        result = agent.run("Hello")
    assert result.output == "Nothing to ship."
    prompt = "\n".join(
        m["content"] for m in upstream.history[-1]["messages"] if m["role"] == "system"
    )
    rendered = json.dumps(expected, ensure_ascii=False)
    assert rendered in prompt
    assert json.loads(rendered) == expected


def test_native_tools_carry_the_input_schema_unchanged() -> None:
    expected = _listed_schemas()
    upstream = fake_for("native", "ok")
    with Agent(mcp=[sdk_server()], upstream=upstream, model="m") as agent:
        agent.run("Hello")
    sent = {t["function"]["name"]: t["function"] for t in upstream.history[0]["tools"]}
    assert set(sent) == set(expected)
    for name, schema in expected.items():
        assert sent[name]["parameters"] == schema


def test_results_text_structured_and_error(kind: Kind) -> None:
    upstream = fake_for(
        kind,
        calls_reply(
            kind,
            ("weather", {"city": "Paris"}),
            ("refuse", {"reason": "not today"}),
        ),
        "Paris is clear at 18 C; the refusal said not today.",
    )
    with Agent(mcp=[sdk_server()], upstream=upstream, model="m") as agent:
        result = agent.run("Weather in Paris, and try refuse")
    assert result.completed
    runs = {r.name: r for r in result.tool_runs}
    assert runs["weather"].status == "ok"
    assert json.loads(runs["weather"].result) == {"city": "Paris", "celsius": 18, "sky": "clear"}
    assert runs["refuse"].status == "error"
    assert runs["refuse"].error_type == "ToolError"
    assert runs["refuse"].result.startswith("Error: ")
    assert runs["refuse"].result.endswith("refused: not today")


def test_a_streamable_http_server_with_headers(http_server: str) -> None:
    upstream = FunctionUpstream(
        lambda body: (
            "done"
            if body["messages"][-1]["role"] == "tool"
            else Reply(None, [call("header", {"name": "X-Team"})])
        ),
        tools="native",
    )
    server = MCPHttp(http_server, headers={"X-Team": "blue"}, name="web")
    with Agent(mcp=[server], upstream=upstream, model="m") as agent:
        result = agent.run("Which team?")
    assert [r.result for r in result.tool_runs] == ["blue"]
    assert result.output == "done"


def test_the_tool_list_is_read_again_when_it_changes() -> None:
    seen: list[list[str]] = []

    def model(body: dict[str, Any]) -> Any:
        names = [t["function"]["name"] for t in body.get("tools", ())]
        seen.append(names)
        if len(seen) == 1:
            return Reply(None, [call("add_tool")])
        if len(seen) == 2:
            return Reply(None, [call("extra")])
        return "The extra tool said: " + body["messages"][-1]["content"]

    upstream = FunctionUpstream(model, tools="native")
    with Agent(mcp=[sdk_server()], upstream=upstream, model="m") as agent:
        result = agent.run("Add a tool and use it")
    assert "extra" not in seen[0]
    assert "extra" in seen[1]
    assert result.output == "The extra tool said: extra here"


def test_servers_with_the_same_tools_get_prefixed_names() -> None:
    toolset = MCPToolset([sdk_server(), MCPStdio(sys.executable, [str(SERVER)], name="other")])
    upstream = FunctionUpstream(
        lambda body: (
            "done"
            if body["messages"][-1]["role"] == "tool"
            else Reply(None, [call("other__weather", {"city": "Oslo"})])
        ),
        tools="native",
    )

    def weather() -> str:
        """A function tool that takes the name 'weather' first."""
        return "sunny"

    with Agent([], mcp=toolset, upstream=upstream, model="m") as agent:
        names = [t.name for t in agent.tools]
        result = agent.run("Weather in Oslo")
    assert "test__weather" in names and "other__weather" in names
    assert "weather" not in names
    assert json.loads(result.tool_runs[0].result)["city"] == "Oslo"
    solo = Agent([weather], mcp=[sdk_server()], upstream=upstream, model="m")
    with solo:
        names = [t.name for t in solo.tools]
    assert "weather" in names and "test__weather" in names


def test_killing_the_server_mid_run_is_a_tool_error_and_the_agent_answers(
    tmp_path: Path, kind: Kind
) -> None:
    pid_file = tmp_path / "pid"

    def kill_soon() -> None:
        time.sleep(1.0)  # the slow call is running by now
        os.kill(int(pid_file.read_text()), signal.SIGKILL)

    state = {"turn": 0}

    def model(body: dict[str, Any]) -> Any:
        state["turn"] += 1
        if state["turn"] == 1:
            threading.Thread(target=kill_soon, daemon=True).start()
            return _reply(kind, "slow", {"seconds": 30})
        if state["turn"] == 2:
            return _reply(kind, "weather", {"city": "Rome"})
        return "The slow tool failed (the server crashed), but Rome is clear."

    upstream = FunctionUpstream(model, tools="native" if kind == "native" else "reject")
    server = sdk_server(MCP_TEST_PID_FILE=str(pid_file))
    started = time.monotonic()
    with Agent(mcp=[server], upstream=upstream, model="m") as agent:
        result = agent.run("Wait 30 s, then the weather in Rome")
    assert time.monotonic() - started < 20
    slow, weather = result.tool_runs
    assert slow.status == "error"
    assert slow.error_type == "MCPServerError"
    assert "stopped during the call to 'slow'" in slow.result
    assert weather.status == "ok"  # restarted once for the next call
    assert "Rome" in weather.result
    assert result.completed
    assert result.output.endswith("Rome is clear.")


def test_a_hung_server_times_out_as_a_tool_error() -> None:
    upstream = fake_for("native", Reply(None, [call("slow", {"seconds": 30})]), "It hung.")
    server = MCPStdio(sys.executable, [str(SERVER)], name="test", timeout=1.0)
    with Agent(mcp=[server], upstream=upstream, model="m") as agent:
        result = agent.run("Wait")
    run = result.tool_runs[0]
    assert run.status == "error"
    assert isinstance(run.value, MCPServerError)
    assert run.value.timed_out
    assert "did not answer the call to 'slow' within 1 s" in run.result
    assert result.output == "It hung."


def test_a_server_restarts_once_then_stays_down() -> None:
    replies = [Reply(None, [call("crash")]) for _ in range(2)]
    replies.append(Reply(None, [call("weather", {"city": "Oslo"})]))
    upstream = fake_for("native", *replies, "Gave up.")
    with Agent(mcp=[sdk_server()], upstream=upstream, model="m", max_turns=6) as agent:
        result = agent.run("Crash it")
    first, second, third = (r.result for r in result.tool_runs)
    assert "stopped during the call to 'crash'" in first
    assert "crashing on purpose" in first  # its stderr's last lines
    assert "will be started again" in first
    assert "will not be started again" in second
    assert "is down" in third
    assert result.output == "Gave up."


def test_a_server_that_cannot_start_is_a_warning_not_a_crash() -> None:
    upstream = fake_for("native", "I have no tools.")
    agent = Agent(mcp=["/nonexistent/mcp-server --flag"], upstream=upstream, model="m")
    result = agent.run("Hello")
    assert result.output == "I have no tools."
    assert any("could not start" in w for w in result.warnings)
    assert "tools" not in upstream.history[0]


def test_a_run_without_entering_starts_and_stops_the_servers() -> None:
    upstream = fake_for("native", Reply(None, [call("weather", {"city": "Oslo"})]), "Clear.")
    agent = Agent(mcp=[sdk_server()], upstream=upstream, model="m")
    result = agent.run("Weather in Oslo")
    assert result.output == "Clear."
    assert agent.mcp is not None
    assert [c.state for c in agent.mcp.connections] == ["stopped"]


def _reply(kind: Kind, name: str, arguments: dict[str, Any]) -> Any:
    return calls_reply(kind, (name, arguments))


def test_tools_picks_which_of_a_servers_tools_are_offered() -> None:
    upstream = fake_for("native", "ok")
    server = MCPStdio(sys.executable, [str(SERVER)], name="test", tools=["weather", "slow"])
    with Agent(mcp=[server], upstream=upstream, model="m") as agent:
        agent.run("Hello")
        assert agent.mcp is not None
        (described,) = agent.mcp.describe()
    assert [t["function"]["name"] for t in upstream.history[0]["tools"]] == ["weather", "slow"]
    assert described["tools"] == ["weather", "slow"]
    assert described["state"] == "ready"


def test_a_server_that_never_answers_at_start_is_given_up_on_in_time() -> None:
    upstream = fake_for("native", "Fine without it.")
    silent = MCPStdio(
        sys.executable, ["-c", "import time; time.sleep(60)"], name="silent", startup_timeout=1.0
    )
    started = time.monotonic()
    with Agent(mcp=[silent, sdk_server()], upstream=upstream, model="m") as agent:
        result = agent.run("Hello")
        assert agent.mcp is not None
        states = {d["name"]: d["state"] for d in agent.mcp.describe()}
    assert time.monotonic() - started < 15
    assert states == {"silent": "down", "test": "ready"}
    (warning,) = [w for w in result.warnings if "silent" in w]
    assert "did not start within 1 s" in warning
    assert "weather" in [t["function"]["name"] for t in upstream.history[0]["tools"]]


def test_the_servers_stderr_goes_to_the_debug_log(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="toolshim.mcp")
    upstream = fake_for("native", "ok")
    with Agent(mcp=[sdk_server()], upstream=upstream, model="m") as agent:
        agent.run("Hello")
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert "MCP server 'test': toolshim test MCP server starting" in lines


def test_servers_started_on_one_loop_are_not_used_from_another() -> None:
    upstream = fake_for("native", Reply(None, [call("weather", {"city": "Oslo"})]), "No tool.")
    with Agent(mcp=[sdk_server()], upstream=upstream, model="m") as agent:  # the engine's loop
        result = asyncio.run(agent.arun("Weather in Oslo"))
    (run,) = result.tool_runs
    assert run.status == "error"
    assert "was started on another event loop" in run.result
    assert result.output == "No tool."
