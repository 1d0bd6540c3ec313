"""Proxy overhead: the same requests sent directly to a fast local upstream and through `toolshim serve`.

Everything runs as real processes on 127.0.0.1, side by side in one run: scripted upstreams
(``python -m toolshim.testing.server``, aiohttp on uvloop, answers from a repeating script) and
one `toolshim serve` in front of each. For each scenario, non-streaming and streaming:

* latency: sequential keep-alive requests, direct and proxied interleaved one by one, from one
  client; "added" is proxied minus direct at p50 and p99;
* throughput: ``wrk`` (or, without it, an asyncio + aiohttp load generator in its own process)
  with ``--concurrency`` connections for ``--duration`` seconds, direct then proxied, twice,
  alternating; the ratio is proxied / direct requests per second;
* CPU per request of the proxy and of the upstream (from /proc during the throughput runs),
  which is what decides the ratio on a machine where all of them share the same cores.

Scenarios: ``plain`` (no tools: a pass-through), ``native`` (tools; the upstream answers with
native tool calls; mode auto), ``emulated`` (tools; the upstream ignores them and writes the call
as JSON text; mode force, so the proxy rewrites the prompt and parses the call).

    python benchmarks/bench_proxy.py                      # the default table
    python benchmarks/bench_proxy.py --delay-ms 20        # an upstream that takes 20 ms a reply
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolshim.testing import free_port

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
            "required": ["city"],
        },
    },
}
CALL_TEXT = '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}'
NATIVE_CALL = {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}
ANSWER = "The weather in Paris is mild today, with a light breeze and some sun."
MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is the weather in Paris?"},
]


@dataclass
class Scenario:
    name: str
    upstream_script: dict[str, Any]
    proxy_flags: list[str]
    tools: bool


SCENARIOS = [
    Scenario("plain", {"replies": [ANSWER], "tools": "native"}, [], tools=False),
    Scenario("native", {"replies": [NATIVE_CALL], "tools": "native"}, [], tools=True),
    Scenario(
        "emulated", {"replies": [CALL_TEXT], "tools": "ignore"}, ["--mode", "force"], tools=True
    ),
]


def request_body(scenario: Scenario, stream: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "bench-model", "messages": MESSAGES}
    if scenario.tools:
        body["tools"] = [WEATHER]
    if stream:
        body["stream"] = True
    return body


# -- processes ----------------------------------------------------------------------------------


@dataclass
class Child:
    popen: subprocess.Popen[bytes]
    port: int
    log: Path

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.popen.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(10)


def spawn(args: list[str], port: int, log: Path, ready_path: str) -> Child:
    with log.open("wb") as handle:
        popen = subprocess.Popen(args, stdout=handle, stderr=subprocess.STDOUT)
    child = Child(popen, port, log)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if popen.poll() is not None:
            raise SystemExit(f"{args[:4]} exited:\n{log.read_text()}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", ready_path)
            if conn.getresponse().status == 200:
                conn.close()
                return child
        except OSError:
            time.sleep(0.05)
    child.stop()
    raise SystemExit(f"{args[:4]} did not start:\n{log.read_text()}")


def start_pair(
    scenario: Scenario, work: Path, delay_ms: float, log_level: str
) -> tuple[Child, Child]:
    script = {**scenario.upstream_script, "repeat": True, "record": False, "delay": delay_ms / 1000}
    script_file = work / f"{scenario.name}.json"
    script_file.write_text(json.dumps(script))
    up_port, proxy_port = free_port(), free_port()
    upstream = spawn(
        [
            sys.executable,
            "-m",
            "toolshim.testing.server",
            "--port",
            str(up_port),
            "--script",
            str(script_file),
        ],
        up_port,
        work / f"{scenario.name}-upstream.log",
        "/v1/models",
    )
    proxy = spawn(
        [
            sys.executable, "-m", "toolshim.cli.main", "serve",
            "--upstream", f"http://127.0.0.1:{up_port}/v1",
            "--port", str(proxy_port),
            "--registry", str(work / f"{scenario.name}.sqlite3"),
            "--log-level", log_level,
            *scenario.proxy_flags,
        ],
        proxy_port,
        work / f"{scenario.name}-proxy.log",
        "/healthz",
    )  # fmt: skip
    return upstream, proxy


# -- measuring ----------------------------------------------------------------------------------


def check_answer(port: int, body: dict[str, Any], scenario: Scenario, *, proxied: bool) -> None:
    """Refuse to benchmark a server that answers wrongly (errors are fast, and meaningless)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Content-Type": "application/json"}
    conn.request("POST", "/v1/chat/completions", json.dumps(body), headers)
    response = conn.getresponse()
    text = response.read().decode()
    conn.close()
    ok = response.status == 200
    if body.get("stream"):
        ok = ok and text.rstrip().endswith("data: [DONE]")
        if proxied:  # the proxy sends a call's name in one delta; a model's text comes in pieces
            ok = ok and ('"get_weather"' in text) == scenario.tools
    else:
        ok = ok and ("get_weather" in text) == scenario.tools
    if not ok:
        raise SystemExit(f"unexpected answer from port {port} ({response.status}):\n{text[:800]}")


def latencies(
    direct: int, proxy: int, body: dict[str, Any], count: int
) -> tuple[list[float], list[float]]:
    """Sequential keep-alive requests, direct and proxied interleaved; seconds each."""
    payload = json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    conns = {
        port: http.client.HTTPConnection("127.0.0.1", port, timeout=30) for port in (direct, proxy)
    }
    out: dict[int, list[float]] = {direct: [], proxy: []}
    for i in range(count + 50):
        order = (direct, proxy) if i % 2 else (proxy, direct)
        for port in order:
            conn = conns[port]
            started = time.perf_counter()
            conn.request("POST", "/v1/chat/completions", payload, headers)
            response = conn.getresponse()
            response.read()
            elapsed = time.perf_counter() - started
            if response.status != 200:
                raise SystemExit(f"HTTP {response.status} from port {port}")
            if i >= 50:  # warm-up done
                out[port].append(elapsed)
    for conn in conns.values():
        conn.close()
    return out[direct], out[proxy]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def wrk_throughput(
    port: int, body: dict[str, Any], concurrency: int, duration: float, work: Path
) -> float:
    lua = work / "post.lua"
    lua.write_text(
        'wrk.method = "POST"\n'
        f"wrk.body = {json.dumps(json.dumps(body))}\n"
        'wrk.headers["Content-Type"] = "application/json"\n'
    )
    result = subprocess.run(
        ["wrk", "-t1", f"-c{concurrency}", f"-d{duration:g}s", "-s", str(lua), f"http://127.0.0.1:{port}/v1/chat/completions"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    if "Non-2xx" in result.stdout or "Socket errors" in result.stdout:
        raise SystemExit(f"wrk saw failures on port {port}:\n{result.stdout}")
    for line in result.stdout.splitlines():
        if line.startswith("Requests/sec:"):
            return float(line.split()[1])
    raise SystemExit(f"could not read wrk's output:\n{result.stdout}")


def python_throughput(
    port: int, body: dict[str, Any], concurrency: int, duration: float, work: Path
) -> float:
    args = [
        sys.executable,
        __file__,
        "--load-worker",
        str(port),
        str(concurrency),
        str(duration),
        json.dumps(body),
    ]
    result = subprocess.run(args, capture_output=True, text=True, check=True)
    return float(result.stdout.strip())


async def _load(port: int, concurrency: int, duration: float, body: dict[str, Any]) -> float:
    import aiohttp

    payload = json.dumps(body).encode()
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    done = 0
    stop_at = time.perf_counter() + duration
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            nonlocal done
            while time.perf_counter() < stop_at:
                async with session.post(
                    url, data=payload, headers={"Content-Type": "application/json"}
                ) as r:
                    await r.read()
                    if r.status != 200:
                        raise SystemExit(f"HTTP {r.status}")
                done += 1

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return done / (time.perf_counter() - started)


@dataclass
class Row:
    scenario: str
    stream: bool
    p50_direct: float
    p50_added: float
    p99_added: float
    rps_direct: float
    rps_proxy: float
    proxy_cpu_us: float
    upstream_cpu_us: float

    @property
    def ratio(self) -> float:
        return self.rps_proxy / self.rps_direct


def measure(
    scenario: Scenario,
    stream: bool,
    upstream: Child,
    proxy: Child,
    args: argparse.Namespace,
    work: Path,
) -> Row:
    body = request_body(scenario, stream)
    check_answer(upstream.port, body, scenario, proxied=False)
    check_answer(proxy.port, body, scenario, proxied=True)
    direct_lat, proxy_lat = latencies(upstream.port, proxy.port, body, args.requests)
    throughput = wrk_throughput if args.loadgen == "wrk" else python_throughput
    direct_rps: list[float] = []
    proxy_rps: list[float] = []
    proxy_cpu: list[float] = []
    upstream_cpu: list[float] = []
    for _ in range(args.rounds):
        before = upstream.cpu_seconds()
        rps = throughput(upstream.port, body, args.concurrency, args.duration, work)
        upstream_cpu.append((upstream.cpu_seconds() - before) / (rps * args.duration))
        direct_rps.append(rps)
        before = proxy.cpu_seconds()
        rps = throughput(proxy.port, body, args.concurrency, args.duration, work)
        proxy_cpu.append((proxy.cpu_seconds() - before) / (rps * args.duration))
        proxy_rps.append(rps)
    return Row(
        scenario.name,
        stream,
        p50_direct=percentile(direct_lat, 0.5) * 1000,
        p50_added=(percentile(proxy_lat, 0.5) - percentile(direct_lat, 0.5)) * 1000,
        p99_added=(percentile(proxy_lat, 0.99) - percentile(direct_lat, 0.99)) * 1000,
        rps_direct=statistics.mean(direct_rps),
        rps_proxy=statistics.mean(proxy_rps),
        proxy_cpu_us=statistics.mean(proxy_cpu) * 1e6,
        upstream_cpu_us=statistics.mean(upstream_cpu) * 1e6,
    )


def print_table(rows: list[Row], args: argparse.Namespace) -> None:
    print()
    print(
        f"toolshim proxy overhead — {os.cpu_count()} CPUs, upstream delay {args.delay_ms:g} ms, "
        f"load: {args.loadgen} c={args.concurrency} {args.duration:g}s x{args.rounds}, "
        f"latency: {args.requests} sequential requests each, proxy log level {args.log_level}"
    )
    header = (
        f"{'scenario':<9} {'stream':<6} {'p50 direct':>10} {'+p50':>7} {'+p99':>7} "
        f"{'rps direct':>10} {'rps proxy':>9} {'ratio':>6} {'proxy CPU/req':>13} {'upstream CPU/req':>16}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r.scenario:<9} {'yes' if r.stream else 'no':<6} {r.p50_direct:>8.2f}ms "
            f"{r.p50_added:>5.2f}ms {r.p99_added:>5.2f}ms {r.rps_direct:>10.0f} {r.rps_proxy:>9.0f} "
            f"{r.ratio:>6.2f} {r.proxy_cpu_us:>11.0f}us {r.upstream_cpu_us:>14.0f}us"
        )
    worst_p50 = max(r.p50_added for r in rows)
    worst_ratio = min(r.ratio for r in rows)
    print()
    print(
        f"added latency p50, worst scenario: {worst_p50:.2f} ms (target < 2 ms): {'met' if worst_p50 < 2 else 'NOT met'}"
    )
    print(
        f"throughput ratio, worst scenario:  {worst_ratio:.2f} (target >= 0.80): {'met' if worst_ratio >= 0.8 else 'NOT met'}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=4.0, help="seconds per throughput run")
    parser.add_argument("--rounds", type=int, default=2, help="direct/proxy throughput pairs")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--requests", type=int, default=300, help="sequential requests per side")
    parser.add_argument("--delay-ms", type=float, default=0.0, help="upstream time per reply")
    parser.add_argument("--log-level", default="info", help="the proxy's --log-level")
    parser.add_argument(
        "--loadgen", choices=["wrk", "python"], default="wrk" if shutil.which("wrk") else "python"
    )
    parser.add_argument("--scenarios", default="plain,native,emulated")
    args = parser.parse_args()
    wanted = args.scenarios.split(",")
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="toolshim-bench-") as tmp:
        work = Path(tmp)
        for scenario in [s for s in SCENARIOS if s.name in wanted]:
            upstream, proxy = start_pair(scenario, work, args.delay_ms, args.log_level)
            try:
                for stream in (False, True):
                    print(
                        f"measuring {scenario.name} stream={stream} …", file=sys.stderr, flush=True
                    )
                    rows.append(measure(scenario, stream, upstream, proxy, args, work))
            finally:
                proxy.stop()
                upstream.stop()
    print_table(rows, args)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--load-worker":
        port, concurrency, duration, body = sys.argv[2:6]
        print(asyncio.run(_load(int(port), int(concurrency), float(duration), json.loads(body))))
    else:
        main()
