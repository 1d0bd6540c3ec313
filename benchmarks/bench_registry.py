"""The capability registry per backend, side by side: SQLite, PostgreSQL and Redis.

Starts a PostgreSQL and a Redis server on 127.0.0.1 in temporary directories (as the tests
do; Debian's ``postgresql`` and ``redis-server`` packages), then measures for each backend:

* ``lookup cached``: :meth:`Registry.facts` for a known model, what the proxy does per request;
* ``lookup uncached``: one read of a model's layers from the store (``FactStore.rows``);
* ``learn``: one durable write (``FactStore.put``: transaction, compare-and-set, notify);
* ``propagation``: from ``learn`` on one registry until another registry on the same store
  acts on it (SQLite has no notifications: the other process re-reads after its 1 s cache);
* ``proxy``: the ASGI app (in this process, a canned upstream) in ``auto`` mode, native and
  emulated paths: requests per second (wall) and CPU per request, against SQLite.

Figures are printed, never asserted (the machine may be busy: compare columns of one run).

    python benchmarks/bench_registry.py                # about a minute
    python benchmarks/bench_registry.py --requests 5000 --lookups 200000
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.registry.servers

import bench_proxy_cpu as bpc
from tests.registry.servers import PostgresServer, RedisServer

from toolshim.capabilities.facts import Fact, Source, Support
from toolshim.capabilities.registry import Registry
from toolshim.capabilities.stores import open_store
from toolshim.engine import Engine
from toolshim.server import create_app

UP = "canned://upstream"


def per_op(run: Callable[[], object], count: int) -> float:
    """Microseconds per call of ``run`` (the median of three rounds)."""
    rounds = []
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(count):
            run()
        rounds.append((time.perf_counter() - started) / count * 1e6)
    return statistics.median(rounds)


def lookups(url: str, count: int) -> tuple[float, float, float]:
    """(cached lookup µs, uncached lookup µs, learn µs)."""
    registry = Registry.open(url)
    store = open_store(url)
    try:
        registry.learn(UP, "known", "native_tools", "no", Source.RUNTIME_ERROR)
        registry.flush()
        registry.facts(UP, "known")
        cached = per_op(lambda: registry.facts(UP, "known"), count)
        uncached = per_op(lambda: store.rows("known", ["*", UP]), max(200, count // 100))
        n = iter(range(10**9))
        learn = per_op(
            lambda: store.put(
                UP, f"m{next(n) % 500}", Fact("native_tools", "no", Source.RUNTIME_ERROR)
            ),
            max(200, count // 200),
        )
        return cached, uncached, learn
    finally:
        registry.close()
        store.close()


def propagation(url: str, samples: int) -> list[float]:
    """Milliseconds from a learn on one registry until another acts on it."""
    a, b = Registry.open(url), Registry.open(url)
    found = []
    try:
        for i in range(samples):
            model = f"propagate-{time.monotonic_ns()}-{i}"
            b.facts(UP, model)  # b has looked at it before (cached as unknown)
            started = time.perf_counter()
            a.learn(UP, model, "native_tools", "no", Source.RUNTIME_ERROR)
            deadline = started + 5
            while b.native_tools(UP, model) is not Support.NO and time.perf_counter() < deadline:
                time.sleep(0.0002)
            found.append((time.perf_counter() - started) * 1000)
    finally:
        a.close()
        b.close()
    return found


def proxy(
    urls: dict[str, str], path_name: str, count: int, rounds: int
) -> dict[str, tuple[float, float]]:
    """Per backend: (requests per second, CPU µs per request) of the app in auto mode. The
    backends take turns round by round, each round starting with the next one, so that a
    change in the machine's load hits all alike."""
    path = next(p for p in bpc.PATHS if p.name == path_name)
    registries, drivers = {}, {}
    for name, url in urls.items():
        registry = registries[name] = Registry.open(url)
        if path_name.startswith("emulated"):
            registry.learn(UP, path.body["model"], "native_tools", "no", Source.USER)
            registry.flush()
        app = create_app(Engine(bpc.CannedUpstream(path), mode="auto", registry=registry))
        drivers[name] = bpc.Driver(app, path)

    async def run(driver: Any, n: int) -> None:
        for _ in range(n):
            bpc.check(path, await driver.request())

    loop = bpc._new_loop()
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in urls}
    try:
        for driver in drivers.values():
            loop.run_until_complete(run(driver, max(50, count // 10)))
        order = list(drivers)
        for turn in range(rounds):
            for name in order[turn % len(order) :] + order[: turn % len(order)]:
                driver = drivers[name]
                before = resource.getrusage(resource.RUSAGE_SELF)
                started = time.perf_counter()
                loop.run_until_complete(run(driver, count))
                wall = time.perf_counter() - started
                after = resource.getrusage(resource.RUSAGE_SELF)
                cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
                samples[name].append((count / wall, cpu / count * 1e6))
    finally:
        loop.close()
        for registry in registries.values():
            registry.close()
    return {
        name: (statistics.median(r for r, _ in found), statistics.median(c for _, c in found))
        for name, found in samples.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lookups", type=int, default=50_000, help="cached lookups per round")
    parser.add_argument("--requests", type=int, default=1500, help="proxy requests per round")
    parser.add_argument("--samples", type=int, default=30, help="propagation samples")
    parser.add_argument("--rounds", type=int, default=9, help="proxy rounds per backend")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-registry-"))
    servers: list[Any] = []
    try:
        pg, redis = PostgresServer(), RedisServer()
        servers += [pg, redis]
        backends = {
            "sqlite": f"sqlite:///{work}/caps.sqlite3",
            "postgres": pg.new_database(),
            "redis": redis.new_database(),
        }
        rows: dict[str, dict[str, str]] = {}
        native_all = proxy(backends, "native", args.requests, args.rounds)
        emulated_all = proxy(backends, "emulated", args.requests, args.rounds)
        for name, url in backends.items():
            cached, uncached, learn = lookups(url, args.lookups)
            spread = propagation(url, args.samples if name != "sqlite" else 5)
            native, emulated = native_all[name], emulated_all[name]
            rows[name] = {
                "lookup cached (µs)": f"{cached:.2f}",
                "lookup uncached (µs)": f"{uncached:.0f}",
                "learn, durable (µs)": f"{learn:.0f}",
                "propagation p50 (ms)": f"{statistics.median(spread):.1f}",
                "propagation max (ms)": f"{max(spread):.1f}",
                "proxy native (req/s)": f"{native[0]:.0f}",
                "proxy native (CPU µs/req)": f"{native[1]:.0f}",
                "proxy emulated (req/s)": f"{emulated[0]:.0f}",
                "proxy emulated (CPU µs/req)": f"{emulated[1]:.0f}",
            }
            print(f"measured {name}", file=sys.stderr)
        base_native = float(rows["sqlite"]["proxy native (req/s)"])
        base_emulated = float(rows["sqlite"]["proxy emulated (req/s)"])
        for row in rows.values():
            row["proxy native vs sqlite"] = (
                f"{float(row['proxy native (req/s)']) / base_native:.2f}"
            )
            row["proxy emulated vs sqlite"] = (
                f"{float(row['proxy emulated (req/s)']) / base_emulated:.2f}"
            )
        names = list(rows)
        width = max(len(k) for k in rows["sqlite"])
        print(f"{'':{width}}  " + "  ".join(f"{n:>10}" for n in names))
        for key in rows["sqlite"]:
            print(f"{key:{width}}  " + "  ".join(f"{rows[n][key]:>10}" for n in names))
    finally:
        for server in servers:
            server.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    asyncio.set_event_loop_policy(None)
    main()
