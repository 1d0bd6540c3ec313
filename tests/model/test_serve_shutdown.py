"""`toolshim serve` on the real embedded model: a stop signal stops the model's server too.

A user stops the proxy with Ctrl-C or a service manager's SIGTERM, sometimes while a reply is
still being generated. The llama.cpp child (the launcher) must be gone when `serve` is: a
leftover one keeps a model in memory and two cores busy. These run the real launcher and
model, found by its ``--parent-pid`` on the command line.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from tests.model.conftest import _why_unavailable

START_TIMEOUT = 180.0
STOP_TIMEOUT = 30.0
TOOLSHIM = str(Path(sys.executable).with_name("toolshim"))


def _children_of(pid: int) -> list[int]:
    """Launchers started by ``pid`` (they carry ``--parent-pid PID``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if (
            b"toolshim.local.launcher" in argv
            and b"--parent-pid" in argv
            and argv[argv.index(b"--parent-pid") + 1] == str(pid).encode()
        ):
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _start_serve(tmp_path: Path, *flags: str) -> tuple[subprocess.Popen[bytes], str, Path]:
    log = tmp_path / "serve.log"
    env = {**os.environ, "TOOLSHIM_REGISTRY": str(tmp_path / "registry.sqlite")}
    with log.open("wb") as out:
        popen = subprocess.Popen(
            [TOOLSHIM, "serve", "--port", "0", *flags],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
        )
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        match = re.search(r"listening on (http://\S+/v1)", log.read_text(errors="replace"))
        if match:
            return popen, match.group(1), log
        if popen.poll() is not None:
            break
        time.sleep(0.2)
    popen.kill()
    raise AssertionError(f"serve did not start:\n{log.read_text(errors='replace')}")


def _wait_gone(pids: list[int]) -> list[int]:
    deadline = time.monotonic() + STOP_TIMEOUT
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.2)
    return [p for p in pids if _alive(p)]


def _stop(
    popen: subprocess.Popen[bytes], sig: signal.Signals, launchers: list[int]
) -> tuple[int, list[int]]:
    """Send ``sig`` to serve; its exit status and the launchers still alive after it (killed
    then, so that a failing test leaves no model behind)."""
    popen.send_signal(sig)
    try:
        code = popen.wait(STOP_TIMEOUT)
    finally:
        if popen.poll() is None:
            popen.kill()
    left = _wait_gone(launchers)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    return code, left


@pytest.fixture(autouse=True)
def _model_installed() -> None:
    reason = _why_unavailable()
    if reason:
        pytest.skip(reason)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_stops_the_model_server_too(tmp_path: Path, sig: signal.Signals) -> None:
    popen, _, log = _start_serve(tmp_path)
    launchers = _children_of(popen.pid)
    assert len(launchers) == 1, f"expected one launcher under serve, found {launchers}"
    code, left = _stop(popen, sig, launchers)
    output = log.read_text(errors="replace")
    assert left == [], f"the model server outlived serve:\n{output}"
    assert code == 0, output
    assert "toolshim: stopped" in output
    assert "Traceback" not in output


def test_a_reply_in_flight_is_cut_and_the_model_server_still_stops(tmp_path: Path) -> None:
    popen, base_url, log = _start_serve(tmp_path, "--drain-timeout", "2")
    launchers = _children_of(popen.pid)
    body = json.dumps(
        {
            "model": "m",
            "stream": True,
            "max_tokens": 1500,
            "ignore_eos": True,  # llama.cpp's: generate all 1,500 tokens, tens of seconds here
            "messages": [{"role": "user", "content": "Count from 1 to 1000, one per line."}],
        }
    ).encode()
    received: list[bytes] = []

    def client() -> None:
        request = urllib.request.Request(
            f"{base_url}/chat/completions", body, {"content-type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=120) as reply:
                received.extend(reply)
        except OSError as exc:  # the connection may be dropped at shutdown: that is the point
            received.append(repr(exc).encode())

    thread = threading.Thread(target=client, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not received and time.monotonic() < deadline:  # the stream has started
        time.sleep(0.1)
    code, left = _stop(popen, signal.SIGTERM, launchers)
    thread.join(10)
    output = log.read_text(errors="replace")
    assert left == [], f"the model server outlived serve:\n{output}"
    assert code == 0, output
    assert "drain time (2s) is up" in output
    text = b"".join(received).decode(errors="replace")
    assert "shut down before this request was finished" in text, text[-2000:]
