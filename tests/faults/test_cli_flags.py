"""``toolshim serve`` takes the upstream deadlines and retry count as flags and passes them on."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

import toolshim.cli.serve as serve_module
from toolshim.cli.main import app
from toolshim.upstreams.aiohttp_upstream import AiohttpUpstream


def test_serve_help_lists_the_deadline_and_retry_flags() -> None:
    result = CliRunner().invoke(app, ["serve", "--help"], terminal_width=200)
    assert result.exit_code == 0
    for flag in ("--connect-timeout", "--timeout", "--total-timeout", "--upstream-retries"):
        assert flag in result.output


def test_serve_builds_the_upstream_with_the_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[AiohttpUpstream] = []

    class Stop(Exception):
        pass

    def fake_run(app: Any, sock: Any, log_level: str) -> None:
        built.append(app.engine.upstream.inner)
        raise Stop

    monkeypatch.setattr(serve_module, "_run", fake_run)
    monkeypatch.setattr(serve_module, "_warn_if_unreachable", lambda *a: None)
    args = ["serve", "--upstream", "http://127.0.0.1:9/v1", "--port", "0", "--connect-timeout", "2"]
    args += ["--timeout", "30", "--total-timeout", "90", "--upstream-retries", "0"]
    result = CliRunner().invoke(app, args)
    assert isinstance(result.exception, Stop), result.output
    (upstream,) = built
    assert (upstream.deadlines.connect, upstream.deadlines.read) == (2.0, 30.0)
    assert upstream.deadlines.total == 90.0
    assert upstream.retry.retries == 0
