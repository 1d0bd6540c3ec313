"""Seed 002's cascade files load as they are: ``cascade_id`` and ``tackle`` are aliases, and a
phase's tools may name a built-in demo tool (``calculate``) besides ``module:function`` paths."""

from __future__ import annotations

import json
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from toolshim.agent.agentfile import load_agent_file, parse_agent_spec
from toolshim.agent.phases import arun_agent_file
from toolshim.cli.main import app
from toolshim.engine import Engine
from toolshim.errors import ConfigError
from toolshim.testing import FakeUpstream
from toolshim.testing.server import serve_fake
from toolshim.types import Mode

BUILTINS = "the built-ins are 'current_time', 'calculate', 'convert_units'"


def seed_file(tmp_path: Path, tackle: list[str], name: str = "seed.json") -> Path:
    """Seed 002's "Test 1" cascade, word for word but for its tools."""
    data = {
        "cascade_id": "test_gemini",
        "phases": [
            {
                "name": "test",
                "instructions": "Run code that prints hello",
                "tackle": tackle,
                "model": "google/gemini-3-pro-preview",
                "use_native_tools": False,
            }
        ],
    }
    path = tmp_path / name
    path.write_text(json.dumps(data, indent=2))
    return path


@pytest.fixture
def wtools(tmp_path: Path) -> Iterator[str]:
    """Seed 002's run_code and set_state, in a module next to the agent file."""
    module = f"wtools_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(
        textwrap.dedent(
            '''
            from typing import Any

            STATE: dict[str, Any] = {}

            def run_code(code: str, language: str = "python") -> str:
                """Executes code in a sandbox."""
                return "hello world"

            def set_state(key: str, value: Any) -> str:
                """Persist variables to session state"""
                STATE[key] = value
                return "ok"
            '''
        )
    )
    yield module
    sys.modules.pop(module, None)


def test_the_seed_file_loads_with_cascade_id_and_tackle(tmp_path: Path, wtools: str) -> None:
    spec = load_agent_file(seed_file(tmp_path, [f"{wtools}:run_code", f"{wtools}:set_state"]))
    assert spec.name == "test_gemini"
    (phase,) = spec.phases
    assert phase.name == "test" and phase.instructions == "Run code that prints hello"
    assert [t.name for t in phase.tools] == ["run_code", "set_state"]
    assert phase.tool_paths == (f"{wtools}:run_code", f"{wtools}:set_state")
    assert phase.model == "google/gemini-3-pro-preview" and phase.mode is Mode.FORCE


def test_a_toml_file_uses_the_aliases_too(tmp_path: Path) -> None:
    path = tmp_path / "cascade.toml"
    path.write_text(
        'cascade_id = "code_test"\n\n[[phases]]\nname = "solve"\ntackle = ["calculate"]\n'
    )
    spec = load_agent_file(path)
    assert spec.name == "code_test" and spec.phases[0].tools[0].name == "calculate"


@pytest.mark.parametrize("name", ["calculate", "current_time", "convert_units"])
def test_a_bare_name_is_a_builtin_tool(name: str) -> None:
    spec = parse_agent_spec({"phases": [{"name": "p", "tools": [name]}]})
    (tool,) = spec.phases[0].tools
    assert tool.name == name and spec.phases[0].tool_paths == (name,)


def test_builtins_and_import_paths_mix(tmp_path: Path, wtools: str) -> None:
    spec = parse_agent_spec(
        {"phases": [{"tackle": ["calculate", f"{wtools}:run_code", " convert_units "]}]},
        base_dir=tmp_path,
    )
    assert [t.name for t in spec.phases[0].tools] == ["calculate", "run_code", "convert_units"]


def test_an_unknown_bare_name_lists_the_builtins_and_the_import_form(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as info:
        parse_agent_spec(
            {"phases": [{"name": "solve", "tackle": ["run_code"]}]},
            source="seed.json",
            base_dir=tmp_path,
        )
    assert info.value.message == (
        f"seed.json: phase 1 ('solve'): tool 'run_code' is not a built-in tool ({BUILTINS}); "
        "give a function of your own as an import path 'module:function', "
        "e.g. 'my_tools:run_code'"
    )


def test_an_unknown_bare_name_points_at_the_file_that_defines_it(
    tmp_path: Path, wtools: str
) -> None:
    """Seed 002's own example names ``run_code`` bare; a module beside the file defines it."""
    path = seed_file(tmp_path, ["run_code"])
    with pytest.raises(ConfigError) as info:
        load_agent_file(path)
    message = info.value.message
    assert message.startswith(f"{path}: phase 1 ('test'): tool 'run_code' is not a built-in")
    assert BUILTINS in message and "'module:function'" in message
    assert message.endswith(f"e.g. '{wtools}:run_code' ({wtools}.py defines it)")
    assert wtools not in sys.modules  # found by reading the file, not by importing it


def test_a_near_miss_of_a_builtin_is_suggested() -> None:
    with pytest.raises(ConfigError, match=r"did you mean the built-in 'calculate'\?$"):
        parse_agent_spec({"phases": [{"tools": ["calculator"]}]})


def test_a_dotted_path_is_corrected() -> None:
    with pytest.raises(ConfigError) as info:
        parse_agent_spec({"phases": [{"tools": ["my_tools.get_weather"]}]})
    assert "must be an import path 'module:function'" in info.value.message
    assert "the name of a built-in tool ('current_time', 'calculate'" in info.value.message
    assert info.value.message.endswith("did you mean 'my_tools:get_weather'?")


def test_a_key_given_both_ways_is_an_error() -> None:
    with pytest.raises(ConfigError) as info:
        parse_agent_spec(
            {
                "cascade_id": "a",
                "name": "b",
                "phases": [{"name": "p", "tackle": ["calculate"], "tools": ["current_time"]}],
            },
            source="f.json",
        )
    assert info.value.message.splitlines() == [
        "f.json: 'cascade_id' is seed 002's name for 'name', and both are given; keep one of them",
        "f.json: phase 1 ('p'): 'tackle' is seed 002's name for 'tools', and both are given; "
        "keep one of them",
    ]


def test_a_wrong_value_is_reported_under_the_name_the_file_used() -> None:
    with pytest.raises(ConfigError) as info:
        parse_agent_spec({"cascade_id": 3, "phases": [{"name": "p", "tackle": "calculate"}]})
    lines = info.value.message.splitlines()
    assert lines[0] == "<agent>: key 'cascade_id' must be a string, not 3 (an integer)"
    assert lines[1].startswith(
        "<agent>: phase 1 ('p'): key 'tackle' must be a list of tool names (built-in names or "
        "'module:function' paths), not 'calculate'"
    )


@pytest.mark.parametrize(
    ("data", "line"),
    [
        (
            {"rules": {"max_turns": 3}, "phases": [{}]},
            "<agent>: unknown key 'rules'; allowed: phases, name, description, model, mode, "
            "dialect, max_turns, mcp (and seed 002's 'cascade_id' for 'name')",
        ),
        (
            {"phases": [{"name": "p", "tackel": ["calculate"]}]},
            "<agent>: phase 1 ('p'): unknown key 'tackel' (did you mean 'tackle'?); allowed: "
            "name, instructions, tools, model, mode, use_native_tools, dialect, max_turns, mcp "
            "(and seed 002's 'tackle' for 'tools')",
        ),
        (
            {"phases": [{"name": "p", "cascade_id": "x"}]},
            "<agent>: phase 1 ('p'): unknown key 'cascade_id' ('cascade_id' names the whole "
            "file: put it at the top level); allowed:",
        ),
        (
            {"tackle": ["calculate"], "phases": [{}]},
            "<agent>: unknown key 'tackle' (seed 002's 'tackle' (tools) belongs to a phase: put "
            "it in its 'tools'); allowed:",
        ),
    ],
)
def test_truly_unknown_keys_are_still_errors(data: dict[str, Any], line: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_agent_spec(data)
    assert info.value.message.startswith(line), info.value.message


async def test_the_seed_cascade_runs_with_the_seed_reply(tmp_path: Path, wtools: str) -> None:
    """Seed 002's Example 1 end to end: prompt-based tools, the call parsed out of prose."""
    spec = load_agent_file(seed_file(tmp_path, [f"{wtools}:run_code"]))
    fake = FakeUpstream(
        [
            "I'll write the solution:\n\n"
            '{"tool": "run_code", "arguments": {"code": "print(\'hello\')"}}',
            "It printed hello world.",
        ],
        models=["google/gemini-3-pro-preview"],
    )
    run = await arun_agent_file(spec, {}, engine=Engine(fake, registry=":memory:"))
    assert run.output == "It printed hello world."
    (tool_run,) = run.phases[0].result.tool_runs
    assert (tool_run.name, tool_run.arguments, tool_run.result) == (
        "run_code",
        {"code": "print('hello')"},
        "hello world",
    )
    assert "tools" not in fake.history[0]  # use_native_tools = false: emulated
    assert fake.history[0]["model"] == "google/gemini-3-pro-preview"


def test_toolshim_run_loads_a_seed_file_with_a_builtin(tmp_path: Path) -> None:
    path = seed_file(tmp_path, ["calculate"])
    fake = FakeUpstream(
        ['{"tool": "calculate", "arguments": {"expression": "6 * 7"}}', "It is 42."],
        models=["google/gemini-3-pro-preview"],
    )
    with serve_fake(fake) as server:
        result = CliRunner().invoke(
            app,
            ["run", str(path), "--upstream", server.base_url, "--registry", ":memory:"],
        )
    assert result.exit_code == 0, result.output
    assert result.stdout == "It is 42.\n"
    assert "phase 1/1: test (calculate)" in result.stderr
    assert 'calculate(expression="6 * 7") → 42' in result.stderr
