"""Codex CLI itself (``@openai/codex`` from npm, pinned) completes a tool-using task through
``toolshim serve`` on a scripted model without native tools: the model asks for a shell command
through Codex's ``exec_command`` tool (emulated), Codex runs it, sends its output back as a
``function_call_output``, and the run ends with the model's final text.

Codex is installed once into a cache folder (``TOOLSHIM_TEST_CACHE``, default
``~/.cache/toolshim-tests``) with npm; its npm package carries its native binary, so nothing
else is downloaded. Without ``npm`` on the machine the test is skipped, except under CI (``CI``
set), where it fails: CI must run Codex.

Codex talks to toolshim through a recording pass-through, so that the test reads Codex's own
requests (the ``function_call_output`` it sends back), not only what reached the model.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tomllib
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from tests.responses.readme import readme_blocks
from toolshim.testing import free_port, start_serve
from toolshim.testing.server import ScriptedUpstream, serve_app, serve_fake

pytestmark = pytest.mark.e2e

CODEX_VERSION = "0.171.0"
FINAL = "Done: proof.txt holds the greeting."
COMMAND = "printf 'hello from codex' > proof.txt"


@pytest.fixture(scope="session")
def codex() -> Path:
    """The pinned Codex CLI, installed with npm into the test cache on first use."""
    npm = shutil.which("npm")
    if npm is None:
        message = "npm is not installed (Codex CLI comes from the npm registry)"
        if os.environ.get("CI"):
            pytest.fail(f"{message}; CI must run the Codex CLI test")
        pytest.skip(message)
    cache = Path(os.environ.get("TOOLSHIM_TEST_CACHE") or Path.home() / ".cache/toolshim-tests")
    prefix = cache / f"codex-{CODEX_VERSION}"
    binary = prefix / "node_modules" / ".bin" / "codex"
    if not binary.exists():
        prefix.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                npm,
                "install",
                "--prefix",
                str(prefix),
                "--no-fund",
                "--no-audit",
                "--no-save",
                f"@openai/codex@{CODEX_VERSION}",
            ],
            check=True,
            timeout=600,
            capture_output=True,
        )
    version = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60)
    assert CODEX_VERSION in version.stdout, version.stdout + version.stderr
    return binary


@pytest.fixture
def scripted_model() -> Iterator[tuple[str, ScriptedUpstream]]:
    """A model that rejects native tools, as Ollama does for a model without them."""
    call = {"tool_calls": [{"name": "exec_command", "arguments": {"cmd": COMMAND}}]}
    upstream = ScriptedUpstream({"tools": "reject", "replies": [json.dumps(call), FINAL]})
    with serve_fake(upstream) as server:
        yield server.base_url, upstream


def readme_config(base_url: str) -> str:
    """The README's ``config.toml`` for Codex, pointed at ``base_url``, for the scripted model."""
    (config,) = readme_blocks("Codex CLI on a local model", "toml")
    parsed = tomllib.loads(config)
    provider = parsed["model_providers"][parsed["model_provider"]]
    assert provider["wire_api"] == "responses", config
    assert provider["base_url"] == "http://127.0.0.1:8080/v1", config  # toolshim's default
    config = config.replace(provider["base_url"], base_url)
    return config.replace(f'model = "{parsed["model"]}"', 'model = "fake-model"', 1)


def recording_pass_through(target: str, seen: list[dict[str, Any]]) -> web.Application:
    """An HTTP app that records each request (path and JSON body) and forwards it to
    ``target``, streaming the answer back as it comes."""

    async def forward(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        seen.append({"path": request.path, "body": json.loads(body) if body else None})
        headers = {
            k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")
        }
        async with (
            aiohttp.ClientSession() as session,
            session.request(
                request.method, target + request.path_qs, data=body, headers=headers
            ) as answer,
        ):
            response = web.StreamResponse(
                status=answer.status,
                headers={
                    k: v
                    for k, v in answer.headers.items()
                    if k.lower() in ("content-type", "x-toolshim-emulated")
                },
            )
            await response.prepare(request)
            async for chunk in answer.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", forward)
    return app


def test_codex_runs_an_emulated_shell_call_through_toolshim(
    codex: Path, scripted_model: tuple[str, ScriptedUpstream], tmp_path: Path
) -> None:
    upstream_url, upstream = scripted_model
    port = free_port()
    proxy = start_serve(
        upstream=upstream_url,
        port=port,
        registry=tmp_path / "capabilities.sqlite3",
        log=tmp_path / "serve.log",
    )
    seen: list[dict[str, Any]] = []
    home, work = tmp_path / "codex-home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    stack = ExitStack()
    try:
        recorder = stack.enter_context(
            serve_app(recording_pass_through(f"http://127.0.0.1:{port}", seen))
        )
        (home / "config.toml").write_text(readme_config(recorder.base_url))
        run = subprocess.run(
            [
                str(codex),
                "exec",
                "--skip-git-repo-check",
                "--dangerously-bypass-approvals-and-sandbox",
                "--ephemeral",
                "-C",
                str(work),
                "-o",
                str(tmp_path / "last.txt"),
                "Write the greeting into proof.txt",
            ],
            env={**os.environ, "CODEX_HOME": str(home)},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=180,
        )
    finally:
        stack.close()
        proxy.stop()
    report = f"codex:\n{run.stdout}\n{run.stderr}\ntoolshim:\n{proxy.output()}"
    assert run.returncode == 0, report
    assert (work / "proof.txt").read_text() == "hello from codex", report
    assert (tmp_path / "last.txt").read_text().strip() == FINAL, report

    # Codex's own requests: the first offers exec_command; the next carries the call it got
    # and the call's output (what the command printed, with its exit code)
    requests = [r["body"] for r in seen if r["path"].endswith("/responses")]
    assert len(requests) == 2, [r["path"] for r in seen]
    first, after = requests
    assert "exec_command" in [t.get("name") for t in first["tools"]]
    assert not [i for i in first["input"] if i.get("type") == "function_call_output"]
    (call,) = [i for i in after["input"] if i.get("type") == "function_call"]
    assert call["name"] == "exec_command" and json.loads(call["arguments"])["cmd"] == COMMAND
    (output,) = [i for i in after["input"] if i.get("type") == "function_call_output"]
    assert output["call_id"] == call["call_id"] and call["call_id"].startswith("emulated_")
    assert "Process exited with code 0" in json.dumps(output["output"]), output

    sent = upstream.history
    # the native attempt (rejected: learned), the emulated call, the answer after the result
    assert len(sent) == 3, report
    assert "tools" in sent[0] and "tools" not in sent[1] and "tools" not in sent[2]
    assert "exec_command" in sent[1]["messages"][0]["content"]  # described in the prompt
    result = json.dumps(sent[2]["messages"], ensure_ascii=False)
    assert "Process exited with code 0" in result, result  # Codex's function_call_output
    assert "proof.txt" in result  # with the call it answers
