"""A phase that answers with nothing: the run stops naming it, instead of sending the next phase
an empty user message (seed 002: "skip empty messages"; some providers reject them)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolshim.agent.agentfile import parse_agent_spec
from toolshim.agent.phases import arun_agent_file
from toolshim.cli.main import app
from toolshim.engine import Engine
from toolshim.errors import AgentLimitError, ToolshimError
from toolshim.testing import FakeUpstream
from toolshim.testing.server import serve_fake

THREE = parse_agent_spec(
    {
        "phases": [
            {"name": "draft", "instructions": "Draft it."},
            {"name": "review", "instructions": "Review the draft."},
            {"name": "summary", "instructions": "Summarise"},
        ]
    }
)


@pytest.mark.parametrize("empty", ["", "   ", "\n\t\n"])
async def test_an_empty_middle_phase_fails_the_run_naming_it(empty: str) -> None:
    fake = FakeUpstream(["A draft.", empty, "never sent"], models=["m"])
    with pytest.raises(AgentLimitError) as info:
        await arun_agent_file(THREE, {}, engine=Engine(fake, registry=":memory:"), model="m")
    error = info.value
    assert isinstance(error, ToolshimError) and error.reason == "empty_output"
    assert error.message == (
        "phase 'review' (2 of 3) answered with nothing (1 turn(s)), so phase 'summary' has no "
        "input; the run stops here rather than send an empty message (some providers reject "
        "those)"
    )
    assert len(fake.history) == 2  # the third phase was never called
    assert all(m.get("content", "").strip() for b in fake.history for m in b["messages"])
    run = error.result
    assert [p.name for p in run.phases] == ["draft", "review"]
    assert run.phases[0].result.output == "A draft."


async def test_an_empty_first_phase_never_reaches_the_second() -> None:
    """The audit's repro: a blank-instruction phase that answers '' used to send ('user', '')."""
    spec = parse_agent_spec(
        {"phases": [{"name": "a", "instructions": "   "}, {"name": "b", "instructions": "x"}]}
    )
    fake = FakeUpstream(["", "ok"], models=["m"])
    with pytest.raises(AgentLimitError, match=r"^phase 'a' \(1 of 2\) answered with nothing"):
        await arun_agent_file(spec, {}, engine=Engine(fake, registry=":memory:"), model="m")
    assert len(fake.history) == 1


@pytest.mark.parametrize("empty", ["", "  \n "])
async def test_an_empty_last_phase_is_an_empty_result_with_a_warning(empty: str) -> None:
    fake = FakeUpstream(["A draft.", "Looks good.", empty], models=["m"])
    run = await arun_agent_file(THREE, {}, engine=Engine(fake, registry=":memory:"), model="m")
    assert run.output == "" and run.to_dict()["output"] == ""
    assert "phase 'summary' answered with nothing: the result is empty" in run.warnings
    assert len(fake.history) == 3


async def test_answers_with_text_chain_as_before() -> None:
    fake = FakeUpstream(["A draft.", "Looks good.", "Done."], models=["m"])
    run = await arun_agent_file(THREE, {}, engine=Engine(fake, registry=":memory:"), model="m")
    assert run.output == "Done."
    assert not any("answered with nothing" in w for w in run.warnings)
    assert fake.history[2]["messages"][-1] == {"role": "user", "content": "Looks good."}


def test_toolshim_run_says_which_phase_in_one_line_and_exits_1(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    path.write_text('[[phases]]\nname = "draft"\n\n[[phases]]\nname = "polish"\n')
    fake = FakeUpstream([" "], models=["m"])
    with serve_fake(fake) as server:
        result = CliRunner().invoke(
            app, ["run", str(path), "--upstream", server.base_url, "--registry", ":memory:"]
        )
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        "error: phase 'draft' (1 of 2) answered with nothing (1 turn(s)), so phase 'polish' has "
        "no input; the run stops here rather than send an empty message (some providers reject "
        "those)"
    ]
    assert "Traceback" not in result.output
    assert len(fake.history) == 1
