"""EmbeddedServer's lifecycle against the real launcher serving a tiny fake llama.cpp."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest

from toolshim.errors import LocalModelError
from toolshim.local import KNOWN_MODELS, EmbeddedServer, running_servers

from .helpers import FAKE_LAUNCHER

pytestmark = pytest.mark.e2e


def _gone(pid: int) -> bool:
    """True once ``pid`` has exited (a zombie waiting for its reaper counts as gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in status or "\nState:\tX" in status


def _wait_gone(pid: int, limit: float = 15.0) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if _gone(pid):
            return True
        time.sleep(0.1)
    return False


def test_start_serves_and_stop_ends_the_child(gguf: Path, fake_llama: pytest.MonkeyPatch) -> None:
    server = EmbeddedServer(gguf, ctx_size=2048, launcher=FAKE_LAUNCHER)
    assert not server.running
    server.start()
    try:
        assert server.running
        assert server in running_servers()
        assert server.base_url.startswith("http://127.0.0.1:")
        assert server.base_url.endswith("/v1")
        assert server.model == "some-model.gguf"  # the alias defaults to the file name
        listing = httpx.get(f"{server.base_url}/models").json()
        assert listing["data"][0]["id"] == server.model
        assert server.start() is server  # idempotent while running
        assert server.props["omp_wait_policy"] == "PASSIVE"
        pid = server.pid
        assert pid is not None
        log = server.log_path
        assert log is not None and "launcher: serving" in log.read_text()
    finally:
        server.stop()
    assert not server.running
    assert server not in running_servers()
    assert _wait_gone(pid)
    assert not log.exists()  # a clean stop removes the temporary log
    server.stop()  # idempotent
    with pytest.raises(LocalModelError, match="not started"):
        _ = server.base_url
    with server:  # and it starts again
        assert server.pid != pid
        assert httpx.get(f"{server.base_url}/models").status_code == 200


def test_a_chosen_openmp_policy_is_kept(gguf: Path, fake_llama: pytest.MonkeyPatch) -> None:
    fake_llama.setenv("OMP_WAIT_POLICY", "ACTIVE")
    with EmbeddedServer(gguf, launcher=FAKE_LAUNCHER) as server:
        assert server.props["omp_wait_policy"] == "ACTIVE"


def test_requests_without_a_temperature_are_greedy_unless_chosen(
    gguf: Path, fake_llama: pytest.MonkeyPatch
) -> None:
    with EmbeddedServer(gguf, launcher=FAKE_LAUNCHER) as server:
        assert server.props["default_generation_settings"]["params"]["temperature"] == 0.0
    with EmbeddedServer(gguf, launcher=FAKE_LAUNCHER, temperature=0.8) as server:
        assert server.props["default_generation_settings"]["params"]["temperature"] == 0.8


def test_context_manager_and_explicit_port(gguf: Path, fake_llama: pytest.MonkeyPatch) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with EmbeddedServer(gguf, port=port, alias="mine", launcher=FAKE_LAUNCHER) as server:
        assert server.base_url == f"http://127.0.0.1:{port}/v1"
        assert server.model == "mine"
        pid = server.pid
    assert pid is not None and _wait_gone(pid)


def test_a_kept_log_survives_stop(
    gguf: Path, tmp_path: Path, fake_llama: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "llama.log"
    with EmbeddedServer(gguf, log_path=log, launcher=FAKE_LAUNCHER) as server:
        assert server.log_path == log
    assert "launcher: stopping" in log.read_text()


def test_a_child_that_fails_raises_with_its_log(gguf: Path, fake_llama: pytest.MonkeyPatch) -> None:
    fake_llama.setenv("FAKE_LLAMA", "fail")
    server = EmbeddedServer(gguf, launcher=FAKE_LAUNCHER)
    with pytest.raises(LocalModelError) as info:
        server.start()
    message = info.value.message
    assert "exited with status 1 while starting some-model.gguf" in message
    assert "failed to load model 'x.gguf'" in message
    assert "full log:" in message
    assert not server.running


@pytest.mark.parametrize("behaviour", ["hang", "sick"])
def test_a_child_that_never_gets_ready_is_killed(
    gguf: Path, fake_llama: pytest.MonkeyPatch, behaviour: str
) -> None:
    fake_llama.setenv("FAKE_LLAMA", behaviour)
    server = EmbeddedServer(gguf, startup_timeout=6.0, launcher=FAKE_LAUNCHER)
    with pytest.raises(LocalModelError, match="did not become ready within 6s") as info:
        server.start()
    assert "launcher: loading" in info.value.message
    assert not server.running
    assert server.pid is None


def test_a_missing_model_file_is_reported_before_spawning(tmp_path: Path) -> None:
    server = EmbeddedServer(tmp_path / "absent.gguf", launcher=FAKE_LAUNCHER)
    with pytest.raises(LocalModelError, match=r"model file '.*absent\.gguf' does not exist"):
        server.start()
    assert server.pid is None


def test_capabilities_follow_the_template_and_the_measured_model(
    tmp_path: Path, fake_llama: pytest.MonkeyPatch
) -> None:
    unknown = tmp_path / "unknown.gguf"
    unknown.write_bytes(b"GGUF")
    with EmbeddedServer(unknown, ctx_size=4096, parallel=2, launcher=FAKE_LAUNCHER) as server:
        facts = server.capabilities()
        assert server.props["chat_template_caps"]["supports_tools"] is True
    assert facts == {
        "native_tools": "yes",
        "tool_choice": "unknown",
        "structured_output": "yes",
        "prefill": "yes",
        "parallel_calls": "yes",
        "context_window": "2048",
    }
    with EmbeddedServer(unknown, jinja=False, launcher=FAKE_LAUNCHER) as server:
        facts = server.capabilities()
    assert (facts["native_tools"], facts["parallel_calls"]) == ("no", "unknown")
    qwen = tmp_path / KNOWN_MODELS["qwen2.5-coder-0.5b"].filename
    qwen.write_bytes(b"GGUF")
    with EmbeddedServer(qwen, launcher=FAKE_LAUNCHER) as server:
        assert server.model == "qwen2.5-coder-0.5b-instruct"
        facts = server.capabilities()
    assert facts["native_tools"] == "no"  # measured: the calls come back in content
    assert facts["tool_choice"] == "no"
    assert facts["dialect"] == "hermes"
    gemma = tmp_path / KNOWN_MODELS["gemma3-270m-base"].filename
    gemma.write_bytes(b"GGUF")
    with EmbeddedServer(gemma, launcher=FAKE_LAUNCHER) as server:
        facts = server.capabilities()
    assert facts["native_tools"] == "no"  # a base model: no chat template
    assert "dialect" not in facts


PARENT = """
import sys, threading, time
from toolshim.local import EmbeddedServer
server = EmbeddedServer(sys.argv[1], launcher=sys.argv[3:])
if sys.argv[2] == "thread":
    worker = threading.Thread(target=server.start)
    worker.start()
    worker.join()   # the spawning thread is gone; the child must stay up
    time.sleep(1.0)
    assert server.running, "the child died with the thread that started it"
else:
    server.start()
print(server.pid, flush=True)
if sys.argv[2] != "exit":
    time.sleep(600)
"""


def _parent(gguf: Path, how: str) -> tuple[subprocess.Popen[str], int]:
    process = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(PARENT), str(gguf), how, *FAKE_LAUNCHER],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.strip().isdigit(), f"the parent printed {line!r}"
    return process, int(line)


@pytest.mark.parametrize("how", ["main", "thread"])
def test_the_child_does_not_outlive_a_killed_parent(
    gguf: Path, fake_llama: pytest.MonkeyPatch, how: str
) -> None:
    parent, child = _parent(gguf, how)
    try:
        assert not _gone(child)
        parent.kill()
        parent.wait()
        assert _wait_gone(child), f"llama.cpp child {child} outlived its killed parent"
    finally:
        _cleanup(parent, child)


def test_a_parent_that_exits_without_stop_takes_the_child_along(
    gguf: Path, fake_llama: pytest.MonkeyPatch
) -> None:
    parent, child = _parent(gguf, "exit")
    try:
        assert parent.wait(timeout=60) == 0
        assert _wait_gone(child)
    finally:
        _cleanup(parent, child)


def _cleanup(parent: subprocess.Popen[str], child: int) -> None:
    parent.kill()
    parent.wait()
    if parent.stdout is not None:
        parent.stdout.close()
    if not _gone(child):
        os.kill(child, 9)
