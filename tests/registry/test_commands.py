"""``--registry URL`` (and ``TOOLSHIM_REGISTRY``) for ``run`` and ``chat`` as for ``models`` and
``serve``: a fact set once in the shared store is acted on by every command, and the URL's
password is never shown."""

from __future__ import annotations

import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

# chat's fixtures (a scripted upstream process, a chat in a terminal), used here too.
from tests.chat.conftest import ChatFactory, Upstream, chat, registry_path, upstream
from toolshim.cli.main import app
from toolshim.testing import FakeUpstream
from toolshim.testing.server import serve_fake

__all__ = ["chat", "registry_path", "upstream"]  # fixtures pytest finds by name

CALL = '{"tool_calls": [{"name": "shout", "arguments": {"text": "hello"}}]}'


@pytest.fixture(params=["postgres", "redis"])
def shared_url(request: pytest.FixtureRequest) -> str:
    server = request.getfixturevalue(f"{request.param}_server")
    return str(server.new_database())


@pytest.fixture
def agent_file(tmp_path: Path) -> Iterator[Path]:
    module = f"shared_tools_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(
        'def shout(text: str) -> str:\n    """Upper-case the text."""\n    return text.upper()\n'
    )
    path = tmp_path / "agent.toml"
    path.write_text(
        textwrap.dedent(
            f"""
            [[phases]]
            name = "loud"
            instructions = "Shout the text you are given, with the tool."
            tools = ["{module}:shout"]
            """
        )
    )
    yield path
    sys.modules.pop(module, None)


def set_no_tools(model: str, *args: str, env: dict[str, str] | None = None) -> None:
    result = CliRunner().invoke(app, ["models", "set", model, "--tools", "no", *args], env=env)
    assert result.exit_code == 0, result.output
    assert "s3cret" not in result.output


@pytest.mark.parametrize("how", ["flag", "env"])
def test_run_acts_on_a_fact_set_in_the_shared_store(
    shared_url: str, agent_file: Path, how: str
) -> None:
    """The fact says no native tools: the run emulates from its first request (the scripted
    upstream would take tools, so a run that missed the store would send them)."""
    model = f"shared-{uuid.uuid4().hex[:8]}"
    flags, env = (["--registry", shared_url], None)
    if how == "env":
        flags, env = [], {"TOOLSHIM_REGISTRY": shared_url}
    set_no_tools(model, *flags, env=env)
    fake = FakeUpstream([CALL, "HELLO"], tools="native", models=[model])
    with serve_fake(fake) as server:
        result = CliRunner().invoke(
            app,
            ["run", str(agent_file), "--upstream", server.base_url, "--model", model, *flags],
            input="hello",
            env=env,
        )
    assert result.exit_code == 0, result.output
    assert "HELLO" in result.stdout
    assert fake.history and all("tools" not in body for body in fake.history)
    assert "s3cret" not in result.output


def test_chat_acts_on_a_fact_set_in_the_shared_store(
    shared_url: str, chat: ChatFactory, upstream: Upstream
) -> None:
    model = f"shared-{uuid.uuid4().hex[:8]}"
    set_no_tools(model, "--registry", shared_url)
    upstream.script(replies=[])
    session = chat("--model", model, "--registry", shared_url)
    session.expect(f"Model {model}. Tools: emulated (json)")
    session.expect("set by you")
    session.prompt(model)
    session.ctrl_d()
    assert session.exit_status() == 0
    assert "s3cret" not in session.output_since_start()
