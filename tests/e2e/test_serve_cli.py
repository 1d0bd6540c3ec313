"""`toolshim serve` as a command: flags, env vars, one-line errors, the embedded model, shutdown."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.e2e.fake_local import SERVED_MODEL
from toolshim.capabilities.registry import Registry
from toolshim.testing import FakeUpstreamProcess, free_port, start_process

pytestmark = pytest.mark.e2e

FAKE_LOCAL = str(Path(__file__).with_name("fake_local.py"))
SERVE = [sys.executable, "-m", "toolshim.cli.main", "serve"]


def run(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        args,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **env},
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], fragment: str) -> None:
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("error: "), result.stderr
    assert fragment in result.stderr.splitlines()[0]


def test_help_explains_the_flags() -> None:
    result = run([*SERVE, "--help"], COLUMNS="200")
    assert result.returncode == 0
    for flag in ("--upstream", "--mode", "--strategy", "--dialect", "--registry", "--host"):
        assert flag in result.stdout
    for flag in ("--auth-keys", "--allow-unauthenticated", "--max-body-size", "--drain-timeout"):
        assert flag in result.stdout
    for flag in ("--header-timeout", "--body-timeout", "--idle-timeout", "--max-connections"):
        assert flag in result.stdout
    for env in ("TOOLSHIM_UPSTREAM", "TOOLSHIM_MODE", "TOOLSHIM_UPSTREAM_API_KEY"):
        assert env in result.stdout
    # paragraphs are wrapped by the terminal, not at the source's line breaks
    assert "natively where the model supports them and are emulated where it does not" in (
        result.stdout
    )


def test_reflow_joins_paragraph_lines_and_keeps_examples() -> None:
    from toolshim.cli.main import reflow

    text = "One line\nand its tail.\n\nExample:\n    a = 1\n    b = 2\n- item\nNext."
    assert reflow(text) == "One line and its tail.\n\nExample:\n    a = 1\n    b = 2\n- item Next."


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [
        (["--mode", "sometimes"], "unknown mode 'sometimes'"),
        (["--strategy", "guess"], "unknown strategy 'guess'"),
        (["--dialect", "klingon"], "unknown dialect 'klingon'"),
        (["--log-level", "loud"], "unknown log level 'loud'"),
        (["--model-file", "/nonexistent/model.gguf"], "does not exist"),
        (["--upstream", "http://x", "--model-file", "/tmp/m.gguf"], "alternatives"),
        (["--upstream", "ftp://x/v1"], "is not http:// or https://"),
        (["--upstream", "http://h:99999/v1"], "no valid host and port"),
    ],
)
def test_bad_options_are_one_line_errors(flags: list[str], fragment: str) -> None:
    assert_one_line_error(run([*SERVE, "--port", "0", *flags]), fragment)


@pytest.mark.parametrize("port", ["99999", "-1"])
def test_a_port_out_of_range_is_refused_without_a_traceback(port: str) -> None:
    result = run([*SERVE, "--port", port, "--upstream", "http://127.0.0.1:9/v1"], COLUMNS="200")
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr
    assert "Invalid value for '--port'" in result.stderr


def test_a_port_in_use_is_a_one_line_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run([*SERVE, "--upstream", "http://127.0.0.1:9/v1", "--port", str(port)])
    assert_one_line_error(result, f"cannot listen on 127.0.0.1:{port}")


def test_without_xllamacpp_the_embedded_model_says_how_to_install_it(tmp_path: Path) -> None:
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    code = (
        "import sys; sys.modules['xllamacpp'] = None; from toolshim.cli.main import main; "
        f"sys.argv = ['toolshim', 'serve', '--port', '0', '--model-file', {str(gguf)!r}]; main()"
    )
    result = run([sys.executable, "-c", code])
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr
    progress, error, hint = result.stderr.splitlines()
    assert progress == "starting the embedded model model.gguf (ctx 32768) …"  # the trained context
    assert error.startswith("error: the embedded model needs xllamacpp")
    assert error.endswith("pip install 'toolshim[local]'")
    assert hint.startswith("hint: or pass --upstream URL")


def test_a_missing_model_part_says_how_to_fix_it() -> None:
    result = run([sys.executable, FAKE_LOCAL, "serve", "--port", "0"], FAKE_LOCAL_FAIL="1")
    assert_one_line_error(result, "part 3 is missing")
    assert "Install it with: pip install --force-reinstall" in result.stderr
    assert "hint: or pass --upstream URL (or set TOOLSHIM_UPSTREAM)" in result.stderr


def test_env_vars_configure_the_proxy(fake_upstream: FakeUpstreamProcess, tmp_path: Path) -> None:
    port = free_port()
    env = {
        "TOOLSHIM_UPSTREAM": fake_upstream.base_url,
        "TOOLSHIM_MODE": "force",
        "TOOLSHIM_PORT": str(port),
        "TOOLSHIM_REGISTRY": str(tmp_path / "reg.sqlite3"),
        "TOOLSHIM_UPSTREAM_API_KEY": "env-upstream-key-123",
    }
    proxy = start_process(SERVE, tmp_path / "serve.log", f"http://127.0.0.1:{port}/healthz", env)
    try:
        health = httpx.get(f"http://127.0.0.1:{port}/healthz").json()
        assert health["mode"] == "force"
        assert health["upstream"]["url"] == fake_upstream.base_url
        fake_upstream.script(replies=["hello"])
        httpx.post(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
            headers={"Authorization": "Bearer caller"},
        )
        sent = fake_upstream.history()["headers"][0]
        assert sent["Authorization"] == "Bearer env-upstream-key-123"
    finally:
        assert proxy.stop() == 0
    assert "env-upstream-key-123" not in proxy.output()
    assert "toolshim: stopped" in proxy.output()


def test_the_embedded_model_is_served_learned_and_stopped(tmp_path: Path) -> None:
    port = free_port()
    registry = tmp_path / "reg.sqlite3"
    notes = tmp_path / "local.log"
    args = [sys.executable, FAKE_LOCAL, "serve", "--port", str(port), "--registry", str(registry)]
    proxy = start_process(
        args,
        tmp_path / "serve.log",
        f"http://127.0.0.1:{port}/healthz",
        {"FAKE_LOCAL_LOG": str(notes)},
    )
    try:
        health = httpx.get(f"http://127.0.0.1:{port}/healthz").json()
        answer = httpx.post(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            json={
                "model": "gpt-4o",  # unknown here: served by the embedded model anyway
                "messages": [{"role": "user", "content": "weather in Paris?"}],
                "tools": [{"type": "function", "function": {"name": "get_weather"}}],
            },
            timeout=30,
        ).json()
    finally:
        assert proxy.stop() == 0
    assert answer["model"] == SERVED_MODEL
    assert answer["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_weather"
    # The registry said "no native tools" (source: upstream), so it went straight to emulation.
    assert answer["toolshim"]["emulated"] is True and answer["toolshim"]["llm_calls"] == 1
    # Facts live under the model file's stable key, not under this run's random port.
    assert health["upstream"]["url"] == "embedded://default.gguf"
    store = Registry.open(registry)
    assert {key for key, _, _ in store.known()} == {"embedded://default.gguf"}
    facts = store.facts("embedded://default.gguf", SERVED_MODEL)
    assert facts["native_tools"].value == "no" and facts["native_tools"].source.value == "upstream"
    assert facts["structured_output"].value == "yes"
    # An unknown dialect is not recorded (a warning says so); a shipped profile may still set one.
    assert "dialect" not in facts or facts["dialect"].source.value != "upstream"
    output = proxy.output()
    assert f"upstream: embedded model {SERVED_MODEL!r} at http://127.0.0.1:" in output
    assert "no-such-dialect" in output
    assert notes.read_text().splitlines() == ["ensure", "start /models/default.gguf", "stop"]
