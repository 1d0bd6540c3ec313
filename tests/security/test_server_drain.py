"""Shutdown of a real `toolshim serve`: in-flight requests get --drain-timeout to finish; those
it cuts get an OpenAI-shaped 503, or, mid-stream, an error event and the end of the stream."""

from __future__ import annotations

import json
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import fake_upstream
from toolshim.testing import FakeUpstreamProcess, Process, free_port, start_serve

pytestmark = pytest.mark.e2e

__all__ = ["fake_upstream"]  # the fixture, imported for this module's tests

REQUEST = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def serve(tmp_path: Path, upstream: FakeUpstreamProcess, drain: str) -> Process:
    port = free_port()
    process = start_serve(
        "--drain-timeout",
        drain,
        upstream=upstream.base_url,
        port=port,
        registry=tmp_path / "capabilities.sqlite3",
        log=tmp_path / "serve.log",
    )
    process.url = f"http://127.0.0.1:{port}/v1"
    return process


def in_flight(call: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def run() -> None:
        out["result"] = call()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def stop_during(process: Process, call: Callable[[threading.Event], Any]) -> Any:
    """Run ``call`` in a thread; SIGTERM the proxy once ``call`` says its request is under way."""
    under_way = threading.Event()
    thread, out = in_flight(lambda: call(under_way))
    assert under_way.wait(30), "the request never got under way"
    process.popen.send_signal(signal.SIGTERM)
    thread.join(60)
    assert process.popen.wait(60) == 0
    output = process.output()
    assert "Traceback" not in output and "Exception in ASGI application" not in output, output
    return out["result"]


def test_a_request_cut_by_the_drain_gets_an_openai_503(
    tmp_path: Path, fake_upstream: FakeUpstreamProcess
) -> None:
    fake_upstream.script(replies=["late"], delay=30)
    process = serve(tmp_path, fake_upstream, "1")

    def call(under_way: threading.Event) -> httpx.Response:
        with httpx.Client(timeout=60) as client:
            threading.Timer(0.5, under_way.set).start()
            return client.post(f"{process.url}/chat/completions", json=REQUEST)

    response = stop_during(process, call)
    assert response.status_code == 503
    error = response.json()["error"]
    assert error["code"] == "shutting_down" and error["type"] == "server_error"
    assert "--drain-timeout" in error["message"]


def test_a_stream_cut_by_the_drain_ends_with_an_error_event(
    tmp_path: Path, fake_upstream: FakeUpstreamProcess
) -> None:
    fake_upstream.script(replies=["word " * 100], chunk_delay=0.2, piece=5)
    process = serve(tmp_path, fake_upstream, "1")

    def call(under_way: threading.Event) -> list[str]:
        lines = []
        body = {**REQUEST, "stream": True}
        with (
            httpx.Client(timeout=60) as client,
            client.stream("POST", f"{process.url}/chat/completions", json=body) as response,
        ):
            assert response.status_code == 200
            for line in response.iter_lines():
                if line.startswith("data: "):
                    lines.append(line.removeprefix("data: "))
                    under_way.set()
        return lines

    events = stop_during(process, call)
    assert events[-1] == "[DONE]"
    error = json.loads(events[-2])["error"]
    assert error["code"] == "shutting_down"
    assert all("choices" in json.loads(e) for e in events[:-2])  # no made-up finish before it
    assert not any(json.loads(e)["choices"][0].get("finish_reason") for e in events[:-2])


def test_a_request_that_finishes_within_the_drain_is_answered(
    tmp_path: Path, fake_upstream: FakeUpstreamProcess
) -> None:
    fake_upstream.script(replies=["in time"], delay=2)
    process = serve(tmp_path, fake_upstream, "30")

    def call(under_way: threading.Event) -> httpx.Response:
        with httpx.Client(timeout=60) as client:
            threading.Timer(0.5, under_way.set).start()
            return client.post(f"{process.url}/chat/completions", json=REQUEST)

    response = stop_during(process, call)
    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["content"] == "in time"


def test_the_drain_timeout_is_a_flag() -> None:
    import os
    import subprocess

    result = subprocess.run(
        [sys.executable, "-m", "toolshim.cli.main", "serve", "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        check=False,
    )
    assert "--drain-timeout" in result.stdout and "TOOLSHIM_DRAIN_TIMEOUT" in result.stdout
