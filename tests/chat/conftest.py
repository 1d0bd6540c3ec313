"""`toolshim chat` in a pseudo-terminal (pexpect) against the scripted upstream on 127.0.0.1."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pexpect
import pytest

from toolshim.testing.server import RunningServer, ScriptedUpstream, serve_fake

MODELS = ["llama3.2", "gemma3:1b", "custom-model"]
"""A model with native tools (profile), one without (profile) and one nobody knows."""

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_SPACE = re.compile(r"\s+")


def plain(text: str) -> str:
    """Terminal output without escape sequences and without any whitespace (prompt_toolkit moves
    the cursor instead of writing spaces, and lines wrap), so fragments compare reliably."""
    return _SPACE.sub("", _ANSI.sub("", text))


@dataclass
class Upstream:
    """The scripted upstream, served over HTTP from a thread of the test process."""

    server: RunningServer

    @property
    def base_url(self) -> str:
        return self.server.base_url

    def script(self, **script: Any) -> None:
        script.setdefault("models", MODELS)
        root = self.base_url.removesuffix("/v1")
        response = httpx.post(f"{root}/_toolshim/script", json=script, timeout=5)
        assert response.status_code == 200, response.text

    def history(self) -> dict[str, Any]:
        root = self.base_url.removesuffix("/v1")
        return dict(httpx.get(f"{root}/_toolshim/history", timeout=5).json())

    def requests(self) -> list[dict[str, Any]]:
        return list(self.history()["requests"])


@pytest.fixture(scope="module")
def upstream() -> Iterator[Upstream]:
    with serve_fake(ScriptedUpstream({"models": MODELS})) as server:
        yield Upstream(server)


class Chat:
    """A running ``toolshim chat`` in a pseudo-terminal; ``expect`` matches printed text."""

    def __init__(self, child: pexpect.spawn, log: Path) -> None:
        self.child = child
        self.log = log
        self.raw = ""
        self.position = 0

    def _read(self, wait: float) -> None:
        with contextlib.suppress(pexpect.TIMEOUT):
            self.raw += self.child.read_nonblocking(65536, timeout=wait)

    def expect(self, text: str, timeout: float = 20.0) -> str:
        """Wait until ``text`` is printed after the previous match; return the output between."""
        wanted = plain(text)
        deadline = time.monotonic() + timeout
        while True:
            seen = plain(self.raw)
            found = seen.find(wanted, self.position)
            if found >= 0:
                between = seen[self.position : found]
                self.position = found + len(wanted)
                return between
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {text!r}; output:\n{self.screen()}")
            try:
                self._read(0.1)
            except pexpect.EOF:
                if plain(self.raw).find(wanted, self.position) < 0:
                    raise AssertionError(
                        f"chat exited before printing {text!r}; output:\n{self.screen()}"
                    ) from None

    def output_since_start(self) -> str:
        return plain(self.raw)

    def settle(self, seconds: float = 0.3) -> str:
        """Read for ``seconds``; return everything printed after the last match (plain)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                self._read(0.05)
            except pexpect.EOF:
                break
        return plain(self.raw)[self.position :]

    def screen(self) -> str:
        return _ANSI.sub("", self.raw).replace("\r", "")

    def prompt(self, model: str) -> None:
        self.expect(f"{model} ›")

    def send(self, line: str) -> None:
        self.child.send(line + "\r")

    def ctrl_c(self) -> None:
        self.child.sendcontrol("c")

    def ctrl_d(self) -> None:
        self.child.sendcontrol("d")

    def exit_status(self, timeout: float = 20.0) -> int:
        self.child.expect(pexpect.EOF, timeout=timeout)
        self.raw += self.child.before or ""
        self.child.close()
        return int(self.child.exitstatus if self.child.exitstatus is not None else -1)

    def close(self) -> None:
        if self.child.isalive():
            self.child.terminate(force=True)


ChatFactory = Callable[..., Chat]


@pytest.fixture
def registry_path() -> Path:
    """The test's private capability store (set up by the autouse fixture in tests/conftest.py)."""
    return Path(os.environ["TOOLSHIM_REGISTRY"])


@pytest.fixture
def chat(tmp_path: Path, upstream: Upstream, registry_path: Path) -> Iterator[ChatFactory]:
    """Start ``toolshim chat --upstream <scripted>`` with flags; every chat is closed at the end."""
    started: list[Chat] = []

    def start(
        *flags: str,
        prompt_timeout: float | None = None,
        cwd: str | None = None,
        upstream_url: str | None = None,
        **env: str,
    ) -> Chat:
        environment = {
            **os.environ,
            "TERM": "xterm-256color",
            "NO_COLOR": "1",
            "PROMPT_TOOLKIT_NO_CPR": "1",
            "TOOLSHIM_CHAT_HISTORY": str(tmp_path / "history"),
            "TOOLSHIM_REGISTRY": str(registry_path),
            **env,
        }
        if prompt_timeout is not None:
            environment["TOOLSHIM_CHAT_PROMPT_TIMEOUT"] = str(prompt_timeout)
        url = upstream_url or upstream.base_url
        args = ["-m", "toolshim.cli.main", "chat", "--upstream", url, *flags]
        log = tmp_path / f"chat{len(started)}.log"
        child = pexpect.spawn(
            sys.executable,
            args,
            env=environment,
            encoding="utf-8",
            codec_errors="replace",
            dimensions=(50, 200),
            timeout=20,
            cwd=cwd,
        )
        session = Chat(child, log)
        started.append(session)
        return session

    try:
        yield start
    finally:
        for session in started:
            session.close()
