"""The coding-agent suite's parts that need no model: every task's check fails on the folder as
laid out and passes on a folder done right; the clients' headless output read; failures
classified; the recorder's meter read from real answers over HTTP on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from toolshim.evaluation.coding_clients import CLIENTS, get_client
from toolshim.evaluation.coding_runner import CodingRecord, classify_failure, summarize_coding
from toolshim.evaluation.coding_tasks import CODING_KINDS, CODING_TASKS, load_coding_tasks
from toolshim.evaluation.recorder import Recorder
from toolshim.testing import FunctionUpstream
from toolshim.testing.server import serve_app, serve_fake

DONE_RIGHT: dict[str, dict[str, str]] = {
    "write-greeting": {"greeting.txt": "hello from toolshim\n"},
    "write-python": {"hello.py": 'print("Hello, World!")\n'},
    "read-port": {"port.txt": "8421\n"},
    "read-json-name": {"name.txt": "tiny-widget"},
    "fix-add": {"calc.py": "def add(a, b):\n    return a + b\n"},
    "fix-name": {"greet.py": 'def greet(name):\n    return "Hello, " + name + "!"\n'},
    "count-lines": {"count.txt": "17\n"},
    "grep-errors": {"errors.txt": "3"},
    "sum-numbers": {"sum.txt": "50\n"},
    "bump-version": {
        "VERSION": "1.3.0\n",
        "setup.cfg": "[metadata]\nname = widget\nversion = 1.3.0\n",
    },
    "run-script": {},
    "no-tool-capital": {},
}
ANSWERS = {"run-script": "It prints 35350.", "no-tool-capital": "Paris"}


def test_the_suite_has_at_least_twelve_tasks_of_every_kind() -> None:
    assert len(CODING_TASKS) >= 12
    assert {t.kind for t in CODING_TASKS} == set(CODING_KINDS)
    assert set(DONE_RIGHT) == {t.id for t in CODING_TASKS}


@pytest.mark.parametrize("task", CODING_TASKS, ids=lambda t: t.id)
def test_each_check_fails_as_laid_out_and_passes_when_done_right(task: Any, tmp_path: Path) -> None:
    untouched = tmp_path / "untouched"
    untouched.mkdir()
    task.prepare(untouched)
    verdict = task.judge(untouched, "I cannot do that.")
    assert not verdict.passed and verdict.reason
    done = tmp_path / "done"
    done.mkdir()
    task.prepare(done)
    for name, content in DONE_RIGHT[task.id].items():
        (done / name).write_text(content)
    verdict = task.judge(done, ANSWERS.get(task.id, "Done."))
    assert verdict.passed, verdict.reason


def test_a_fix_that_rewrites_the_test_does_not_pass(tmp_path: Path) -> None:
    (task,) = load_coding_tasks(["fix-add"])
    task.prepare(tmp_path)
    (tmp_path / "test_calc.py").write_text('print("ok")\n')
    assert not task.judge(tmp_path, "").passed


def test_a_no_tool_question_that_writes_files_does_not_pass(tmp_path: Path) -> None:
    (task,) = load_coding_tasks(["no-tool-capital"])
    task.prepare(tmp_path)
    (tmp_path / "answer.txt").write_text("Paris")
    verdict = task.judge(tmp_path, "Paris")
    assert not verdict.passed and "answer.txt" in verdict.reason


def test_unknown_task_ids_and_clients_are_named() -> None:
    with pytest.raises(ValueError, match="'nope'"):
        load_coding_tasks(["nope"])
    with pytest.raises(Exception, match="known: claude, codex"):
        get_client("cursor")


def test_claude_codes_json_result_is_read() -> None:
    claude = CLIENTS["claude"]
    printed = json.dumps(
        {"type": "result", "result": "Done: wrote it.", "is_error": False, "num_turns": 3}
    )
    run = claude.read_output(printed + "\n", 0, False)
    assert (run.answer, run.error, run.turns) == ("Done: wrote it.", None, 3)
    failed = json.dumps(
        {
            "type": "result",
            "is_error": True,
            "result": "API Error: 400 x",
            "num_turns": 1,
            "terminal_reason": "api_error",
        }
    )
    assert claude.read_output(failed, 1, False).error == "api_error: API Error: 400 x"


def test_codex_json_events_are_read() -> None:
    events = [
        {"type": "thread.started"},
        {"type": "item.completed", "item": {"type": "command_execution", "command": "ls"}},
        {"type": "item.completed", "item": {"type": "agent_message", "text": "All done."}},
    ]
    run = CLIENTS["codex"].read_output("\n".join(map(json.dumps, events)), 0, False)
    assert (run.answer, run.error, run.turns) == ("All done.", None, 2)
    failed = [{"type": "turn.failed", "error": {"message": "stream disconnected"}}]
    assert CLIENTS["codex"].read_output(json.dumps(failed[0]), 1, False).error == (
        "stream disconnected"
    )


def test_the_codex_config_points_at_the_proxy_with_long_timeouts(tmp_path: Path) -> None:
    argv, env = CLIENTS["codex"].command(
        "hi", base_url="http://127.0.0.1:9", model="m", home=tmp_path, max_turns=5
    )
    config = (tmp_path / ".codex" / "config.toml").read_text()
    assert 'base_url = "http://127.0.0.1:9/v1"' in config
    assert "stream_idle_timeout_ms = 3600000" in config
    assert env["CODEX_HOME"] == str(tmp_path / ".codex") and argv[-1] == "hi"
    argv, env = CLIENTS["claude"].command(
        "hi", base_url="http://127.0.0.1:9", model="m", home=tmp_path, max_turns=5
    )
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9"
    assert int(env["CLAUDE_STREAM_IDLE_TIMEOUT_MS"]) >= 1_800_000
    assert argv[argv.index("--max-turns") + 1] == "5"


@pytest.mark.parametrize(
    ("facts", "kind"),
    [
        (
            {"errors": ["request (11782 tokens) exceeds the available context size"]},
            "context_overflow",
        ),
        ({"made_up_tool": True}, "made_up_tool"),
        (
            {"errors": ["tool_call_retries_exhausted: never produced a valid tool call"]},
            "malformed_call",
        ),
        ({"timed_out": True, "tool_calls": 2}, "time_budget"),
        ({"client_error": "error_max_turns", "tool_calls": 9}, "runaway"),
        ({"tool_calls": 0}, "text_instead_of_call"),
        ({"tool_calls": 2}, "wrong_result"),
    ],
)
def test_failures_are_classified(facts: dict[str, Any], kind: str) -> None:
    given: dict[str, Any] = {
        "passed": False,
        "errors": [],
        "warnings": ["tools left out (not offered to the model, --offer-tools): Agent"],
        "made_up_tool": False,
        "tool_calls": 1,
        "needs_tool": True,
        "timed_out": False,
        "client_error": None,
        **facts,
    }
    assert classify_failure(**given) == kind
    assert classify_failure(**{**given, "passed": True}) is None


def record(task: str, passed: bool, seconds: float, later: int, cached: int) -> CodingRecord:
    return CodingRecord(
        "claude",
        "toolshim",
        task,
        "write",
        passed,
        "",
        None if passed else "wrong_result",
        "",
        2,
        3,
        later + 1000,
        cached,
        later,
        cached,
        seconds,
        1,
    )


def test_the_summary_counts_passes_medians_and_cache_reuse() -> None:
    (row,) = summarize_coding(
        [
            record("a", True, 10, 1000, 950),
            record("b", False, 30, 1000, 850),
            record("c", True, 20, 0, 0),
        ]
    )
    assert row["passed"] == 2 and row["tasks"] == 3
    assert row["median_seconds"] == 20
    assert row["later_cache_reuse"] == 0.9
    assert row["failures"] == {"wrong_result": 1}


def test_the_recorder_passes_answers_through_and_reads_their_cost(tmp_path: Path) -> None:
    def reply(body: dict[str, Any]) -> Any:
        return "hello"

    transcript = tmp_path / "upstream.jsonl"
    with serve_fake(FunctionUpstream(reply)) as fake:
        root = fake.base_url.removesuffix("/v1")
        recorder = Recorder(root, transcript=transcript)
        with serve_app(recorder.app()) as front:
            url = f"http://127.0.0.1:{front.port}/v1/chat/completions"
            body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
            whole = httpx.post(url, json=body, timeout=10)
            streamed = httpx.post(url, json={**body, "stream": True}, timeout=10)
    assert whole.json()["choices"][0]["message"]["content"] == "hello"
    assert "data: [DONE]" in streamed.text
    assert [e.path for e in recorder.exchanges] == ["/v1/chat/completions"] * 2
    assert all(e.status == 200 and e.model == "m" for e in recorder.exchanges)
    lines = [json.loads(line) for line in transcript.read_text().splitlines()]
    assert [json.loads(line["request"])["messages"][0]["content"] for line in lines] == ["hi"] * 2
    assert '"hello"' in lines[0]["answer"] and "data: [DONE]" in lines[1]["answer"]


def test_the_recorder_reads_llama_server_timings_and_toolshim_metadata() -> None:
    from toolshim.evaluation.recorder import Exchange, _read_answer

    answer = {
        "choices": [],
        "timings": {"prompt_n": 120, "cache_n": 7000, "predicted_n": 31},
        "toolshim": {"llm_calls": 2, "warnings": ["tool calls emulated"]},
    }
    exchange = Exchange("POST", "/v1/chat/completions", 0.0)
    _read_answer(exchange, json.dumps(answer).encode())
    assert (exchange.prompt_tokens, exchange.cached_tokens, exchange.output_tokens) == (
        7120,
        7000,
        31,
    )
    assert exchange.toolshim["llm_calls"] == 2
    streamed = Exchange("POST", "/v1/messages", 0.0)
    events = (
        'event: message_delta\ndata: {"type": "message_delta", "toolshim": {"reasks": 1}}\n\n'
        'event: error\ndata: {"type": "error", "error": {"message": "too long"}}\n\n'
    )
    _read_answer(streamed, events.encode())
    assert streamed.toolshim == {"reasks": 1} and streamed.error == "too long"


def test_eval_suite_coding_help_names_its_options() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "toolshim.cli.main", "eval", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"COLUMNS": "200", "PATH": "/usr/bin"},
    )
    assert done.returncode == 0, done.stderr
    for flag in ("--client", "--task", "--keep", "coding"):
        assert flag in done.stdout


def test_the_recorder_reads_cache_figures_from_anthropic_and_responses_usage() -> None:
    from toolshim.evaluation.recorder import Exchange, _read_answer

    messages = Exchange("POST", "/v1/messages", 0.0)
    usage = {"input_tokens": 30, "cache_read_input_tokens": 970, "output_tokens": 5}
    _read_answer(messages, json.dumps({"type": "message", "usage": usage}).encode())
    assert (messages.prompt_tokens, messages.cached_tokens) == (1000, 970)
    responses = Exchange("POST", "/v1/responses", 0.0)
    done = {
        "type": "response.completed",
        "response": {
            "usage": {"input_tokens": 800, "input_tokens_details": {"cached_tokens": 700}}
        },
    }
    _read_answer(responses, f"event: response.completed\ndata: {json.dumps(done)}\n\n".encode())
    assert (responses.prompt_tokens, responses.cached_tokens) == (800, 700)
