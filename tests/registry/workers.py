"""Functions the registry tests run in separate processes (spawned, not forked)."""

from __future__ import annotations

import time

from toolshim.capabilities.facts import Fact, Source
from toolshim.capabilities.stores import open_store

SOURCES = list(Source)


def write_facts(url: str, worker: int, count: int, start_at: float) -> int:
    """Open the (new) store at the same moment as the other workers (so they race to
    migrate it), write ``count`` facts of this worker's own and contend on one shared layer
    per source; return how many writes were made."""
    while time.time() < start_at:
        time.sleep(0.002)
    store = open_store(url)
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
            Fact("dialect", f"w{worker}", SOURCES[worker % len(SOURCES)]),
        )
        return count
    finally:
        store.close()
