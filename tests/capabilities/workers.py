"""Functions run in separate processes by the store and learning tests (spawned, not forked)."""

from __future__ import annotations

import time
from typing import Any

from toolshim.capabilities.facts import Fact, Source
from toolshim.capabilities.stores.sqlite import CapabilityStore

SOURCES = [Source.PROFILE, Source.UPSTREAM, Source.RUNTIME_ERROR, Source.PROBE, Source.USER]


def write_facts(path: str, worker: int, count: int, start_at: float) -> int:
    """Write ``count`` facts of our own and contend on one shared fact; return how many."""
    while time.time() < start_at:
        time.sleep(0.005)
    store = CapabilityStore(path)
    try:
        for i in range(count):
            store.put(
                f"http://worker-{worker}/v1",
                f"model-{i}",
                Fact("native_tools", "yes" if i % 2 else "no", Source.PROBE, detail=f"w{worker}"),
            )
            store.put(
                "http://shared/v1",
                "shared-model",
                Fact("dialect", f"w{worker}-{i}", SOURCES[worker % len(SOURCES)]),
            )
        return count
    finally:
        store.close()


def serve_one_turn(path: str, key: str) -> dict[str, Any]:
    """One engine turn in auto mode against an upstream that rejects tools (Ollama's words)."""
    from toolshim.engine import Engine
    from toolshim.testing import FakeUpstream

    upstream = FakeUpstream(["It is sunny in Paris."] * 3, tools="reject", key=key)
    engine = Engine(upstream, mode="auto", registry=path)
    try:
        reply = engine.complete(
            {
                "model": "custom-model:latest",
                "messages": [{"role": "user", "content": "Weather in Paris?"}],
                "tools": [
                    {
                        "type": "function",
                        "function": {
                            "name": "get_weather",
                            "parameters": {
                                "type": "object",
                                "properties": {"city": {"type": "string"}},
                            },
                        },
                    }
                ],
            }
        )
    finally:
        engine.close()
    assert reply.meta is not None
    return {
        "sent_tools": [bool(body.get("tools")) for body in upstream.history],
        "emulated": reply.meta.emulated,
        "llm_calls": reply.meta.llm_calls,
    }
