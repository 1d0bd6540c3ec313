"""`toolshim chat` driven in a pseudo-terminal against the scripted upstream over real HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.chat.conftest import ChatFactory, Upstream, plain
from toolshim.capabilities.registry import Registry
from toolshim.upstreams.openai_http import normalize_base_url

pytestmark = pytest.mark.e2e

FAKE_LOCAL = Path(__file__).parents[1] / "e2e" / "fake_local.py"
SLOW = "This answer streams slowly, a few characters at a time, so that it can be interrupted."
CALL_CALCULATOR = {"tool_calls": [{"name": "calculate", "arguments": {"expression": "17*23"}}]}


def native_tools_fact(registry_path: Path, upstream: Upstream, model: str) -> tuple[str, str]:
    """(value, source) of the stored native_tools fact, as a later process would read it."""
    fact = Registry.open(registry_path).fact(
        normalize_base_url(upstream.base_url), model, "native_tools"
    )
    assert fact is not None, f"no native_tools fact for {model}"
    return str(fact.value), fact.source.value


# -- model swap ---------------------------------------------------------------------------------


def test_hot_swap_says_what_each_model_can_do(
    chat: ChatFactory, upstream: Upstream, registry_path: Path
) -> None:
    upstream.script(replies=[])
    session = chat("--model", "llama3.2")
    session.expect("Model llama3.2. Tools: native — from profile llama3.2")
    session.prompt("llama3.2")
    session.send("/model use gemma3:1b")
    session.expect(
        "Switched to gemma3:1b. Tools: emulated (json) — the model has no native tool calling "
        "(from profile gemma3)"
    )
    session.prompt("gemma3:1b")
    session.send("/model use custom-model")
    session.expect("custom-model is new to toolshim")
    session.expect("Does custom-model support native tool calling? [y]es / [n]o / [a]uto-detect")
    session.send("n")
    session.expect("Saved: custom-model has no native tools (source user).")
    session.expect("Switched to custom-model. Tools: emulated (json) — the model has no native")
    session.expect("set by you on")
    session.prompt("custom-model")
    session.send("/model list")
    session.expect("3 models at")
    session.expect("llama3.2 │ native │ yes │ profile")
    session.expect("gemma3:1b │ emulated (json) │ no │ profile")
    session.expect("* │ custom-model │ emulated (json) │ no │ user")
    session.prompt("custom-model")
    session.ctrl_d()
    assert session.exit_status() == 0
    assert native_tools_fact(registry_path, upstream, "custom-model") == ("no", "user")


def test_swap_typed_during_a_reply_waits_for_it(chat: ChatFactory, upstream: Upstream) -> None:
    upstream.script(replies=[SLOW, "Gemma here."], chunk_delay=0.15, piece=4)
    session = chat("--model", "llama3.2")
    session.prompt("llama3.2")
    session.send("tell me something long")
    session.expect("This answer")
    session.send("/model use gemma3:1b")
    session.expect("llama3.2 completes this turn first, then toolshim switches to gemma3:1b")
    session.expect("interrupted.")
    session.expect("Switched to gemma3:1b. Tools: emulated (json)")
    session.prompt("gemma3:1b")
    session.send("and you?")
    session.expect("Gemma here.")
    session.prompt("gemma3:1b")
    models = [body["model"] for body in upstream.requests()]
    assert models == ["llama3.2", "gemma3:1b"]
    session.ctrl_d()
    assert session.exit_status() == 0


# -- unknown model ------------------------------------------------------------------------------


def test_unknown_model_yes_is_stored_with_source_user(
    chat: ChatFactory, upstream: Upstream, registry_path: Path
) -> None:
    upstream.script(replies=[])
    session = chat("--model", "custom-model")
    session.expect("Does custom-model support native tool calling? [y]es / [n]o / [a]uto-detect")
    session.send("yes")
    session.expect("Saved: custom-model supports native tools (source user).")
    session.expect("Model custom-model. Tools: native — set by you on")
    session.prompt("custom-model")
    session.ctrl_d()
    assert session.exit_status() == 0
    assert native_tools_fact(registry_path, upstream, "custom-model") == ("yes", "user")


@pytest.mark.parametrize(
    ("script", "outcome", "status", "value"),
    [
        ({"tools": "reject"}, "unsupported", "Tools: emulated (json)", "no"),
        (
            {
                "replies": [
                    {"tool_calls": [{"name": "get_current_time", "arguments": {"timezone": "UTC"}}]}
                ]
            },
            "supported",
            "Tools: native",
            "yes",
        ),
    ],
)
def test_unknown_model_auto_detect_runs_the_probe(
    chat: ChatFactory,
    upstream: Upstream,
    registry_path: Path,
    script: dict[str, object],
    outcome: str,
    status: str,
    value: str,
) -> None:
    upstream.script(**script)
    session = chat("--model", "llama3.2")
    session.prompt("llama3.2")
    session.send("/model use custom-model")
    session.expect("[a]uto-detect")
    session.send("a")
    session.expect("Auto-detecting tool support for custom-model")
    session.expect(f"Auto-detect: {outcome} — ")
    session.expect("Saved (source probe).")
    session.expect(f"Switched to custom-model. {status} — ")
    session.expect("auto-detected on")
    session.prompt("custom-model")
    session.ctrl_d()
    assert session.exit_status() == 0
    probe = upstream.requests()[0]
    assert probe["model"] == "custom-model" and probe["tools"][0]["function"]["name"]
    assert native_tools_fact(registry_path, upstream, "custom-model") == (value, "probe")


def test_unknown_model_without_an_answer_is_emulated_for_the_session(
    chat: ChatFactory, upstream: Upstream, registry_path: Path
) -> None:
    upstream.script(replies=["Hello, I am emulated."])
    session = chat("--model", "custom-model", prompt_timeout=1)
    session.expect("Does custom-model support native tool calling?")
    session.expect("No answer within 1 s: custom-model's tool support stays unknown, so")
    session.expect("toolshim emulates tools for this session to be safe (nothing saved")
    session.expect("Model custom-model. Tools: emulated (json)")
    session.prompt("custom-model")
    session.send("hello")
    session.expect("Hello, I am emulated.")
    session.expect("[emulated (json)")
    session.prompt("custom-model")
    session.ctrl_d()
    assert session.exit_status() == 0
    request = upstream.requests()[0]
    assert "tools" not in request  # described in the system prompt instead
    assert "calculate" in request["messages"][0]["content"]
    registry = Registry.open(registry_path)
    assert (
        registry.fact(normalize_base_url(upstream.base_url), "custom-model", "native_tools") is None
    )


# -- runtime learning ---------------------------------------------------------------------------


def test_runtime_rejection_remembered_with_yes_is_never_asked_again(
    chat: ChatFactory, upstream: Upstream, registry_path: Path
) -> None:
    upstream.script(tools="reject", replies=["First, emulated.", "Second, emulated."])
    session = chat("--model", "llama3.2")
    session.prompt("llama3.2")
    session.send("hello")
    session.expect("First, emulated.")
    session.expect("The upstream rejected native tools for llama3.2")
    session.expect("toolshim answered with emulated tools instead.")
    session.expect("This model appears not to support native tools. Remember this? [y/n]")
    session.send("y")
    session.expect("Saved: llama3.2 has no native tools (source user). Tools: emulated (pythonic)")
    session.prompt("llama3.2")
    session.send("again")
    session.expect("Second, emulated.")
    session.prompt("llama3.2")
    assert "Rememberthis?" not in session.settle()
    session.ctrl_d()
    assert session.exit_status() == 0
    assert plain(session.screen()).count(plain("The upstream rejected native tools")) == 1
    assert native_tools_fact(registry_path, upstream, "llama3.2") == ("no", "user")
    assert [bool(r.get("tools")) for r in upstream.requests()] == [True, False, False]

    upstream.script(tools="reject", replies=["Third, emulated."])
    again = chat("--model", "llama3.2")
    again.expect("Model llama3.2. Tools: emulated (pythonic) — the model has no native tool")
    again.expect("set by you on")
    again.prompt("llama3.2")
    again.send("hello")
    again.expect("Third, emulated.")
    again.prompt("llama3.2")
    assert "Rememberthis?" not in plain(again.screen())
    again.ctrl_d()
    assert again.exit_status() == 0


def test_runtime_rejection_answered_no_holds_for_this_session_only(
    chat: ChatFactory, upstream: Upstream, registry_path: Path
) -> None:
    upstream.script(tools="reject", replies=["First, emulated.", "Second, emulated."])
    session = chat("--model", "qwen2.5:7b")
    session.expect("Model qwen2.5:7b. Tools: native — from profile qwen2.5")
    session.prompt("qwen2.5:7b")
    session.send("hello")
    session.expect("First, emulated.")
    session.expect("Remember this? [y/n]")
    session.send("n")
    session.expect("Not saved: tools are emulated for qwen2.5:7b in this session only.")
    session.prompt("qwen2.5:7b")
    session.send("/model")
    session.expect("Tools: emulated (hermes) — the upstream rejected tools; emulated for this")
    session.prompt("qwen2.5:7b")
    session.send("again")
    session.expect("Second, emulated.")
    session.prompt("qwen2.5:7b")
    session.ctrl_d()
    assert session.exit_status() == 0
    assert native_tools_fact(registry_path, upstream, "qwen2.5:7b") == ("yes", "profile")
    assert [bool(r.get("tools")) for r in upstream.requests()] == [True, False, False]


# -- tool calls, cancelling, saving, quitting ---------------------------------------------------


@pytest.mark.parametrize(
    ("model", "first_reply", "how"),
    [
        ("llama3.2", CALL_CALCULATOR, "[native · 2 LLM calls · 1 tool call"),
        (
            "gemma3:1b",
            '{"tool_calls": [{"name": "calculate", "arguments": {"expression": "17*23"}}]}',
            "[emulated (json) · 2 LLM calls · 1 tool call",
        ),
    ],
)
def test_a_tool_call_is_shown_and_answered(
    chat: ChatFactory, upstream: Upstream, model: str, first_reply: object, how: str
) -> None:
    upstream.script(replies=[first_reply, "17 × 23 = 391."])
    session = chat("--model", model)
    session.prompt(model)
    session.send("What is 17 times 23?")
    session.expect('⚙ calculate(expression="17*23")')
    session.expect("✓ calculate → 391")
    session.expect("17 × 23 = 391.")
    session.expect(how)
    session.prompt(model)
    session.ctrl_d()
    assert session.exit_status() == 0
    second = upstream.requests()[1]["messages"]
    assert any("391" in json.dumps(m) for m in second)  # the result went back to the model


def test_ctrl_c_cancels_a_streaming_reply_and_the_session_goes_on(
    chat: ChatFactory, upstream: Upstream
) -> None:
    upstream.script(replies=[SLOW, "Still here."], chunk_delay=0.2, piece=4)
    session = chat("--model", "llama3.2")
    session.prompt("llama3.2")
    session.child.send("half a thought")
    session.expect("half a thought")
    session.ctrl_c()  # at the prompt: clears the line, sends nothing
    session.prompt("llama3.2")
    session.send("tell me something long")
    session.expect("This answer")
    session.ctrl_c()
    session.expect("Reply cancelled; the conversation keeps what was said so far.")
    session.prompt("llama3.2")
    assert "interrupted." not in plain(session.screen())
    deadline = time.monotonic() + 10
    while upstream.server.cancelled < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert upstream.server.cancelled >= 1  # the upstream request was abandoned, not finished
    session.send("are you there?")
    session.expect("Still here.")
    session.prompt("llama3.2")
    session.ctrl_d()
    assert session.exit_status() == 0
    messages = upstream.requests()[1]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"].startswith("This answer")
    assert messages[2]["content"] == "are you there?"


def test_save_writes_the_transcript_as_json(
    chat: ChatFactory, upstream: Upstream, tmp_path: Path
) -> None:
    upstream.script(replies=[CALL_CALCULATOR, "It is 391."])
    target = tmp_path / "transcript.json"
    session = chat("--model", "llama3.2")
    session.prompt("llama3.2")
    session.send("17*23?")
    session.expect("It is 391.")
    session.prompt("llama3.2")
    session.send(f"/save {target}")
    session.expect("Saved 1 exchange and 4 messages to")
    session.prompt("llama3.2")
    session.ctrl_d()
    assert session.exit_status() == 0
    data = json.loads(target.read_text())
    assert [m["role"] for m in data["messages"]] == ["user", "assistant", "tool", "assistant"]
    run = data["exchanges"][0]["tool_runs"][0]
    assert (run["name"], run["arguments"], run["result"]) == (
        "calculate",
        {"expression": "17*23"},
        "391",
    )
    assert data["exchanges"][0]["turns"][-1]["toolshim"]["mode"] == "auto"
    assert data["events"][0]["type"] == "model"


def test_multi_line_input_with_backslash_and_esc_enter(
    chat: ChatFactory, upstream: Upstream, tmp_path: Path
) -> None:
    upstream.script(replies=["Got three lines."])
    session = chat("--model", "llama3.2")
    session.prompt("llama3.2")
    session.send("first line\\")
    session.child.send("second line")
    session.child.send("\x1b\r")
    session.send("third line")
    session.expect("Got three lines.")
    session.prompt("llama3.2")
    session.ctrl_d()
    assert session.exit_status() == 0
    assert upstream.requests()[0]["messages"][-1]["content"] == (
        "first line\nsecond line\nthird line"
    )
    history = (tmp_path / "history").read_text()
    assert "+first line\n+second line\n+third line" in history  # prompt_toolkit's format


def test_without_tools_the_status_is_disabled(chat: ChatFactory, upstream: Upstream) -> None:
    upstream.script(replies=["Plain answer."])
    session = chat("--model", "custom-model", "--no-builtin-tools")
    session.expect("Model custom-model. Tools: disabled — no tools are loaded")
    session.prompt("custom-model")
    session.send("hi")
    session.expect("Plain answer.")
    session.prompt("custom-model")
    session.send("/quit")
    assert session.exit_status() == 0
    assert "tools" not in upstream.requests()[0]


def test_user_tools_from_the_command_line(
    chat: ChatFactory, upstream: Upstream, tmp_path: Path
) -> None:
    (tmp_path / "shouting.py").write_text(
        "def shout(text: str) -> str:\n    '''Say it louder.'''\n    return text.upper() + '!'\n"
    )
    upstream.script(
        replies=[{"tool_calls": [{"name": "shout", "arguments": {"text": "hi"}}]}, "Done."]
    )
    session = chat("--model", "llama3.2", "--tools", "shouting:shout", cwd=str(tmp_path))
    session.expect("Tools loaded: current_time, calculate, convert_units, shout")
    session.prompt("llama3.2")
    session.send("shout hi")
    session.expect("✓ shout → HI!")
    session.expect("Done.")
    session.prompt("llama3.2")
    session.ctrl_d()
    assert session.exit_status() == 0


# -- without a terminal -------------------------------------------------------------------------


def run_chat(
    upstream_url: str, *flags: str, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolshim.cli.main", "chat", "--upstream", upstream_url, *flags],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def test_piped_input_is_answered_line_by_line(upstream: Upstream) -> None:
    upstream.script(replies=["Four.", "Five."])
    result = run_chat(upstream.base_url, "--model", "llama3.2", stdin="2+2?\n2+3?\n")
    assert result.returncode == 0, result.stderr
    assert "Four." in result.stdout and "Five." in result.stdout
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("flags", "fragment", "code"),
    [
        (["--mode", "sometimes"], "unknown mode 'sometimes'", 2),
        (["--dialect", "klingon"], "unknown dialect 'klingon'", 2),
        (["--tools", "nowhere_at_all:f"], "cannot import module 'nowhere_at_all'", 2),
        (["--model-file", "/tmp/x.gguf"], "--upstream and --model-file are alternatives", 2),
    ],
)
def test_bad_flags_are_one_line_errors(
    upstream: Upstream, flags: list[str], fragment: str, code: int
) -> None:
    result = run_chat(upstream.base_url, *flags)
    assert result.returncode == code, result
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("error: ")
    assert fragment in result.stderr.splitlines()[0]


def test_an_unreachable_upstream_is_a_clear_error() -> None:
    result = run_chat("http://127.0.0.1:9/v1")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "error: cannot list the models at http://127.0.0.1:9/v1" in result.stderr


def test_a_bad_prompt_timeout_is_reported(upstream: Upstream) -> None:
    result = run_chat(upstream.base_url, env={"TOOLSHIM_CHAT_PROMPT_TIMEOUT": "soon"})
    assert result.returncode == 2
    assert "TOOLSHIM_CHAT_PROMPT_TIMEOUT must be a number of seconds, not 'soon'" in result.stderr


def test_an_ollama_upstream_says_itself_which_models_have_tools(chat: ChatFactory) -> None:
    from tests.capabilities.fake_servers import FakeModel, fake_server

    plain_model = FakeModel("house-model", capabilities=["completion"], chat="text")
    tool_model = FakeModel("house-tools", capabilities=["completion", "tools"])
    with fake_server("ollama", plain_model, tool_model) as ollama:
        session = chat("--model", "house-model", upstream_url=ollama.base_url)
        session.expect("Model house-model. Tools: emulated (json) — the model has no native tool")
        session.expect("reported by the upstream on")
        session.prompt("house-model")
        session.send("/model use house-tools")
        session.expect("Switched to house-tools. Tools: native — reported by the upstream on")
        session.prompt("house-tools")
        session.send("/model use house-model")
        session.prompt("house-model")
        session.send("what time is it in Paris?")
        session.expect("It is noon in Paris, I think.")
        session.expect("[emulated (json)")
        session.prompt("house-model")
        session.ctrl_d()
        assert session.exit_status() == 0
        assert "newtotoolshim" not in plain(session.screen())  # no question: the upstream said
        chats = ollama.posted("/v1/chat/completions")
        assert len(chats) == 1 and "tools" not in chats[0]


def test_a_missing_model_file_is_a_clear_error(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "toolshim.cli.main",
            "chat",
            "--model-file",
            str(tmp_path / "x.gguf"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "TOOLSHIM_UPSTREAM"},
    )
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("error: model file ")
    assert "does not exist" in result.stderr


def test_the_embedded_model_is_chatted_with_under_its_stable_key(tmp_path: Path) -> None:
    from tests.e2e.fake_local import SERVED_MODEL

    registry = tmp_path / "reg.sqlite3"
    script = {"replies": ["Hello from the embedded model."], "repeat": True}
    env = {k: v for k, v in os.environ.items() if k != "TOOLSHIM_UPSTREAM"}
    result = subprocess.run(
        [sys.executable, str(FAKE_LOCAL), "chat", "--registry", str(registry)],
        input="hi\n",
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "FAKE_LOCAL_SCRIPT": json.dumps({**script, "models": [SERVED_MODEL]})},
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "toolshim chat · embedded://default.gguf" in result.stdout
    assert "Hello from the embedded model." in result.stdout
    assert "warning: the embedded model prefers dialect 'no-such-dialect'" in result.stderr
    # Facts from the server itself, under the key; no startup refresh rows under its port.
    stored = Registry.open(registry).known()
    assert [(key, model) for key, model, _ in stored] == [("embedded://default.gguf", SERVED_MODEL)]
    assert stored[0][2]["native_tools"].value == "no"


def test_no_refresh_asks_the_upstream_nothing_at_start(chat: ChatFactory) -> None:
    from tests.capabilities.fake_servers import FakeModel, fake_server

    with fake_server("ollama", FakeModel("house-model", capabilities=["completion"])) as ollama:
        session = chat("--model", "house-model", "--no-refresh", upstream_url=ollama.base_url)
        session.expect("Does house-model support native tool calling")
        session.send("n")
        session.prompt("house-model")
        session.ctrl_d()
        assert session.exit_status() == 0
        assert ollama.posted("/api/show") == []
