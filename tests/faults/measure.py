"""Print the fault matrix as measured through the proxy app: each fault's answer and its time.

Run: ``python -m tests.faults.measure`` (from the repository root). Each case runs once,
plain and streamed, against the bad server of :mod:`tests.faults.badserver`, with the
deadlines of :data:`tests.faults.faults.DEADLINES` and the default retry policy.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from tests.faults.faults import DEADLINES, FAULTS, Fault, fault_url
from tests.server.helpers import assemble, chat, proxy, sse_events
from toolshim.upstreams.aiohttp_upstream import AiohttpUpstream


def result(status: int, text: str, stream: bool) -> str:
    if status != 200:
        error = json.loads(text)["error"]
        return f"{status} `{error['code'] or error['type']}`"
    if stream:
        for block in text.split("\n\n"):
            data = block.removeprefix("data: ")
            if data.startswith("{") and '"error"' in data[:12]:
                error = json.loads(data)["error"]
                return f"200, then error event `{error['code'] or error['type']}`"
        finish = assemble(sse_events(text))["finish_reason"]
        return f"200, ends with finish_reason `{finish}`"
    return f"200, finish_reason `{json.loads(text)['choices'][0]['finish_reason']}`"


async def one(fault: Fault, stream: bool) -> str:
    async def ask(url: str) -> tuple[int, str]:
        upstream = AiohttpUpstream(url, **DEADLINES)  # type: ignore[arg-type]
        async with proxy(upstream, mode="off") as p:
            try:
                answer = await p.client.post("/v1/chat/completions", json=chat(stream=stream))
            finally:
                await p.engine.aclose()
        return answer.status_code, answer.text

    async with fault_url(fault, stream) as (url, requests):
        started = time.perf_counter()
        status, text = await ask(url)
        elapsed = time.perf_counter() - started
    tries = f", {len(requests)} tries" if len(requests) > 1 else ""
    return f"{result(status, text, stream)} in {elapsed:.2f} s{tries}"


async def main() -> None:
    rows: list[Any] = []
    for name, fault in FAULTS.items():
        rows.append((name, fault.description, await one(fault, False), await one(fault, True)))
    print("| fault | what the server does | plain request | streamed request |")
    print("| --- | --- | --- | --- |")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    asyncio.run(main())
