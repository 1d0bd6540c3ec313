"""Hosted MCP tools through the proxy: a Responses request's ``mcp`` tool, allow-listed with
``mcp_allow``, is run by toolshim itself for a model with native tools and for one without
(the openai SDK as the client, the SDK-written test server on HTTP)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

import anthropic
from tests.responses.readme import readme_blocks
from toolshim.capabilities.registry import Registry
from toolshim.engine import Engine
from toolshim.server import create_app
from toolshim.server.hosted_mcp import allowed_url
from toolshim.server.limits import Limits
from toolshim.testing import FunctionUpstream, Reply, ServedApp, call

pytestmark = pytest.mark.e2e


def _model(kind: str) -> Any:
    """Calls weather (and refuse) once, then answers from what came back."""

    def reply(body: dict[str, Any]) -> Any:
        text = json.dumps(body["messages"])
        if "celsius" in text:
            return "Paris is clear at 18 C."
        if kind == "native":
            names = {t["function"]["name"] for t in body.get("tools", ())}
            assert {"weather", "refuse"} <= names
            return Reply(
                None, [call("weather", {"city": "Paris"}), call("refuse", {"reason": "no"})]
            )
        calls = [
            {"name": "weather", "arguments": {"city": "Paris"}},
            {"name": "refuse", "arguments": {"reason": "no"}},
        ]
        return json.dumps({"tool_calls": calls})

    return reply


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[Any]:
    """``proxy(upstream, allow)``: the proxy on a real port; yields an openai client for it."""
    opened: list[Any] = []

    def start(upstream: Any, allow: tuple[str, ...], **options: Any) -> openai.OpenAI:
        registry = Registry.open(tmp_path / f"registry{len(opened)}.sqlite3", profiles=False)
        app = create_app(Engine(upstream, registry=registry), mcp_allow=allow, **options)
        context = ServedApp(app)
        client = openai.OpenAI(base_url=context.__enter__().base_url, api_key="sk", max_retries=0)
        opened.append((context, client, registry))
        return client

    try:
        yield start
    finally:
        for context, client, registry in reversed(opened):
            client.close()
            context.__exit__(None, None, None)
            registry.close()


def _tool(url: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "mcp",
        "server_label": "test",
        "server_url": url,
        "require_approval": "never",
        "allowed_tools": ["weather", "refuse"],
        **extra,
    }


def test_an_allowed_mcp_tool_is_run_by_the_proxy(proxy: Any, http_server: str, kind: str) -> None:
    upstream = FunctionUpstream(_model(kind), tools="native" if kind == "native" else "reject")
    client = proxy(upstream, (http_server,))
    response = client.responses.create(
        model="m", input="Weather in Paris?", tools=[_tool(http_server)]
    )
    listed, weather, refused, message = response.output
    assert listed.type == "mcp_list_tools"
    assert listed.server_label == "test"
    assert [t.name for t in listed.tools] == ["weather", "refuse"]
    assert listed.tools[0].input_schema["properties"]["city"]["type"] == "string"
    assert weather.type == "mcp_call" and weather.name == "weather"
    assert json.loads(weather.arguments) == {"city": "Paris"}
    assert json.loads(weather.output or "") == {"city": "Paris", "celsius": 18, "sky": "clear"}
    assert weather.error is None
    assert refused.type == "mcp_call" and refused.status == "failed"
    assert refused.error is not None and refused.error.type == "mcp_tool_execution_error"
    assert message.type == "message"
    assert response.output_text == "Paris is clear at 18 C."


def test_an_mcp_tool_off_the_allow_list_is_never_reached(proxy: Any) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.2)
    accepted: list[Any] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            try:
                accepted.append(listener.accept())
            except OSError:
                continue

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/mcp"
    upstream = FunctionUpstream(lambda body: "No tools here.", tools="native")
    client = proxy(upstream, ("https://mcp.example.com/",))
    try:
        response = client.responses.create(model="m", input="Hi", tools=[_tool(url)])
    finally:
        done.set()
        thread.join(5)
        listener.close()
    assert accepted == []
    assert [item.type for item in response.output] == ["message"]
    warnings = response.model_dump()["toolshim"]["warnings"]
    assert any("mcp tool" in w and "dropped" in w for w in warnings), warnings
    assert "tools" not in upstream.history[0]


def _weather_model(body: dict[str, Any]) -> Any:
    """Calls weather once, then answers from its result (or from its refusal)."""
    tools = [m for m in body["messages"] if m["role"] == "tool"]
    if tools:
        return f"Answer from: {tools[-1]['content']}"
    return Reply(None, [call("weather", {"city": "Paris"})])


def test_a_call_waits_for_approval_then_runs(proxy: Any, http_server: str) -> None:
    upstream = FunctionUpstream(_weather_model, tools="native")
    client = proxy(upstream, (http_server,))
    tool = {k: v for k, v in _tool(http_server).items() if k != "require_approval"}
    first = client.responses.create(model="m", input="Weather in Paris?", tools=[tool])
    listed, asked = first.output
    assert listed.type == "mcp_list_tools"
    assert asked.type == "mcp_approval_request"
    assert (asked.server_label, asked.name) == ("test", "weather")
    assert json.loads(asked.arguments) == {"city": "Paris"}
    history = [
        {"role": "user", "content": "Weather in Paris?"},
        *(item.model_dump(exclude_none=True) for item in first.output),
    ]
    answer = {"type": "mcp_approval_response", "approval_request_id": asked.id}
    approved = client.responses.create(
        model="m", input=[*history, {**answer, "approve": True}], tools=[tool]
    )
    _, ran, message = approved.output
    assert ran.type == "mcp_call" and ran.approval_request_id == asked.id
    assert json.loads(ran.output or "")["celsius"] == 18
    assert message.type == "message" and '"celsius": 18' in approved.output_text
    denied = client.responses.create(
        model="m",
        input=[*history, {**answer, "approve": False, "reason": "not now"}],
        tools=[tool],
    )
    _, refused, _ = denied.output
    assert refused.status == "failed" and refused.error is not None
    assert denied.output_text == "Answer from: Error: the user did not approve this call: not now"


def test_tools_named_under_never_run_without_approval(proxy: Any, http_server: str) -> None:
    client = proxy(FunctionUpstream(_weather_model, tools="native"), (http_server,))
    tool = {**_tool(http_server), "require_approval": {"never": {"tool_names": ["weather"]}}}
    response = client.responses.create(model="m", input="Weather in Paris?", tools=[tool])
    assert [item.type for item in response.output] == ["mcp_list_tools", "mcp_call", "message"]


def test_bad_approvals_are_a_400(proxy: Any, http_server: str) -> None:
    client = proxy(FunctionUpstream(_weather_model, tools="native"), (http_server,))
    with pytest.raises(openai.BadRequestError, match="require_approval must be"):
        client.responses.create(
            model="m", input="Hi", tools=[{**_tool(http_server), "require_approval": "sometimes"}]
        )
    orphan = {"type": "mcp_approval_response", "approval_request_id": "mcpr_x", "approve": True}
    with pytest.raises(openai.BadRequestError, match="no mcp_approval_request item"):
        client.responses.create(
            model="m", input=[{"role": "user", "content": "Hi"}, orphan], tools=[_tool(http_server)]
        )


def test_a_streamed_responses_request_gets_the_answer_as_events(
    proxy: Any, http_server: str
) -> None:
    upstream = FunctionUpstream(_model("emulated"), tools="reject")
    client = proxy(upstream, (http_server,))
    with client.responses.stream(
        model="m", input="Weather in Paris?", tools=[_tool(http_server)]
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert "response.output_text.delta" in kinds
    assert [item.type for item in final.output] == [
        "mcp_list_tools",
        "mcp_call",
        "mcp_call",
        "message",
    ]
    assert final.output_text == "Paris is clear at 18 C."


def _messages_client(proxy_client: openai.OpenAI) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=str(proxy_client.base_url).removesuffix("/v1/"), api_key="sk", max_retries=0
    )


def test_mcp_servers_on_messages_are_run_by_the_proxy(
    proxy: Any, http_server: str, kind: str
) -> None:
    upstream = FunctionUpstream(_model(kind), tools="native" if kind == "native" else "reject")
    client = _messages_client(proxy(upstream, (http_server.removesuffix("/mcp"),)))
    try:
        message = client.beta.messages.create(
            model="m",
            max_tokens=200,
            messages=[{"role": "user", "content": "Weather in Paris?"}],
            mcp_servers=[
                {
                    "type": "url",
                    "url": http_server,
                    "name": "test",
                    "authorization_token": "t0k",
                    "tool_configuration": {"allowed_tools": ["weather", "refuse"]},
                }
            ],
            betas=["mcp-client-2025-04-04"],
        )
    finally:
        client.close()
    use, result, failed_use, failed, text = message.content
    assert use.type == "mcp_tool_use" and use.server_name == "test" and use.name == "weather"
    assert use.input == {"city": "Paris"}
    assert result.type == "mcp_tool_result" and result.tool_use_id == use.id
    assert not result.is_error
    assert '"celsius": 18' in result.content[0].text
    assert failed_use.name == "refuse" and failed.is_error
    assert text.type == "text" and text.text == "Paris is clear at 18 C."


def test_mcp_servers_off_the_allow_list_are_dropped_with_a_warning(proxy: Any) -> None:
    upstream = FunctionUpstream(lambda body: "No tools here.", tools="native")
    client = _messages_client(proxy(upstream, ("https://mcp.example.com/",)))
    try:
        raw = client.beta.messages.with_raw_response.create(
            model="m",
            max_tokens=50,
            messages=[{"role": "user", "content": "Hi"}],
            mcp_servers=[{"type": "url", "url": "http://127.0.0.1:9/mcp", "name": "far"}],
            betas=["mcp-client-2025-04-04"],
        )
    finally:
        client.close()
    data = json.loads(raw.http_response.text)
    assert [block["type"] for block in data["content"]] == ["text"]
    assert any("MCP server 'far' dropped" in w for w in data["toolshim"]["warnings"])
    assert "tools" not in upstream.history[0]


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("https://mcp.example.com/mcp", True),
        ("https://mcp.example.com/mcp/v2", True),
        ("https://mcp.example.com:443/mcp", True),
        ("https://mcp.example.com/mcpx", False),
        ("https://mcp.example.com.evil.net/mcp", False),
        ("http://mcp.example.com/mcp", False),
        ("https://mcp.example.com:8443/mcp", False),
        ("https://user@mcp.example.com/mcp", False),
        ("https://tools.example.com/", True),
        ("ftp://tools.example.com/", False),
    ],
)
def test_the_allow_list_matches_origin_and_path(url: str, allowed: bool) -> None:
    rules = ("https://mcp.example.com/mcp", "https://tools.example.com")
    assert allowed_url(url, rules) is allowed


def test_more_mcp_tools_than_the_proxy_allows_is_a_400(proxy: Any, http_server: str) -> None:
    upstream = FunctionUpstream(lambda body: "x", tools="native")
    client = proxy(upstream, (http_server,), limits=Limits(max_tools=3))
    everything = {k: v for k, v in _tool(http_server).items() if k != "allowed_tools"}
    with pytest.raises(openai.BadRequestError, match="narrow them with allowed_tools"):
        client.responses.create(model="m", input="Hi", tools=[everything])
    assert upstream.history == []


def test_the_readme_snippet(
    proxy: Any, http_server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (block,) = [
        b
        for b in readme_blocks("MCP: servers as tools, for every model", "python")
        if "responses.create" in b
    ]
    upstream = FunctionUpstream(_model("native"), tools="native")
    client = proxy(upstream, (http_server,))
    code = block.replace("http://127.0.0.1:8080/v1", str(client.base_url)).replace(
        "https://mcp.example.com/mcp", http_server
    )
    code = code.replace('"allowed_tools": ["weather"]', '"allowed_tools": ["weather", "refuse"]')
    exec(code, {})
    printed = capsys.readouterr().out
    assert printed.strip() == "['mcp_list_tools', 'mcp_call', 'mcp_call', 'message']"


def test_a_streamed_messages_request_gets_the_answer_as_events(
    proxy: Any, http_server: str
) -> None:
    upstream = FunctionUpstream(_model("native"), tools="native")
    client = _messages_client(proxy(upstream, (http_server,)))
    try:
        with client.beta.messages.stream(
            model="m",
            max_tokens=200,
            messages=[{"role": "user", "content": "Weather in Paris?"}],
            mcp_servers=[{"type": "url", "url": http_server, "name": "test"}],
            betas=["mcp-client-2025-04-04"],
        ) as stream:
            final = stream.get_final_message()
    finally:
        client.close()
    kinds = [block.type for block in final.content]
    assert kinds == ["mcp_tool_use", "mcp_tool_result", "mcp_tool_use", "mcp_tool_result", "text"]
    assert final.content[0].input == {"city": "Paris"}
    assert final.content[-1].text == "Paris is clear at 18 C."
    assert final.stop_reason == "end_turn"


def test_a_hosted_answer_sent_back_as_history_keeps_the_calls(proxy: Any, http_server: str) -> None:
    upstream = FunctionUpstream(_model("native"), tools="native")
    client = proxy(upstream, (http_server,))
    first = client.responses.create(
        model="m", input="Weather in Paris?", tools=[_tool(http_server)], store=False
    )
    history = [
        {"role": "user", "content": "Weather in Paris?"},
        *(item.model_dump(exclude_none=True) for item in first.output),
        {"role": "user", "content": "Thanks!"},
    ]
    again = client.responses.create(model="m", input=history, store=False)
    assert again.output_text == "Paris is clear at 18 C."
    sent = upstream.history[-1]["messages"]
    tools = [m for m in sent if m["role"] == "tool"]
    assert json.loads(tools[0]["content"])["celsius"] == 18
    assert tools[1]["content"].startswith("Error: ")
    messages = _messages_client(client)
    try:
        reply = messages.beta.messages.create(
            model="m",
            max_tokens=100,
            messages=[
                {"role": "user", "content": "Weather in Paris?"},
                {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "mcp_tool_use",
                            "id": "mcptoolu_1",
                            "name": "weather",
                            "server_name": "test",
                            "input": {"city": "Paris"},
                        },
                        {
                            "type": "mcp_tool_result",
                            "tool_use_id": "mcptoolu_1",
                            "is_error": False,
                            "content": [{"type": "text", "text": '{"celsius": 18}'}],
                        },
                        {"type": "text", "text": "It is 18 C."},
                    ],
                },
                {"role": "user", "content": "Thanks!"},
            ],
            betas=["mcp-client-2025-04-04"],
        )
    finally:
        messages.close()
    assert reply.content[0].type == "text"
    sent = upstream.history[-1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "assistant", "user"]
    assert sent[1]["tool_calls"][0]["function"]["name"] == "weather"
    assert sent[3]["content"] == "It is 18 C."
