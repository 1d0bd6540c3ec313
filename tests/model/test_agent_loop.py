"""The tool loop on the real embedded model, served the way `toolshim serve` serves it: a call,
its result sent back, and the final answer that uses it — through the README's Agent snippet,
the examples, the openai SDK round trip and `toolshim chat`. Temperature 0."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest

from toolshim import Agent, tool
from toolshim.capabilities.registry import Registry
from toolshim.engine import Engine
from toolshim.local import EmbeddedServer
from toolshim.server import create_app
from toolshim.testing import WEATHER as WEATHER_TOOL
from toolshim.testing import ServedApp
from toolshim.upstreams.openai_http import OpenAIUpstream

pytestmark = pytest.mark.model

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def served(qwen: EmbeddedServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The proxy as `toolshim serve` runs it on the embedded model (its measured facts in the
    registry, mode auto, the model pinned), on a real port; yields its /v1 base URL."""
    registry = Registry.open(tmp_path_factory.mktemp("registry") / "capabilities.sqlite3")
    qwen.record_capabilities(registry)
    engine = Engine(OpenAIUpstream(qwen.base_url, key=qwen.key, timeout=300), registry=registry)
    app = create_app(engine, default_model=qwen.model, pin_model=True)
    with ServedApp(app) as proxy:
        yield proxy.base_url


@tool
def get_weather(city: str, unit: Literal["c", "f"] = "c") -> str:
    """Current weather.

    Args:
        city: The city name.
    """
    return f"21°{unit.upper()} and sunny in {city}"


def test_the_readme_agent_snippet_reaches_the_answer(served: str) -> None:
    agent = Agent(tools=[get_weather], upstream=served, max_turns=5, params={"temperature": 0})
    try:
        result = agent.run("Weather in Paris?")
    finally:
        agent.close()
    assert result.completed, result
    assert "21" in result.output and "sunny" in result.output.lower()
    assert result.tool_runs and {r.name for r in result.tool_runs} == {"get_weather"}


@pytest.mark.parametrize(
    "result", ["18°C and sunny in Paris", '{"city": "Paris", "temperature_c": 18, "sky": "sunny"}']
)
def test_an_openai_sdk_round_trip_ends_in_an_answer_that_uses_the_result(
    served: str, result: str
) -> None:
    from openai import OpenAI

    with OpenAI(base_url=served, api_key="unused", timeout=300) as client:
        messages: list[Any] = [{"role": "user", "content": "What's the weather in Paris?"}]
        first = client.chat.completions.create(
            model="any", messages=messages, tools=[WEATHER_TOOL], temperature=0
        )
        calls = first.choices[0].message.tool_calls
        assert calls and calls[0].function.name == "get_weather"
        messages += [
            first.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": calls[0].id, "content": result},
        ]
        final = client.chat.completions.create(
            model="any", messages=messages, tools=[WEATHER_TOOL], temperature=0
        )
    answer = final.choices[0].message
    assert not answer.tool_calls, answer
    assert final.choices[0].finish_reason == "stop"
    assert "18" in (answer.content or "")


def test_the_weather_example_finishes_with_the_right_numbers(served: str) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "weather_agent.py"), "--upstream", served],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=EXAMPLES,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "86" in done.stdout, done.stdout  # 30 °C in Fahrenheit


def test_the_trip_agent_file_finishes(served: str) -> None:
    done = subprocess.run(
        [
            *(sys.executable, "-m", "toolshim.cli.main", "run", str(EXAMPLES / "trip.toml")),
            *("--input", '{"city": "Paris"}', "--upstream", served),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=EXAMPLES,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip(), done.stderr[-3000:]


def test_health_of_the_served_proxy(served: str) -> None:
    assert httpx.get(served.removesuffix("/v1") + "/healthz", timeout=30).status_code == 200


def test_toolshim_chat_answers_after_its_first_tool_call(served: str) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "toolshim.cli.main",
            "chat",
            "--upstream",
            served,
            "--temperature",
            "0",
        ],
        input="Use the calculator: what is 17 times 23?\n",
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "391" in done.stdout, done.stdout[-3000:]
    assert "Traceback" not in done.stderr
