"""Learning from a real rejection: remembered in SQLite across engines and processes, until a
stronger source says otherwise."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.capabilities import workers
from toolshim.capabilities.facts import Source, Support
from toolshim.capabilities.probe import probe_tools, record_probe
from toolshim.capabilities.registry import Registry
from toolshim.engine import Engine
from toolshim.errors import UpstreamStatusError
from toolshim.testing import FakeUpstream, Reply, call
from toolshim.types import Completion, Metadata

KEY = "http://127.0.0.1:11434/v1"
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def meta(reply: Completion) -> Metadata:
    assert reply.meta is not None
    return reply.meta


def request(model: str = "custom-model") -> dict[str, Any]:
    return {
        "model": model,
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": [WEATHER],
    }


def sent_tools(upstream: FakeUpstream) -> list[bool]:
    return [bool(body.get("tools")) for body in upstream.history]


async def serve(path: Path, upstream: FakeUpstream, model: str = "custom-model") -> Any:
    engine = Engine(upstream, mode="auto", registry=str(path))
    return await engine.acomplete(request(model))


async def test_after_one_rejection_no_engine_sends_that_model_tools_again(tmp_path: Path) -> None:
    path = tmp_path / "caps.sqlite3"
    first = FakeUpstream(["It is sunny."], tools="reject", key=KEY)
    reply = await serve(path, first)
    assert sent_tools(first) == [True, False]  # tried natively, rejected, emulated
    assert meta(reply).emulated and meta(reply).llm_calls == 2
    assert any("rejected tools" in w for w in meta(reply).warnings)

    fact = Registry.open(path).fact(KEY, "custom-model", "native_tools")
    assert fact is not None and (fact.value, fact.source) == ("no", Source.RUNTIME_ERROR)
    assert "ollama" in fact.detail and "does not support tools" in fact.detail

    second = FakeUpstream(["Sunny.", "Still sunny.", "Sunny again."], tools="reject", key=KEY)
    engine = Engine(second, mode="auto", registry=str(path))  # another engine, same file
    for _ in range(3):
        again = await engine.acomplete(request())
        assert meta(again).emulated and meta(again).llm_calls == 1
    assert sent_tools(second) == [False, False, False]


async def test_the_fact_holds_for_the_model_under_its_latest_tag(tmp_path: Path) -> None:
    path = tmp_path / "caps.sqlite3"
    await serve(path, FakeUpstream(["ok"], tools="reject", key=KEY), "custom-model:latest")
    later = FakeUpstream(["ok"], tools="reject", key=KEY)
    await serve(path, later, "custom-model")
    assert sent_tools(later) == [False]


async def test_what_is_learned_at_one_upstream_stays_there(tmp_path: Path) -> None:
    path = tmp_path / "caps.sqlite3"
    await serve(path, FakeUpstream(["ok"], tools="reject", key=KEY))
    elsewhere = FakeUpstream(
        [Reply(None, [call("get_weather", {"city": "Paris"})])], key="http://127.0.0.1:8080/v1"
    )
    reply = await serve(path, elsewhere)
    assert sent_tools(elsewhere) == [True]
    assert not meta(reply).emulated


async def test_a_person_saying_yes_brings_native_tools_back(tmp_path: Path) -> None:
    path = tmp_path / "caps.sqlite3"
    await serve(path, FakeUpstream(["ok"], tools="reject", key=KEY))
    Registry.open(path).learn(
        KEY, "custom-model", "native_tools", "yes", Source.USER, detail="template fixed"
    )
    native = FakeUpstream([Reply(None, [call("get_weather", {"city": "Paris"})])], key=KEY)
    reply = await serve(path, native)
    assert sent_tools(native) == [True]
    assert reply.tool_calls[0].name == "get_weather" and not meta(reply).emulated


async def test_a_probe_outranks_the_runtime_error(tmp_path: Path) -> None:
    path = tmp_path / "caps.sqlite3"
    await serve(path, FakeUpstream(["ok"], tools="reject", key=KEY))
    result = await probe_tools(
        FakeUpstream([Reply(None, [call("get_current_time", {"timezone": "UTC"})])], key=KEY),
        "custom-model",
    )
    record_probe(Registry.open(path), KEY, result)
    native = FakeUpstream([Reply(None, [call("get_weather", {"city": "Paris"})])], key=KEY)
    await serve(path, native)
    assert sent_tools(native) == [True]


async def test_a_runtime_error_does_not_overrule_a_person(tmp_path: Path) -> None:
    path = tmp_path / "caps.sqlite3"
    registry = Registry.open(path)
    registry.learn(KEY, "custom-model", "native_tools", "yes", Source.USER)
    upstream = FakeUpstream(["ok", "ok"], tools="reject", key=KEY)
    engine = Engine(upstream, mode="auto", registry=registry)
    first = await engine.acomplete(request())
    second = await engine.acomplete(request())
    # Each turn is still answered (emulated after the rejection) ...
    assert meta(first).emulated and meta(second).emulated
    # ... but the person's "yes" stands, so each turn tries natively first.
    assert sent_tools(upstream) == [True, False, True, False]
    assert registry.native_tools(KEY, "custom-model") is Support.YES
    layers = registry.evidence(KEY, "custom-model")["native_tools"]
    assert [e.fact.source for e in layers] == [Source.USER, Source.RUNTIME_ERROR]


async def test_a_streamed_rejection_is_learned_too(tmp_path: Path) -> None:
    path = tmp_path / "caps.sqlite3"
    upstream = FakeUpstream(["It is sunny."], tools="reject", key=KEY)
    engine = Engine(upstream, mode="auto", registry=str(path))
    chunks = [c async for c in engine.astream({**request(), "stream": True})]
    assert chunks
    assert sent_tools(upstream) == [True, False]
    assert Registry.open(path).native_tools(KEY, "custom-model") is Support.NO


def test_two_processes_share_what_one_of_them_learned(tmp_path: Path) -> None:
    path = str(tmp_path / "caps.sqlite3")
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=context, max_tasks_per_child=1) as pool:
        first = pool.submit(workers.serve_one_turn, path, KEY).result(timeout=120)
        second = pool.submit(workers.serve_one_turn, path, KEY).result(timeout=120)
    assert first["sent_tools"] == [True, False] and first["llm_calls"] == 2
    assert second["sent_tools"] == [False] and second["llm_calls"] == 1
    assert first["emulated"] and second["emulated"]


@pytest.mark.parametrize("mode", ["off", "force"])
async def test_modes_that_do_not_consult_the_registry_do_not_learn(
    tmp_path: Path, mode: str
) -> None:
    path = tmp_path / "caps.sqlite3"
    upstream = FakeUpstream(["ok"], tools="reject", key=KEY)
    engine = Engine(upstream, mode=mode, registry=str(path))
    if mode == "off":  # off passes the upstream's refusal through, by design
        with pytest.raises(UpstreamStatusError, match="does not support tools"):
            await engine.acomplete(request())
    else:
        assert meta(await engine.acomplete(request())).emulated
    assert Registry.open(path).fact(KEY, "custom-model", "native_tools") is None
