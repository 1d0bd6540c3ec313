"""Slow and idle clients against a real `toolshim serve` on 127.0.0.1: dripped headers and
bodies are cut at their deadlines, idle keep-alive connections are closed, and real clients
are served while hundreds of slow connections are open, even at a low open-file limit."""

from __future__ import annotations

import json
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import fake_upstream
from toolshim.testing import FakeUpstreamProcess, Process, free_port, start_process, start_serve

pytestmark = pytest.mark.e2e

__all__ = ["fake_upstream"]  # the fixture, imported for this module's tests

WAIT = 30.0
"""How long a test waits for the server to act (a liveness bound, not a speed target)."""
REQUEST = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture(scope="module")
def proxy(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstreamProcess
) -> Iterator[Process]:
    """`toolshim serve` with one-second client deadlines."""
    fake_upstream.script(replies=["hello"], repeat=True)
    port = free_port()
    home = tmp_path_factory.mktemp("slow")
    process = start_serve(
        "--header-timeout",
        "1",
        "--body-timeout",
        "1",
        "--idle-timeout",
        "1",
        upstream=fake_upstream.base_url,
        port=port,
        registry=home / "capabilities.sqlite3",
        log=home / "serve.log",
    )
    process.url = f"http://127.0.0.1:{port}"
    try:
        yield process
    finally:
        process.stop()


def connect(process: Process) -> socket.socket:
    host, port = process.url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=WAIT)
    return sock


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (or WAIT passes)."""
    data = b""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        data += chunk
    else:
        raise AssertionError(f"the server kept the connection open for {WAIT}s: {data!r}")
    return data


def drip(sock: socket.socket, piece: bytes, seconds: float) -> None:
    """Send ``piece`` every 0.2 s for ``seconds``, stopping when the server closes."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            sock.sendall(piece)
        except OSError:
            return
        time.sleep(0.2)


def error_of(answer: bytes) -> tuple[int, dict[str, object]]:
    head, _, body = answer.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, json.loads(body)["error"]


def test_dripped_headers_are_cut_at_the_header_deadline(proxy: Process) -> None:
    with connect(proxy) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: proxy\r\n")
        drip(sock, b"X-Slow: 1\r\n", 3)
        status, error = error_of(read_until_closed(sock))
    assert status == 408
    assert error["code"] == "header_timeout"
    assert "--header-timeout" in str(error["message"])


def test_a_connection_that_sends_nothing_is_closed(proxy: Process) -> None:
    with connect(proxy) as sock:
        status, _ = error_of(read_until_closed(sock))
    assert status == 408


def test_a_dripped_body_is_cut_at_the_body_deadline(proxy: Process) -> None:
    with connect(proxy) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: proxy\r\n"
            b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
        )
        drip(sock, b" ", 3)
        status, error = error_of(read_until_closed(sock))
    assert status == 408
    assert error["code"] == "body_timeout"


def test_oversized_headers_are_a_431(proxy: Process) -> None:
    with connect(proxy) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: proxy\r\n")
        for _ in range(80):
            sock.sendall(b"X-Big: " + b"a" * 1000 + b"\r\n")
        status, error = error_of(read_until_closed(sock))
    assert status == 431 and error["code"] == "header_size"


def test_an_idle_keep_alive_connection_is_closed(proxy: Process) -> None:
    with connect(proxy) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: proxy\r\n\r\n")
        answer = read_until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 200")


def test_real_clients_are_served_while_200_slow_connections_are_open(proxy: Process) -> None:
    slow = []
    try:
        for _ in range(250):
            sock = connect(proxy)
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: proxy\r\n")
            slow.append(sock)
        with httpx.Client(base_url=proxy.url, timeout=WAIT) as client:
            for _ in range(5):
                response = client.post("/v1/chat/completions", json=REQUEST)
                assert response.status_code == 200, response.text
            assert client.get("/healthz").status_code == 200
    finally:
        for sock in slow:
            sock.close()
    # One log line for the burst of header timeouts, not one per connection.
    deadline = time.monotonic() + WAIT
    while "limit header_timeout hit" not in proxy.output() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert proxy.output().count("limit header_timeout hit") <= 2


LOW_FD_LIMIT = (
    "import resource, runpy, sys; resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256)); "
    "sys.argv = ['toolshim', *sys.argv[1:]]; runpy.run_module('toolshim.cli.main', "
    "run_name='__main__')"
)


def test_at_a_low_open_file_limit_slow_connections_make_room_for_real_clients(
    tmp_path: Path, fake_upstream: FakeUpstreamProcess
) -> None:
    """256 descriptors, 300 slow connections: the proxy caps its connections to fit and, at
    the cap, closes the one that has waited longest for its headers, so real clients get in."""
    fake_upstream.script(replies=["hello"], repeat=True)
    port = free_port()
    args = [
        sys.executable,
        "-c",
        LOW_FD_LIMIT,
        "serve",
        "--upstream",
        fake_upstream.base_url,
        "--port",
        str(port),
        "--registry",
        str(tmp_path / "capabilities.sqlite3"),
    ]
    process = start_process(args, tmp_path / "serve.log", f"http://127.0.0.1:{port}/healthz")
    process.url = f"http://127.0.0.1:{port}"
    slow = []
    try:
        for _ in range(300):
            try:
                sock = connect(process)
                sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: proxy\r\n")
            except OSError:
                continue
            slow.append(sock)
        with httpx.Client(base_url=process.url, timeout=WAIT) as client:
            for _ in range(5):
                response = client.post("/v1/chat/completions", json=REQUEST)
                assert response.status_code == 200, response.text
    finally:
        for sock in slow:
            sock.close()
        process.stop()
    output = process.output()
    assert "--max-connections is 96" in output
    assert 1 <= output.count("limit connections hit") <= 2, output
