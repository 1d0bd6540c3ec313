"""Real processes on 127.0.0.1: the scripted upstream and `toolshim serve` in front of it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

START_TIMEOUT = 30.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Process:
    """A child process with its log file; ``url`` is where it serves."""

    popen: subprocess.Popen[bytes]
    url: str
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> int:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout=10)
        return int(self.popen.returncode)


def start(args: list[str], log: Path, ready_url: str, env: dict[str, str] | None = None) -> Process:
    """Start ``args``; wait until ``ready_url`` answers (killing the process if it never does)."""
    handle = log.open("wb")
    popen = subprocess.Popen(
        args,
        stdout=handle,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )
    handle.close()
    process = Process(popen, ready_url.rsplit("/", 1)[0], log)
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        if popen.poll() is not None:
            raise AssertionError(f"{args} exited with {popen.returncode}:\n{process.output()}")
        try:
            if httpx.get(ready_url, timeout=1).status_code == 200:
                return process
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            process.stop()
            raise AssertionError(f"{args} did not become ready:\n{process.output()}")
        time.sleep(0.05)


@dataclass
class FakeUpstreamProcess:
    process: Process
    base_url: str

    def script(self, **script: Any) -> None:
        """Replace what the upstream answers (see toolshim.testing.server)."""
        response = httpx.post(self.base_url.removesuffix("/v1") + "/_toolshim/script", json=script)
        assert response.status_code == 200, response.text

    def history(self) -> dict[str, Any]:
        response = httpx.get(self.base_url.removesuffix("/v1") + "/_toolshim/history")
        return dict(response.json())


@pytest.fixture(scope="module")
def fake_upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeUpstreamProcess]:
    """The scripted upstream as its own process."""
    port = free_port()
    log = tmp_path_factory.mktemp("upstream") / "upstream.log"
    args = [sys.executable, "-m", "toolshim.testing.server", "--port", str(port)]
    process = start(args, log, f"http://127.0.0.1:{port}/v1/models")
    try:
        yield FakeUpstreamProcess(process, f"http://127.0.0.1:{port}/v1")
    finally:
        process.stop()


ProxyFactory = Callable[..., Process]


@pytest.fixture(scope="module")
def serve(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstreamProcess
) -> Iterator[ProxyFactory]:
    """Start `toolshim serve` processes in front of the fake upstream; all stopped at the end."""
    started: list[Process] = []

    def factory(*flags: str, upstream: str | None = None) -> Process:
        port = free_port()
        home = tmp_path_factory.mktemp("proxy")
        args = [
            sys.executable,
            "-m",
            "toolshim.cli.main",
            "serve",
            "--upstream",
            upstream or fake_upstream.base_url,
            "--port",
            str(port),
            "--registry",
            str(home / "capabilities.sqlite3"),
            *flags,
        ]
        process = start(args, home / "serve.log", f"http://127.0.0.1:{port}/healthz")
        process.url = f"http://127.0.0.1:{port}/v1"
        started.append(process)
        return process

    try:
        yield factory
    finally:
        for process in started:
            process.stop()
