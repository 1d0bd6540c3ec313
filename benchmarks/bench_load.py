"""Load held by `toolshim serve`: N concurrent streaming clients for a fixed time.

Real processes on 127.0.0.1: the scripted fake upstream (``python -m toolshim.testing.server``,
a repeating streamed reply) and `toolshim serve` in front of it. ``--clients`` asyncio clients
(aiohttp, one connection each, kept alive) send streaming chat requests back to back for
``--duration`` seconds; every stream must end with ``[DONE]`` and no error event. Printed:
requests, errors (must be 0), p50/p99 of the time to the whole stream, and the proxy's RSS and
open descriptors before the run, right after it and once its connections went idle, so a leak
shows as growth that stays.

    python benchmarks/bench_load.py                          # 100 clients, 30 s
    python benchmarks/bench_load.py --clients 300 --duration 60 --tools
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from toolshim.testing import WEATHER, free_port

ANSWER = "The weather in Paris is mild today, with a light breeze and some sun. " * 3


def wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    import urllib.request

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{process.args} exited:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"{url} never answered:\n{log.read_text()}")


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


async def client(
    session: aiohttp.ClientSession,
    url: str,
    body: dict[str, Any],
    until: float,
    out: dict[str, Any],
) -> None:
    while time.monotonic() < until:
        started = time.perf_counter()
        try:
            async with session.post(url, json=body) as response:
                text = await response.text()
            ok = response.status == 200 and text.rstrip().endswith("data: [DONE]")
            ok = ok and '"error"' not in text
        except (TimeoutError, aiohttp.ClientError) as exc:
            ok, text = False, repr(exc)
        if ok:
            out["latencies"].append(time.perf_counter() - started)
        else:
            out["errors"] += 1
            if len(out["samples"]) < 3:
                out["samples"].append(text[:300])


async def load(url: str, clients: int, duration: float, tools: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "fake-model",
        "stream": True,
        "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
    }
    if tools:
        body["tools"] = [WEATHER]
    out: dict[str, Any] = {"latencies": [], "errors": 0, "samples": []}
    until = time.monotonic() + duration
    timeout = aiohttp.ClientTimeout(total=60)
    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        await asyncio.gather(*(client(session, url, body, until, out) for _ in range(clients)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--tools", action="store_true", help="send a tool (mode auto, native)")
    parser.add_argument("--chunk-delay-ms", type=float, default=5.0)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="toolshim-load-"))
    script = {"replies": [ANSWER], "repeat": True, "record": False, "piece": 8}
    script["chunk_delay"] = args.chunk_delay_ms / 1000
    (work / "script.json").write_text(json.dumps(script))
    up_port, proxy_port = free_port(), free_port()
    up_log, proxy_log = work / "upstream.log", work / "proxy.log"
    upstream = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "toolshim.testing.server",
            "--port",
            str(up_port),
            "--script",
            str(work / "script.json"),
        ],
        stdout=up_log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    proxy = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "toolshim.cli.main",
            "serve",
            "--port",
            str(proxy_port),
            "--upstream",
            f"http://127.0.0.1:{up_port}/v1",
            "--registry",
            str(work / "reg.sqlite3"),
            "--log-level",
            "warning",
            "--max-concurrent-requests",
            str(max(256, args.clients)),
        ],
        stdout=proxy_log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        wait_ready(f"http://127.0.0.1:{up_port}/v1/models", upstream, up_log)
        wait_ready(f"http://127.0.0.1:{proxy_port}/healthz", proxy, proxy_log)
        url = f"http://127.0.0.1:{proxy_port}/v1/chat/completions"
        asyncio.run(load(url, 4, 2.0, args.tools))  # warm up: imports, pools, the registry
        before = rss_kib(proxy.pid), fds(proxy.pid)
        result = asyncio.run(load(url, args.clients, args.duration, args.tools))
        after = rss_kib(proxy.pid), fds(proxy.pid)
        time.sleep(20)  # idle keep-alive (15 s) closes the clients' leftovers
        settled = rss_kib(proxy.pid), fds(proxy.pid)
    finally:
        for process in (proxy, upstream):
            process.send_signal(signal.SIGTERM)
            process.wait(30)
    latencies = sorted(result["latencies"])
    p50 = statistics.median(latencies) * 1000 if latencies else float("nan")
    p99 = latencies[int(len(latencies) * 0.99) - 1] * 1000 if latencies else float("nan")
    print(
        f"clients {args.clients}, duration {args.duration:g}s, tools {args.tools}, "
        f"upstream chunk delay {args.chunk_delay_ms:g} ms"
    )
    print(f"{'requests':>10} {'errors':>7} {'req/s':>7} {'p50 ms':>8} {'p99 ms':>8}")
    print(
        f"{len(latencies):>10} {result['errors']:>7} {len(latencies) / args.duration:>7.1f} "
        f"{p50:>8.1f} {p99:>8.1f}"
    )
    print(f"{'':>10} {'before':>10} {'after':>10} {'idle':>10}")
    print(
        f"{'RSS MiB':>10} {before[0] / 1024:>10.1f} {after[0] / 1024:>10.1f} {settled[0] / 1024:>10.1f}"
    )
    print(f"{'fds':>10} {before[1]:>10} {after[1]:>10} {settled[1]:>10}")
    for sample in result["samples"]:
        print("error sample:", sample)
    if result["errors"]:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
