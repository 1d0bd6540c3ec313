"""CPU time the proxy spends per request, path by path: what decides its throughput.

Wall-clock throughput needs quiet cores; CPU time per request does not, so this benchmark
can be run on a busy machine and still compare two versions of the code fairly (run both in
the same session, e.g. ``PYTHONPATH=/elsewhere/src python benchmarks/bench_proxy_cpu.py``
for the other one). It prints figures and never asserts on them.

Three layers, each for the four paths (native / emulated, non-streamed / streamed) and the
plain pass-through, on chat completions and (``resp-…``, the same requests in the Responses
API's shape, stored for ``previous_response_id`` as by default) on ``/v1/responses``:

* ``app``: the ASGI app (:func:`toolshim.server.create_app`) driven by raw ASGI messages in
  this process, in front of a canned in-process upstream that only decodes prepared JSON
  (as an HTTP client would); CPU is this process's (``time.process_time``). It is the
  proxy's own work: routing, wire parsing, the engine, metrics, logging, SSE writing.
* ``client``: the same, but through the real aiohttp upstream client to a scripted upstream
  in another process (``python -m toolshim.testing.server``); the upstream's CPU is not
  counted. Adds the HTTP client.
* ``serve``: a real ``toolshim serve`` process (uvicorn) in front of that upstream, driven by
  an aiohttp client from this process with a few connections; CPU is the proxy process's own,
  read from /proc (Linux only; skipped elsewhere). Everything the proxy process does.
  (Chat completions paths only.)

    python benchmarks/bench_proxy_cpu.py                     # all layers, 2000 requests a path
    python benchmarks/bench_proxy_cpu.py --layers app --profile native-stream
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
import os
import pstats
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_proxy as bp

from toolshim.capabilities.registry import Registry
from toolshim.engine import Engine
from toolshim.server import create_app
from toolshim.testing import stream_chunks
from toolshim.testing.server import ScriptedUpstream
from toolshim.upstreams.chat_completions import ChatCompletionsUpstream


@dataclass(frozen=True)
class Path_:
    name: str
    scenario: bp.Scenario
    stream: bool
    responses: bool = False
    """Sent to ``/v1/responses`` in that API's shape, instead of to chat completions."""

    @property
    def mode(self) -> str:
        return "force" if "--mode" in self.scenario.proxy_flags else "auto"

    @property
    def endpoint(self) -> str:
        return "/v1/responses" if self.responses else "/v1/chat/completions"

    @property
    def chat_body(self) -> dict[str, Any]:
        return bp.request_body(self.scenario, self.stream)

    @property
    def body(self) -> dict[str, Any]:
        chat = self.chat_body
        if not self.responses:
            return chat
        system, user = chat["messages"]
        body = {**chat, "instructions": system["content"], "input": user["content"]}
        del body["messages"]
        if "tools" in chat:
            body["tools"] = [{"type": "function", **t["function"]} for t in chat["tools"]]
        return body


_SCENARIOS = {s.name: s for s in bp.SCENARIOS}
PATHS = [
    Path_("plain", _SCENARIOS["plain"], False),
    Path_("plain-stream", _SCENARIOS["plain"], True),
    Path_("native", _SCENARIOS["native"], False),
    Path_("native-stream", _SCENARIOS["native"], True),
    Path_("emulated", _SCENARIOS["emulated"], False),
    Path_("emulated-stream", _SCENARIOS["emulated"], True),
    Path_("resp-plain", _SCENARIOS["plain"], False, responses=True),
    Path_("resp-native", _SCENARIOS["native"], False, responses=True),
    Path_("resp-native-stream", _SCENARIOS["native"], True, responses=True),
    Path_("resp-emulated", _SCENARIOS["emulated"], False, responses=True),
    Path_("resp-emulated-stream", _SCENARIOS["emulated"], True, responses=True),
]


# -- the in-process upstreams ---------------------------------------------------------------------


class CannedUpstream(ChatCompletionsUpstream):
    """Answers every request with the same prepared reply, decoded from JSON bytes each time
    (what an HTTP client would hand over), so that nearly all the CPU measured is the proxy's."""

    def __init__(self, path: Path_) -> None:
        scripted = ScriptedUpstream({**path.scenario.upstream_script, "record": False})
        completion = asyncio.run(scripted.complete_body(path.chat_body))
        completion["id"], completion["created"] = "chatcmpl-canned", 1700000000
        for choice in completion["choices"]:
            for call in choice["message"].get("tool_calls") or ():
                call["id"] = "call_canned"
        self._completion = orjson.dumps(completion)
        self._chunks = [orjson.dumps(c) for c in stream_chunks(completion) if c.get("choices")]

    @property
    def key(self) -> str:
        return "canned://upstream"

    async def complete_body(
        self, body: Mapping[str, Any], *, headers: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        orjson.dumps(body)  # the request is encoded once on its way out
        result: dict[str, Any] = orjson.loads(self._completion)
        return result

    async def stream_body(
        self, body: Mapping[str, Any], *, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        orjson.dumps(body)
        for raw in self._chunks:
            yield orjson.loads(raw)

    async def list_models(self, *, headers: Mapping[str, str] | None = None) -> dict[str, Any]:
        return {"object": "list", "data": []}

    async def aclose(self) -> None:
        return None


# -- a raw ASGI driver ----------------------------------------------------------------------------


class Driver:
    """Sends one HTTP request to an ASGI app as uvicorn would, and checks the answer."""

    def __init__(self, app: Any, path: Path_) -> None:
        self.app = app
        self.path = path
        self.payload = orjson.dumps(path.body)
        self.scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": path.endpoint,
            "raw_path": path.endpoint.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [
                (b"host", b"127.0.0.1:8080"),
                (b"user-agent", b"bench"),
                (b"accept", b"*/*"),
                (b"content-type", b"application/json"),
                (b"content-length", str(len(self.payload)).encode()),
            ],
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8080),
        }

    async def request(self) -> bytes:
        sent = False
        never: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        parts: list[bytes] = []
        status = 0

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": self.payload, "more_body": False}
            await never  # the client stays until the answer is complete
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            else:
                parts.append(message.get("body", b""))

        await self.app(dict(self.scope), receive, send)
        never.cancel()
        body = b"".join(parts)
        if status != 200:
            raise SystemExit(f"{self.path.name}: HTTP {status}: {body[:500]!r}")
        return body


def check(path: Path_, body: bytes) -> None:
    text = body.decode()
    ok = ("get_weather" in text) == path.scenario.tools
    if path.stream:
        end = "event: response.completed" if path.responses else "data: [DONE]"
        ok = ok and end in text.rstrip().rsplit("\n\n", 1)[-1]
    if not ok:
        raise SystemExit(f"{path.name}: unexpected answer:\n{text[:800]}")


# -- measuring --------------------------------------------------------------------------------------


CPU = tuple[float, float]
"""CPU seconds per request: total (user + system), and user alone."""


def _median(samples: list[CPU]) -> CPU:
    middle = statistics.median(total for total, _ in samples)
    return min(samples, key=lambda sample: abs(sample[0] - middle))


def _cpu_per_request(
    run: Callable[[int], Coroutine[Any, Any, None]], count: int, rounds: int
) -> CPU:
    """The median round's CPU seconds per request of this process (total and user)."""
    loop = _new_loop()
    try:
        loop.run_until_complete(run(max(50, count // 10)))  # warm-up
        samples = []
        for _ in range(rounds):
            gc.collect()
            before = resource.getrusage(resource.RUSAGE_SELF)
            loop.run_until_complete(run(count))
            after = resource.getrusage(resource.RUSAGE_SELF)
            user = after.ru_utime - before.ru_utime
            system = after.ru_stime - before.ru_stime
            samples.append(((user + system) / count, user / count))
        return _median(samples)
    finally:
        loop.close()


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def _app(path: Path_, upstream: Any, work: Path) -> Any:
    registry = Registry.open(work / f"{path.name}-{time.monotonic_ns()}.sqlite3")
    return create_app(Engine(upstream, mode=path.mode, registry=registry))


def measure_app(path: Path_, count: int, rounds: int, work: Path, profile: bool) -> CPU:
    app = _app(path, CannedUpstream(path), work)
    driver = Driver(app, path)

    async def run(n: int) -> None:
        for _ in range(n):
            check(path, await driver.request())

    if profile:
        _profile(run, count, f"app {path.name}")
    return _cpu_per_request(run, count, rounds)


def measure_client(
    path: Path_, base_url: str, count: int, rounds: int, work: Path, profile: bool
) -> CPU:
    from toolshim.upstreams.aiohttp_upstream import AiohttpUpstream

    # One client per event loop: aiohttp sessions are bound to the loop they were made in.
    made: list[Any] = []

    async def run(n: int) -> None:
        if not made:
            upstream = AiohttpUpstream(base_url, key="bench://upstream")
            made.append((upstream, Driver(_app(path, upstream, work), path)))
        upstream, driver = made[0]
        for _ in range(n):
            check(path, await driver.request())

    async def close() -> None:
        if made:
            await made.pop()[0].aclose()

    def run_and_close(n: int) -> Coroutine[Any, Any, None]:
        async def both() -> None:
            try:
                await run(n)
            finally:
                await close()

        return both()

    if profile:
        _profile(run_and_close, count, f"client {path.name}")
    return _cpu_per_request(run_and_close, count, rounds)


def _profile(
    run: Callable[[int], Coroutine[Any, Any, None]], count: int, label: str, top: int = 45
) -> None:
    loop = _new_loop()
    try:
        loop.run_until_complete(run(50))
        profiler = cProfile.Profile(time.process_time)  # CPU, not wall time: the cores are shared
        profiler.enable()
        loop.run_until_complete(run(count))
        profiler.disable()
    finally:
        loop.close()
    print(f"\n=== profile: {label}, {count} requests ===", file=sys.stderr)
    stats = pstats.Stats(profiler, stream=sys.stderr)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)


def proc_cpu(pid: int) -> CPU:
    """A process's CPU seconds so far: total (user + system) and user."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tick, int(fields[11]) / tick


async def _drive(port: int, body: dict[str, Any], count: int, concurrency: int) -> None:
    import aiohttp

    payload = orjson.dumps(body)
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    left = count
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                async with session.post(
                    url, data=payload, headers={"Content-Type": "application/json"}
                ) as response:
                    await response.read()
                    if response.status != 200:
                        raise SystemExit(f"HTTP {response.status} from the proxy")

        await asyncio.gather(*(worker() for _ in range(concurrency)))


def measure_serve(path: Path_, proxy: bp.Child, count: int, rounds: int, concurrency: int) -> CPU:
    loop = _new_loop()
    try:
        bp.check_answer(proxy.port, path.body, path.scenario, proxied=True)
        loop.run_until_complete(_drive(proxy.port, path.body, max(50, count // 10), concurrency))
        samples = []
        for _ in range(rounds):
            before = proc_cpu(proxy.popen.pid)
            loop.run_until_complete(_drive(proxy.port, path.body, count, concurrency))
            after = proc_cpu(proxy.popen.pid)
            samples.append(((after[0] - before[0]) / count, (after[1] - before[1]) / count))
        return _median(samples)
    finally:
        loop.close()


# -- main -------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000, help="requests per round and path")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per path (median kept)")
    parser.add_argument("--layers", default="app,client,serve")
    parser.add_argument("--paths", default=",".join(p.name for p in PATHS))
    parser.add_argument("--concurrency", type=int, default=4, help="connections for 'serve'")
    parser.add_argument("--log-level", default="info", help="the proxy's log level")
    parser.add_argument(
        "--profile", default="", help="paths to profile with cProfile (app and client layers)"
    )
    args = parser.parse_args()
    layers = args.layers.split(",")
    wanted = args.paths.split(",")
    paths = [p for p in PATHS if p.name in wanted]
    profiled = set(args.profile.split(",")) if args.profile else set()
    if "serve" in layers and not Path("/proc/self/stat").exists():
        print("no /proc here: the serve layer is skipped", file=sys.stderr)
        layers.remove("serve")

    from toolshim.server import configure_logging

    # What `toolshim serve` sets up; the lines go nowhere (the formatting cost still counts).
    configure_logging(args.log_level, stream=open(os.devnull, "w"))  # noqa: SIM115

    results: dict[tuple[str, str], CPU] = {}
    with tempfile.TemporaryDirectory(prefix="toolshim-cpu-") as tmp:
        work = Path(tmp)
        for path in paths:
            print(f"measuring {path.name} …", file=sys.stderr, flush=True)
            if "app" in layers:
                results["app", path.name] = measure_app(
                    path, args.requests, args.rounds, work, path.name in profiled
                )
            if "client" not in layers and "serve" not in layers:
                continue
            upstream, proxy = bp.start_pair(path.scenario, work, 0.0, args.log_level)
            try:
                if "client" in layers:
                    results["client", path.name] = measure_client(
                        path,
                        f"http://127.0.0.1:{upstream.port}/v1",
                        args.requests,
                        args.rounds,
                        work,
                        path.name in profiled,
                    )
                if "serve" in layers and not path.responses:
                    results["serve", path.name] = measure_serve(
                        path, proxy, args.requests, args.rounds, args.concurrency
                    )
            finally:
                proxy.stop()
                upstream.stop()

    print()
    print(
        f"toolshim proxy CPU per request (µs) — python {sys.version.split()[0]}, "
        f"{args.requests} requests x{args.rounds} rounds (median), log level {args.log_level}, "
        f"serve: {args.concurrency} connections"
    )
    shown = [layer for layer in ("app", "client", "serve") if layer in layers]
    print("each cell: total (user) — user is Python and libraries, the rest is the kernel")
    header = f"{'path':<22}" + "".join(f"{layer:>16}" for layer in shown)
    print(header)
    print("-" * len(header))
    for path in paths:
        cells = "".join(
            f"{f'{cpu[0] * 1e6:.0f} ({cpu[1] * 1e6:.0f})' if cpu else '-':>16}"
            for cpu in (results.get((layer, path.name)) for layer in shown)
        )
        print(f"{path.name:<22}{cells}")
    print(
        json.dumps(
            {
                f"{layer}/{name}": round(total * 1e6, 1)
                for (layer, name), (total, _) in results.items()
            }
        )
    )


if __name__ == "__main__":
    main()
