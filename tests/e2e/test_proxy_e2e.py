"""`toolshim serve` as a real process, driven by the openai SDK and by LangChain."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import openai
import pytest
from langchain_core.messages import AIMessageChunk
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from tests.e2e.conftest import FakeUpstreamProcess, Process, ProxyFactory
from toolshim.testing import CALL_JSON, WEATHER

pytestmark = pytest.mark.e2e

FENCED_CALL = f"Sure.\n```json\n{CALL_JSON}\n```"
MESSAGES = [{"role": "user", "content": "What is the weather in Paris?"}]


def fresh_model() -> str:
    """A model name no earlier test has taught the proxy's registry anything about."""
    return f"model-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def auto_proxy(serve: ProxyFactory) -> Process:
    return serve()


@pytest.fixture(scope="module")
def fallback_proxy(serve: ProxyFactory) -> Process:
    return serve("--mode", "fallback")


Sdk = Callable[[Process], openai.OpenAI]


@pytest.fixture
def sdk() -> Iterator[Sdk]:
    """Sync openai SDK clients for a proxy, closed after the test (no socket left to the GC)."""
    with ExitStack() as clients:

        def client(proxy: Process) -> openai.OpenAI:
            return clients.enter_context(
                openai.OpenAI(
                    base_url=proxy.url, api_key="sk-test-caller", max_retries=0, timeout=30
                )
            )

        yield client


def assert_weather_call(name: str, arguments: str) -> None:
    assert name == "get_weather"
    assert json.loads(arguments) == {"city": "Paris"}


# -- the openai SDK ---------------------------------------------------------------------------


def test_sync_sdk_gets_a_tool_call_from_a_model_that_rejects_tools(
    auto_proxy: Process, fake_upstream: FakeUpstreamProcess, sdk: Sdk
) -> None:
    fake_upstream.script(tools="reject", replies=[CALL_JSON])
    raw = sdk(auto_proxy).chat.completions.with_raw_response.create(
        model=fresh_model(), messages=MESSAGES, tools=[WEATHER]
    )
    completion = raw.parse()
    assert raw.headers["x-toolshim-emulated"] == "true"
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    (call,) = choice.message.tool_calls or []
    assert call.type == "function" and call.id.startswith("emulated_")
    assert_weather_call(call.function.name, call.function.arguments)
    meta = (completion.model_extra or {})["toolshim"]
    assert meta["emulated"] is True and "tool calls emulated" in meta["warnings"]
    # The key the SDK sent reached the upstream, with both requests (native try, emulated).
    headers = fake_upstream.history()["headers"]
    assert [h.get("Authorization") for h in headers] == ["Bearer sk-test-caller"] * 2


def test_sync_sdk_gets_a_tool_call_from_a_model_that_ignores_tools(
    auto_proxy: Process, fake_upstream: FakeUpstreamProcess, sdk: Sdk
) -> None:
    fake_upstream.script(tools="ignore", replies=[FENCED_CALL])
    completion = sdk(auto_proxy).chat.completions.create(
        model=fresh_model(), messages=MESSAGES, tools=[WEATHER]
    )
    (call,) = completion.choices[0].message.tool_calls or []
    assert_weather_call(call.function.name, call.function.arguments)


async def test_async_sdk_gets_a_tool_call(
    auto_proxy: Process, fake_upstream: FakeUpstreamProcess
) -> None:
    fake_upstream.script(tools="reject", replies=[CALL_JSON])
    async with openai.AsyncOpenAI(
        base_url=auto_proxy.url, api_key="k", max_retries=0, timeout=30
    ) as client:
        completion = await client.chat.completions.create(
            model=fresh_model(), messages=MESSAGES, tools=[WEATHER]
        )
    (call,) = completion.choices[0].message.tool_calls or []
    assert_weather_call(call.function.name, call.function.arguments)


def stream_call(client: openai.OpenAI, **extra: Any) -> tuple[str, str, str | None, dict[str, Any]]:
    """Stream through the SDK; return (name, arguments, finish_reason, toolshim metadata)."""
    name, arguments, finish, meta = "", "", None, {}
    stream = client.chat.completions.create(
        model=fresh_model(), messages=MESSAGES, tools=[WEATHER], stream=True, **extra
    )
    for chunk in stream:
        meta = (chunk.model_extra or {}).get("toolshim", meta)
        for choice in chunk.choices:
            for delta in choice.delta.tool_calls or ():
                assert delta.index == 0
                name += (delta.function and delta.function.name) or ""
                arguments += (delta.function and delta.function.arguments) or ""
            finish = choice.finish_reason or finish
    return name, arguments, finish, meta


@pytest.mark.parametrize("behaviour", ["reject", "ignore"])
def test_streaming_sdk_gets_a_tool_call(
    auto_proxy: Process, fake_upstream: FakeUpstreamProcess, behaviour: str, sdk: Sdk
) -> None:
    fake_upstream.script(
        tools=behaviour, replies=[CALL_JSON if behaviour == "reject" else FENCED_CALL]
    )
    name, arguments, finish, meta = stream_call(sdk(auto_proxy))
    assert_weather_call(name, arguments)
    assert finish == "tool_calls"
    assert meta["emulated"] is (behaviour == "reject")


@pytest.mark.parametrize("stream", [False, True])
def test_fallback_mode_after_a_plain_text_reply(
    fallback_proxy: Process, fake_upstream: FakeUpstreamProcess, stream: bool, sdk: Sdk
) -> None:
    fake_upstream.script(tools="ignore", replies=["I would look that up.", CALL_JSON])
    if stream:
        name, arguments, finish, meta = stream_call(sdk(fallback_proxy))
    else:
        completion = sdk(fallback_proxy).chat.completions.create(
            model=fresh_model(), messages=MESSAGES, tools=[WEATHER]
        )
        (call,) = completion.choices[0].message.tool_calls or []
        name, arguments = call.function.name, call.function.arguments
        finish, meta = completion.choices[0].finish_reason, completion.model_extra["toolshim"]
    assert_weather_call(name, arguments)
    assert finish == "tool_calls"
    assert meta["mode"] == "fallback" and meta["llm_calls"] == 2


def test_sdk_sees_errors_as_openai_errors(auto_proxy: Process, sdk: Sdk) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        sdk(auto_proxy).chat.completions.create(
            model=fresh_model(),
            messages=MESSAGES,
            tools=[WEATHER],
            extra_headers={"x-toolshim-mode": "sometimes"},
        )
    assert "unknown mode 'sometimes'" in str(caught.value)


def test_models_healthz_and_metrics(
    auto_proxy: Process, fake_upstream: FakeUpstreamProcess, sdk: Sdk
) -> None:
    models = sdk(auto_proxy).models.list()
    assert [m.id for m in models.data] == ["fake-model"]
    root = auto_proxy.url.removesuffix("/v1")
    health = httpx.get(f"{root}/healthz").json()
    assert health["upstream"] == {
        **health["upstream"],
        "url": fake_upstream.base_url,
        "reachable": True,
    }
    metrics = httpx.get(f"{root}/metrics").text
    assert "toolshim_requests_total{" in metrics
    assert "sk-test-caller" not in auto_proxy.output()


# -- LangChain ----------------------------------------------------------------------------------


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


def langchain_model(proxy: Process) -> Any:
    llm = ChatOpenAI(
        model=fresh_model(), base_url=proxy.url, api_key="k", max_retries=0, timeout=30
    )
    return llm.bind_tools([get_weather])


@pytest.mark.parametrize(("behaviour", "reply"), [("reject", CALL_JSON), ("ignore", FENCED_CALL)])
def test_langchain_bind_tools_gets_a_tool_call(
    auto_proxy: Process, fake_upstream: FakeUpstreamProcess, behaviour: str, reply: str
) -> None:
    fake_upstream.script(tools=behaviour, replies=[reply])
    message = langchain_model(auto_proxy).invoke("What is the weather in Paris?")
    (call,) = message.tool_calls
    assert call["name"] == "get_weather"
    assert call["args"] == {"city": "Paris"}
    assert call["id"]


def test_langchain_streaming_gets_a_tool_call(
    auto_proxy: Process, fake_upstream: FakeUpstreamProcess
) -> None:
    fake_upstream.script(tools="reject", replies=[CALL_JSON])
    gathered: AIMessageChunk | None = None
    for chunk in langchain_model(auto_proxy).stream("What is the weather in Paris?"):
        assert isinstance(chunk, AIMessageChunk)
        gathered = chunk if gathered is None else gathered + chunk
    assert gathered is not None
    (call,) = gathered.tool_calls
    assert call["name"] == "get_weather" and call["args"] == {"city": "Paris"}


# -- start-up and rescue flags ----------------------------------------------------------------


def test_an_unreachable_upstream_is_named_at_start_up(serve: ProxyFactory) -> None:
    from toolshim.testing import free_port

    closed = f"http://127.0.0.1:{free_port()}/v1"
    proxy = serve(upstream=closed)
    assert f"the upstream at {closed} does not answer" in proxy.output()
    assert "serving anyway" in proxy.output()


def test_no_rescue_leaves_a_native_reply_as_the_upstream_sent_it(
    serve: ProxyFactory, fake_upstream: FakeUpstreamProcess, sdk: Sdk
) -> None:
    fake_upstream.script(tools="ignore", replies=[FENCED_CALL, FENCED_CALL])
    rescued = sdk(serve("--mode", "off")).chat.completions.create(
        model=fresh_model(), messages=MESSAGES, tools=[WEATHER]
    )
    assert rescued.choices[0].message.tool_calls
    untouched = sdk(serve("--mode", "off", "--no-rescue")).chat.completions.create(
        model=fresh_model(), messages=MESSAGES, tools=[WEATHER]
    )
    assert untouched.choices[0].message.tool_calls is None
    assert untouched.choices[0].message.content == FENCED_CALL


def test_no_learn_stores_nothing_about_a_rejection(
    serve: ProxyFactory, fake_upstream: FakeUpstreamProcess, tmp_path: Any, sdk: Sdk
) -> None:
    from toolshim.capabilities.registry import Registry

    registry = tmp_path / "capabilities.sqlite3"
    proxy = serve("--no-learn", "--registry", str(registry))
    fake_upstream.script(tools="reject", replies=[CALL_JSON])
    model = fresh_model()
    completion = sdk(proxy).chat.completions.create(model=model, messages=MESSAGES, tools=[WEATHER])
    assert completion.choices[0].message.tool_calls
    store = Registry.open(registry)
    assert store.fact(fake_upstream.base_url, model, "native_tools") is None
