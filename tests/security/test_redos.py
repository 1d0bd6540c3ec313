"""A caller's catastrophic regex (``^(a+)+$``) cannot stall the proxy: patterns run on RE2."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.security.helpers import tool_body

EVIL = {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}}
ATTACK = "a" * 34 + "!"  # Python's backtracking engine: about 2**34 steps; RE2: linear
ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def proxy_process(mode: str, arguments: dict[str, Any]) -> Iterator[str]:
    """The proxy in a child process (the old code froze the process that served it, so a
    regression must not take the test runner with it); yields its base URL."""
    command = [sys.executable, "-m", "tests.security.proxy_process", mode, json.dumps(arguments)]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line.startswith("port "), f"the proxy did not start: {line!r}"
        base_url = f"http://127.0.0.1:{line.split()[1]}"
        for _ in range(200):
            try:
                httpx.get(f"{base_url}/healthz", timeout=5)
                break
            except httpx.TransportError:
                time.sleep(0.05)
        yield base_url
    finally:
        child.kill()
        child.wait(timeout=30)
        if child.stdout is not None:
            child.stdout.close()


@pytest.mark.parametrize("mode", ["force", "auto"])
def test_health_answers_while_a_catastrophic_pattern_is_checked(mode: str) -> None:
    async def exchange(base_url: str) -> tuple[httpx.Response | None, list[int | str]]:
        # Generous guards, not speed targets: the old code stalled every client for minutes.
        async with httpx.AsyncClient(base_url=base_url, timeout=20) as client:
            chat = asyncio.ensure_future(client.post("/v1/chat/completions", json=tool_body(EVIL)))
            health: list[int | str] = []
            while not chat.done() or not health:
                try:
                    health.append((await client.get("/healthz")).status_code)
                except httpx.TimeoutException:
                    health.append("no answer")
                    chat.cancel()
                    await asyncio.wait([chat])
                    return None, health
            return await chat, health

    with proxy_process(mode, {"s": ATTACK}) as base_url:
        response, health = asyncio.run(exchange(base_url))
    assert set(health) == {200}
    assert response is not None and response.status_code == 200, response
    meta = response.json()["toolshim"]
    assert f"{ATTACK!r} does not match '^(a+)+$'" in " ".join(meta["warnings"])  # rejected
    assert meta["llm_calls"] >= 2  # and the model was asked again


def test_a_catastrophic_pattern_is_checked_promptly() -> None:
    # In a child process, so that a regression fails by the guard instead of hanging the run.
    code = textwrap.dedent(
        f"""
        from toolshim.dialects.interpret import ParsedCall
        from toolshim.engine.validate import validate_calls
        from toolshim.types import ToolChoice, ToolSpec
        tool = ToolSpec("f", parameters={EVIL!r})
        for text in ("a" * 5000 + "!", "a" * 5000):
            call = ParsedCall("f", {{"s": text}}, "raw")
            verdict = validate_calls([call], [tool], ToolChoice.AUTO)
            print(verdict.ok)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.split() == ["False", "True"]
