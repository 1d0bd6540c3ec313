"""The coding agents the suite drives, pinned from npm and run headless: Claude Code
(``claude -p``, Anthropic Messages) and Codex CLI (``codex exec``, OpenAI Responses).

Each is installed once into a cache folder (``TOOLSHIM_TEST_CACHE``, default
``~/.cache/toolshim-tests``, shared with the tests) and run in the task's folder with a home of
its own, nothing sent anywhere but the base URL given, and the client's own timeouts raised
so that a slow CPU model is waited for rather than retried.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from toolshim.errors import ConfigError
from toolshim.testing.npm import npm_cache, npm_executable

__all__ = [
    "CLAUDE_CODE_VERSION",
    "CLIENTS",
    "CODEX_VERSION",
    "ClientRun",
    "CodingClient",
    "get_client",
]

CLAUDE_CODE_VERSION = "2.1.332"
CODEX_VERSION = "0.171.0"
ClientName = Literal["claude", "codex"]


@dataclass(frozen=True, slots=True)
class ClientRun:
    """What one headless run printed, read: its final answer and whether it says it failed."""

    answer: str
    error: str | None
    turns: int | None
    exit_code: int
    timed_out: bool


@dataclass(frozen=True)
class CodingClient:
    name: ClientName
    package: str
    version: str
    binary: str
    protocol: Literal["messages", "responses"]

    @property
    def executable(self) -> Path:
        return (
            npm_cache()
            / f"{self.package.rsplit('/', 1)[-1]}-{self.version}"
            / (f"node_modules/.bin/{self.binary}")
        )

    def install(self) -> Path:
        """The client's executable, installed with npm on first use (ConfigError without npm)."""
        return npm_executable(self.package, self.version, self.binary)

    def command(
        self, prompt: str, *, base_url: str, model: str, home: Path, max_turns: int
    ) -> tuple[list[str], dict[str, str]]:
        """The argv and environment of a headless run against ``base_url`` (a root URL)."""
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "LANG": "C.UTF-8",
            "NO_COLOR": "1",
        }
        exe = str(self.executable)
        if self.name == "claude":
            env |= {
                "ANTHROPIC_BASE_URL": base_url,
                "ANTHROPIC_API_KEY": "sk-ant-toolshim-suite",
                "DISABLE_TELEMETRY": "1",
                "DISABLE_AUTOUPDATER": "1",
                "DISABLE_ERROR_REPORTING": "1",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                # A CPU model may read a long prompt for minutes before its first token.
                "API_TIMEOUT_MS": "1800000",
                "CLAUDE_STREAM_IDLE_TIMEOUT_MS": "1800000",
                "CLAUDE_CODE_MAX_RETRIES": "0",
            }
            argv = [
                exe,
                "-p",
                prompt,
                "--model",
                model,
                "--output-format",
                "json",
                "--max-turns",
                str(max_turns),
                "--allowedTools",
                "Bash Edit Write Read Glob Grep",
            ]
            return argv, env
        codex_home = home / ".codex"
        codex_home.mkdir(parents=True, exist_ok=True)
        (codex_home / "config.toml").write_text(_codex_config(base_url, model), encoding="utf-8")
        env |= {"CODEX_HOME": str(codex_home), "OPENAI_API_KEY": "sk-toolshim-suite"}
        argv = [
            exe,
            "exec",
            "--skip-git-repo-check",
            "--sandbox",
            "workspace-write",
            "--json",
            prompt,
        ]
        return argv, env

    def read_output(self, stdout: str, exit_code: int, timed_out: bool) -> ClientRun:
        """The final answer, error and turns from what the client printed."""
        if self.name == "claude":
            return _read_claude(stdout, exit_code, timed_out)
        return _read_codex(stdout, exit_code, timed_out)


def _codex_config(base_url: str, model: str) -> str:
    return (
        f"model = {json.dumps(model)}\n"
        'model_provider = "toolshim"\n'
        'approval_policy = "never"\n'
        "[model_providers.toolshim]\n"
        'name = "toolshim"\n'
        f"base_url = {json.dumps(base_url.rstrip('/') + '/v1')}\n"
        'wire_api = "responses"\n'
        "request_max_retries = 0\n"
        "stream_max_retries = 0\n"
        "stream_idle_timeout_ms = 3600000\n"
    )


def _read_claude(stdout: str, exit_code: int, timed_out: bool) -> ClientRun:
    result: dict[str, Any] = {}
    for line in reversed(stdout.strip().splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict) and value.get("type") == "result":
            result = value
            break
    answer = str(result.get("result") or "")
    error = None
    if result.get("is_error"):
        error = str(result.get("terminal_reason") or result.get("subtype") or "error")
        if answer:
            error = f"{error}: {answer[:300]}"
    elif not result and not timed_out:
        error = f"no result printed (exit {exit_code})"
    turns = result.get("num_turns")
    return ClientRun(answer, error, turns if isinstance(turns, int) else None, exit_code, timed_out)


def _read_codex(stdout: str, exit_code: int, timed_out: bool) -> ClientRun:
    answer = ""
    error = None
    turns = 0
    for line in stdout.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        kind = str(event.get("type") or "")
        found = event.get("item")
        item: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        if kind == "item.completed" and item.get("type") == "agent_message":
            answer = str(item.get("text") or "")
        elif kind in ("error", "turn.failed"):
            said = event.get("error")
            failure: Mapping[str, Any] = said if isinstance(said, Mapping) else event
            error = str(failure.get("message") or failure)[:300]
        elif kind == "item.completed" and item.get("type") in ("command_execution", "file_change"):
            turns += 1
    if exit_code != 0 and error is None and not timed_out:
        error = f"codex exited {exit_code}"
    return ClientRun(answer, error, turns + 1 if answer or turns else None, exit_code, timed_out)


CLIENTS: dict[str, CodingClient] = {
    "claude": CodingClient(
        "claude", "@anthropic-ai/claude-code", CLAUDE_CODE_VERSION, "claude", "messages"
    ),
    "codex": CodingClient("codex", "@openai/codex", CODEX_VERSION, "codex", "responses"),
}


def get_client(name: str) -> CodingClient:
    client = CLIENTS.get(name.strip().lower())
    if client is None:
        raise ConfigError(f"unknown coding client {name!r}; known: {', '.join(CLIENTS)}")
    return client
