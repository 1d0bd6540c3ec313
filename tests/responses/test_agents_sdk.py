"""The OpenAI Agents SDK runs an agent with a ``@function_tool`` through the proxy, over a model
without native tools (emulated), with its Responses model and with its Chat Completions model,
streamed and not."""

from __future__ import annotations

import asyncio
import json
import warnings
from typing import Any

import agents
import openai
import pytest

from tests.responses.conftest import LiveFactory
from tests.responses.readme import readme_blocks
from toolshim.testing import CALL_JSON, FakeUpstream

ANSWER = "It is 18°C and sunny in Paris."


@agents.function_tool
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city's name.
    """
    return f"18°C and sunny in {city}"


@pytest.fixture(autouse=True, scope="module")
def _no_tracing_export() -> None:
    agents.set_tracing_disabled(True)


@pytest.mark.parametrize("stream", [False, True], ids=["run", "run_streamed"])
@pytest.mark.parametrize("model_kind", ["responses", "chat_completions"])
async def test_an_agent_calls_its_function_tool_through_toolshim(
    live: LiveFactory, model_kind: str, stream: bool
) -> None:
    upstream = FakeUpstream([CALL_JSON, ANSWER], tools="reject")  # a model without tools
    proxy = live(upstream, mode="auto")
    client = openai.AsyncOpenAI(base_url=proxy.base_url, api_key="sk-test", max_retries=0)
    model_class = (
        agents.OpenAIResponsesModel
        if model_kind == "responses"
        else agents.OpenAIChatCompletionsModel
    )
    agent = agents.Agent(
        name="Weather",
        instructions="Answer weather questions with the get_weather tool.",
        tools=[get_weather],
        model=model_class(model="fake-model", openai_client=client),
    )
    try:
        if stream:
            streamed = agents.Runner.run_streamed(agent, "What is the weather in Paris?")
            async for _ in streamed.stream_events():
                pass
            final = streamed.final_output
        else:
            result = await agents.Runner.run(agent, "What is the weather in Paris?")
            final = result.final_output
    finally:
        await client.close()
    assert final == ANSWER
    # the rejected native attempt, the emulated call, then the answer after the tool's result
    assert upstream.calls == 3
    assert "tools" in upstream.history[0] and "tools" not in upstream.history[1]
    assert "18°C and sunny in Paris" in json.dumps(upstream.history[2], ensure_ascii=False)


@pytest.mark.parametrize("model_class", ["OpenAIResponsesModel", "OpenAIChatCompletionsModel"])
def test_the_readme_snippet_runs_through_toolshim(
    live: LiveFactory, model_class: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (snippet,) = readme_blocks("OpenAI Agents SDK", "python")
    assert "http://127.0.0.1:8080/v1" in snippet and "OpenAIResponsesModel(" in snippet
    upstream = FakeUpstream([CALL_JSON, "It is 18°C and sunny in Paris."], tools="reject")
    proxy = live(upstream, mode="auto")
    code = snippet.replace("http://127.0.0.1:8080/v1", proxy.base_url).replace(
        "OpenAIResponsesModel", model_class
    )
    namespace: dict[str, Any] = {}
    try:
        exec(compile(code, "README.md", "exec"), namespace)
    finally:
        # Runner.run_sync leaves the thread's default loop open on purpose, and the snippet (a
        # script) its client: close both here, or they are collected in some later test
        policy = asyncio.get_event_loop_policy()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            loop = policy.get_event_loop()
        if "client" in namespace:
            loop.run_until_complete(namespace["client"].close())
        loop.close()
        policy.set_event_loop(None)
    assert capsys.readouterr().out.strip() == "It is 18°C and sunny in Paris."
    # the tool ran: its result reached the model
    assert "18°C and sunny in Paris" in json.dumps(upstream.history[-1], ensure_ascii=False)
    assert upstream.calls == 3
