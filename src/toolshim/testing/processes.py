"""Real processes on 127.0.0.1 for end-to-end tests: a free port, a child process with its log,
started and awaited until a URL answers, the scripted upstream
(``python -m toolshim.testing.server``) and ``toolshim serve`` in front of an upstream."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

__all__ = [
    "START_TIMEOUT",
    "FakeUpstreamProcess",
    "Process",
    "free_port",
    "start_fake_upstream",
    "start_process",
    "start_serve",
]

START_TIMEOUT = 30.0
"""Seconds a process has to answer its readiness URL."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listened on a moment ago."""
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
        """SIGTERM (SIGKILL after 10 s); the exit code."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout=10)
        return int(self.popen.returncode)


def start_process(
    args: list[str], log: Path, ready_url: str, env: dict[str, str] | None = None
) -> Process:
    """Start ``args`` (output to ``log``); wait until ``ready_url`` answers 200, killing the
    process if it never does. ``url`` is ``ready_url`` without its last segment."""
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


def start_serve(
    *flags: str,
    upstream: str,
    port: int,
    registry: str | os.PathLike[str],
    log: Path,
    env: dict[str, str] | None = None,
) -> Process:
    """``toolshim serve --upstream … --port … --registry … *flags`` as its own process, once
    its ``/healthz`` answers; ``url`` is ``http://127.0.0.1:<port>``."""
    args = [sys.executable, "-m", "toolshim.cli.main", "serve", "--upstream", upstream]
    args += ["--port", str(port), "--registry", str(registry), *flags]
    return start_process(args, log, f"http://127.0.0.1:{port}/healthz", env)


@dataclass
class FakeUpstreamProcess:
    """The scripted upstream in its own process; ``base_url`` ends in ``/v1``."""

    process: Process
    base_url: str

    def script(self, **script: Any) -> None:
        """Replace what the upstream answers (see toolshim.testing.server)."""
        response = httpx.post(self.base_url.removesuffix("/v1") + "/_toolshim/script", json=script)
        assert response.status_code == 200, response.text

    def history(self) -> dict[str, Any]:
        response = httpx.get(self.base_url.removesuffix("/v1") + "/_toolshim/history")
        return dict(response.json())

    def __enter__(self) -> FakeUpstreamProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.stop()


def start_fake_upstream(log: Path) -> FakeUpstreamProcess:
    """``python -m toolshim.testing.server`` on a free port, once it answers; ``with`` it (or
    stop its ``process``) to end it."""
    port = free_port()
    args = [sys.executable, "-m", "toolshim.testing.server", "--port", str(port)]
    process = start_process(args, log, f"http://127.0.0.1:{port}/v1/models")
    return FakeUpstreamProcess(process, f"http://127.0.0.1:{port}/v1")
