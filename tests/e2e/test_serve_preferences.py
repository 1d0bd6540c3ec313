"""`toolshim serve` (a real process) emulates with the preference an eval stored for the model."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
import pytest

from tests.capabilities.test_eval_preferences import TOOLS, store_eval_pick
from toolshim.testing import FakeUpstreamProcess, free_port, start_process

pytestmark = pytest.mark.e2e


def test_serve_uses_the_stored_preference(
    tmp_path: Path, fake_upstream: FakeUpstreamProcess
) -> None:
    fake_upstream.script(replies=['[get_weather(city="Paris")]'], repeat=True, models=["m"])
    path = tmp_path / "reg.sqlite3"
    store_eval_pick(path, fake_upstream.base_url, "m")
    port = free_port()
    args = [sys.executable, "-m", "toolshim.cli.main", "serve", "--port", str(port)]
    args += ["--upstream", fake_upstream.base_url, "--registry", str(path), "--mode", "force"]
    proxy = start_process(args, tmp_path / "serve.log", f"http://127.0.0.1:{port}/healthz")
    try:
        answer = httpx.post(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            json={
                "model": "m",
                "messages": [{"role": "user", "content": "Paris?"}],
                "tools": TOOLS,
            },
            timeout=30,
        ).json()
    finally:
        assert proxy.stop() == 0
    assert answer["toolshim"]["dialect"] == "pythonic", answer
    assert answer["toolshim"]["strategy"] == "decision"
    assert answer["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_weather"
