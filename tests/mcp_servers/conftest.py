"""MCP servers for the tests: the SDK-written one in ``server.py`` (stdio, or HTTP on
127.0.0.1), and the published filesystem server from npm, pinned, installed once into the test
cache (``TOOLSHIM_TEST_CACHE``, default ``~/.cache/toolshim-tests``)."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chat.conftest import upstream  # noqa: F401 (the scripted upstream, for the chat tests)
from tests.e2e.conftest import (  # the scripted upstream process and `toolshim serve`
    fake_upstream,  # noqa: F401
    free_port,
    serve,  # noqa: F401
)
from toolshim.mcp import MCPStdio
from toolshim.testing.npm import npm_executable

pytest.importorskip("mcp")

SERVER = Path(__file__).with_name("server.py")
FILESYSTEM_VERSION = "2026.8.31"
"""@modelcontextprotocol/server-filesystem, pinned."""
NOTES = "The meeting with Ada moved to Thursday at 3 pm in room 4."


def sdk_server(**env: str) -> MCPStdio:
    """The SDK-written test server on stdio."""
    return MCPStdio(sys.executable, [str(SERVER)], env=env or None, name="test")


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[str]:
    """The test server on streamable HTTP; yields its URL."""
    with run_http_server(tmp_path) as url:
        yield url


@contextlib.contextmanager
def run_http_server(folder: Path) -> Iterator[str]:
    """Run the test server on streamable HTTP on a free port; yield its URL."""
    port = free_port()
    log_path = folder / "http-server.log"
    with log_path.open("wb") as log:
        popen = subprocess.Popen(
            [sys.executable, str(SERVER), str(port)], stdout=log, stderr=subprocess.STDOUT
        )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if popen.poll() is not None:
                pytest.fail(f"the HTTP test server exited: {log_path.read_text()}")
            time.sleep(0.1)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        popen.terminate()
        popen.wait(timeout=10)


@pytest.fixture(scope="session")
def filesystem_server() -> Path:
    """The ``mcp-server-filesystem`` executable of the pinned npm package."""
    return install_filesystem_server()


def install_filesystem_server() -> Path:
    """Install the pinned filesystem server into the test cache once; its executable (the
    test is skipped where npm is missing)."""
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed (the filesystem server comes from npm)")
    return npm_executable(
        "@modelcontextprotocol/server-filesystem", FILESYSTEM_VERSION, "mcp-server-filesystem"
    )


@pytest.fixture
def notes_dir(tmp_path: Path) -> Path:
    """A directory holding notes.txt, for the filesystem server."""
    return write_notes(tmp_path)


def write_notes(tmp_path: Path) -> Path:
    folder = tmp_path / "files"
    folder.mkdir()
    (folder / "notes.txt").write_text(NOTES + "\n", encoding="utf-8")
    return folder


@pytest.fixture(params=["native", "emulated"])
def kind(request: pytest.FixtureRequest) -> str:
    """A model with tool support, or one whose tools are emulated in the prompt."""
    return str(request.param)
