"""``toolshim run``: through typer's CliRunner and as a real process, against a real HTTP upstream."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

import toolshim.local.model
from tests.e2e.fake_local import SERVED_MODEL, FakeEmbeddedServer, install
from tests.local.helpers import fake_known_model
from toolshim.capabilities.registry import Registry
from toolshim.cli.main import app
from toolshim.local import KNOWN_MODELS
from toolshim.testing import FakeUpstream, Reply, call
from toolshim.testing.server import serve_fake

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def agent_dir(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A directory with a tools module and a two-phase agent file that uses it."""
    module = f"cli_tools_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(
        textwrap.dedent(
            '''
            def shout(text: str) -> str:
                """Upper-case the text."""
                return text.upper()
            '''
        )
    )
    (tmp_path / "agent.toml").write_text(
        textwrap.dedent(
            f"""
            [[phases]]
            name = "loud"
            instructions = "Shout the text you are given, with the tool."
            tools = ["{module}:shout"]

            [[phases]]
            name = "wrap"
            instructions = "Wrap the text in angle brackets."
            use_native_tools = false
            """
        )
    )
    yield tmp_path / "agent.toml", module
    sys.modules.pop(module, None)


def scripted() -> FakeUpstream:
    return FakeUpstream(
        [Reply(tool_calls=[call("shout", {"text": "hello"})]), "HELLO", "<<HELLO>>"],
        tools="native",
    )


def invoke(*args: str, input: str | None = None) -> object:
    return CliRunner().invoke(app, ["run", *args], input=input)


def test_a_two_phase_run_prints_the_last_answer(agent_dir: tuple[Path, str]) -> None:
    path, _ = agent_dir
    fake = scripted()
    with serve_fake(fake) as server:
        result = invoke(str(path), "--input", '{"text": "hello"}', "--upstream", server.base_url)
    assert result.exit_code == 0, result.output
    assert result.stdout == "<<HELLO>>\n"
    assert "phase 1/2: loud (shout)" in result.stderr and "phase 2/2: wrap" in result.stderr
    assert 'shout(text="hello") → HELLO' in result.stderr
    assert fake.history[0]["model"] == "fake-model"  # the upstream's first model
    assert fake.history[2]["messages"][-1] == {"role": "user", "content": "HELLO"}


def test_a_phase_stopped_on_its_turn_limit_exits_3(agent_dir: tuple[Path, str]) -> None:
    path, _ = agent_dir
    path.write_text(path.read_text().replace("tools = [", "max_turns = 2\ntools = [", 1))
    fake = FakeUpstream(
        [Reply(tool_calls=[call("shout", {"text": f"hello {i}"})]) for i in range(6)],
        tools="native",
    )
    with serve_fake(fake) as server:
        result = invoke(str(path), "--input", '"hello"', "--upstream", server.base_url)
    assert result.exit_code == 3, result.output
    assert "phase 'loud' stopped without an answer" in result.stderr
    assert all(body.get("tools") for body in fake.history)  # the second phase never ran


def test_json_prints_the_whole_run(agent_dir: tuple[Path, str]) -> None:
    path, _ = agent_dir
    with serve_fake(scripted()) as server:
        result = invoke(
            str(path), "--input", "hello", "--upstream", server.base_url, "--json", "-m", "mm"
        )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["output"] == "<<HELLO>>" and data["input"] == "hello"
    loud, wrap = data["phases"]
    assert loud["tool_runs"][0]["name"] == "shout" and loud["tool_runs"][0]["result"] == "HELLO"
    assert loud["turns"][0]["toolshim"]["emulated"] is False
    assert wrap["mode"] == "force" and wrap["model"] == "mm"
    assert [m["role"] for m in loud["messages"]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]


def test_verbose_shows_each_turn_on_stderr(agent_dir: tuple[Path, str]) -> None:
    path, _ = agent_dir
    with serve_fake(scripted()) as server:
        result = invoke(str(path), "-i", '"hello"', "--upstream", server.base_url, "--verbose")
    assert result.exit_code == 0, result.output
    err = result.stderr
    assert "→ request 1" in err and "1 native tool(s)" in err
    assert "[0] system" in err and "Shout the text you are given" in err
    assert "← raw reply (finish_reason=tool_calls)" in err
    assert "[native tool call] shout" in err
    assert '→ call shout(text="hello")' in err
    assert "turn 1: calls: shout; mode auto, native" in err
    assert "→ request 3" in err and "no native tools" in err  # phase 2 is emulated
    assert result.stdout == "<<HELLO>>\n"


def test_input_from_stdin(agent_dir: tuple[Path, str]) -> None:
    path, _ = agent_dir
    fake = scripted()
    with serve_fake(fake) as server:
        result = invoke(str(path), "--input", "-", "--upstream", server.base_url, input="hello\n")
    assert result.exit_code == 0, result.output
    assert fake.history[0]["messages"][-1]["content"] == "hello\n"


def test_file_problems_exit_2_before_any_model_call(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[[phases]]\nname = "a"\ntackel = ["x"]\ntools = ["nope_module_q:f"]\n')
    fake = scripted()
    with serve_fake(fake) as server:
        result = invoke(str(path), "--upstream", server.base_url)
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith(f"error: {path}: phase 1 ('a'): unknown key 'tackel'")
    assert lines[1].startswith(f"error: {path}: phase 1 ('a'): tool 'nope_module_q:f'")
    assert fake.history == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--input", "{not json"], "error: --input is not valid JSON"),
        (["--mode", "sometimes"], "error: unknown mode 'sometimes'"),
        (["--dialect", "klingon"], "error: unknown dialect 'klingon'"),
    ],
)
def test_bad_flags_exit_2(agent_dir: tuple[Path, str], args: list[str], message: str) -> None:
    path, _ = agent_dir
    result = invoke(str(path), "--upstream", "http://127.0.0.1:9/v1", *args)
    assert result.exit_code == 2 and result.stderr.startswith(message)


def test_no_upstream_and_no_embedded_model_says_what_to_do(
    agent_dir: tuple[Path, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The default model's parts are not installed: the real assembly error, and the way out."""
    path, _ = agent_dir
    missing, _ = fake_known_model("absent", [10, 10])
    monkeypatch.setitem(KNOWN_MODELS, "absent", missing)
    monkeypatch.setattr(toolshim.local.model, "DEFAULT_MODEL", "absent")
    monkeypatch.setenv("TOOLSHIM_MODELS_DIR", str(tmp_path / "models"))
    monkeypatch.delenv("TOOLSHIM_UPSTREAM", raising=False)
    result = invoke(str(path))
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    error, hint = result.stderr.splitlines()
    assert error.startswith("error: the local model 'absent' is not installed")
    assert "toolshim-fake-absent-part1==1.0.0 is not installed" in error
    assert error.endswith("Install it with: pip install 'toolshim[fake-absent]'")
    assert hint.startswith("hint: or pass --upstream URL (or set TOOLSHIM_UPSTREAM)")
    assert "toolshim serve" in hint


def test_successive_runs_on_the_embedded_model_share_what_they_learned(
    agent_dir: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run 1 learns at runtime that the model rejects tools; run 2, on another port, emulates
    from its first request on, because the fact is kept under the model file's key."""
    path, _ = agent_dir
    install(monkeypatch.setattr)
    monkeypatch.setattr(FakeEmbeddedServer, "facts", {})  # the server says nothing itself
    monkeypatch.setattr(FakeEmbeddedServer, "model_name", "house-model")
    monkeypatch.setattr(FakeEmbeddedServer, "started", [])
    monkeypatch.delenv("TOOLSHIM_UPSTREAM", raising=False)
    registry = Registry.open(os.environ["TOOLSHIM_REGISTRY"])
    assert registry.fact("embedded://default.gguf", "house-model", "native_tools") is None
    replies = [
        '{"tool_calls": [{"name": "shout", "arguments": {"text": "hello"}}]}',
        "HELLO",
        "<<HELLO>>",
    ]
    runs = []
    for tools in ("reject", "native"):
        fake = FakeUpstream(list(replies), tools=tools, models=["house-model"])
        monkeypatch.setattr(FakeEmbeddedServer, "upstream", fake)
        result = invoke(str(path), "--input", '{"text": "hello"}')
        assert result.exit_code == 0, result.output
        assert result.stdout == "<<HELLO>>\n"
        runs.append(fake.history)
    assert [key for _, key in FakeEmbeddedServer.started] == ["embedded://default.gguf"] * 2
    # Run 1: a native attempt, rejected, learned, then emulated.
    assert "tools" in runs[0][0] and "tools" not in runs[0][1]
    # Run 2: the upstream would take native tools, but the learned "no" holds.
    assert all("tools" not in body for body in runs[1])
    fact = Registry.open(os.environ["TOOLSHIM_REGISTRY"]).fact(
        "embedded://default.gguf", "house-model", "native_tools"
    )
    assert fact is not None and (fact.value, fact.source.value) == ("no", "runtime_error")
    assert [key for key, _, _ in registry.known()] == ["embedded://default.gguf"]


def test_an_unreachable_upstream_is_one_line_exit_1(agent_dir: tuple[Path, str]) -> None:
    path, _ = agent_dir
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens here once the socket is closed
    result = invoke(str(path), "-m", "m", "--upstream", f"http://127.0.0.1:{port}/v1")
    assert result.exit_code == 1
    assert "error: could not reach the upstream" in result.stderr
    assert "Traceback" not in result.output


def run_process(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_COLOR": "1"},
    )


def test_toolshim_run_as_a_real_process(agent_dir: tuple[Path, str]) -> None:
    path, _ = agent_dir
    with serve_fake(scripted()) as server:
        done = run_process(
            "-m", "toolshim.cli.main", "run", str(path), "--input", '{"text": "hello"}',
            "--upstream", server.base_url, cwd=path.parent,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "<<HELLO>>\n"


def test_the_example_agent_file_runs_emulated() -> None:
    fake = FakeUpstream(
        [
            '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}',
            '{"tool_calls": [{"name": "convert_temperature", '
            '"arguments": {"value": 18, "to": "fahrenheit"}}]}',
            "Pack sunglasses: Paris is sunny at 18 °C (64.4 °F).",
        ],
        tools="reject",
    )
    fake.queue.insert(1, "Paris: sunny, 18 °C")  # research's answer, between the two calls
    with serve_fake(fake) as server:
        done = run_process(
            "-m", "toolshim.cli.main", "run", "examples/trip.toml", "--input", '{"city": "Paris"}',
            "--upstream", server.base_url, "--json",
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    research, report = data["phases"]
    assert [(r["name"], r["result"]) for r in research["tool_runs"]] == [
        ("get_weather", '{"city":"Paris","celsius":18.0,"conditions":"sunny"}'),
    ]
    assert report["input"] == "Paris: sunny, 18 °C"
    assert [(r["name"], r["result"]) for r in report["tool_runs"]] == [
        ("convert_temperature", "64.4"),
    ]
    assert research["turns"][0]["toolshim"]["emulated"] is True
    assert report["turns"][0]["toolshim"]["emulated"] is True
    assert data["output"] == "Pack sunglasses: Paris is sunny at 18 °C (64.4 °F)."


def test_the_weather_example_script_runs() -> None:
    fake = FakeUpstream(
        [
            '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Tokyo"}}]}',
            '{"tool_calls": [{"name": "convert_temperature", '
            '"arguments": {"value": 18, "to": "fahrenheit"}}]}',
            "Sunny and 18 °C (64.4 °F) in Paris.",
        ],
        tools="reject",
    )
    with serve_fake(fake) as server:
        done = run_process("examples/weather_agent.py", "--upstream", server.base_url)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Sunny and 18 °C (64.4 °F) in Paris.\n"
    assert "tool convert_temperature({'value': 18, 'to': 'fahrenheit'}) -> 64.4" in done.stderr
    assert "emulated=True" in done.stderr


def test_the_weather_example_on_the_embedded_model_keys_its_facts_by_model_file() -> None:
    script = {
        "replies": [
            '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Tokyo"}}]}',
            '{"tool_calls": [{"name": "convert_temperature", '
            '"arguments": {"value": 18, "to": "fahrenheit"}}]}',
            "Sunny and 18 °C (64.4 °F) in Paris.",
        ],
        "tools": "reject",
        "models": [SERVED_MODEL],
    }
    code = (
        "import runpy, tests.e2e.fake_local as fake; fake.install(); "
        "runpy.run_path('examples/weather_agent.py', run_name='__main__')"
    )
    env = {k: v for k, v in os.environ.items() if k != "TOOLSHIM_UPSTREAM"}
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "PYTHONPATH": str(REPO / "examples"), "FAKE_LOCAL_SCRIPT": json.dumps(script)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Sunny and 18 °C (64.4 °F) in Paris.\n"
    assert "emulated=True" in done.stderr and "3 turn(s)" in done.stderr
    # Recorded and looked up under one key: a miss would have tried native tools, been
    # rejected and learned that under the port's URL.
    stored = Registry.open(os.environ["TOOLSHIM_REGISTRY"]).known()
    assert [(key, model) for key, model, _ in stored] == [("embedded://default.gguf", SERVED_MODEL)]
