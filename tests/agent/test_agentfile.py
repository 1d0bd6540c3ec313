"""Agent files: loading TOML and JSON, every problem reported before any model is called."""

from __future__ import annotations

import json
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from toolshim.agent.agentfile import load_agent_file, parse_agent_spec
from toolshim.agent.phases import arun_agent_file, input_text
from toolshim.engine import Engine
from toolshim.errors import ConfigError
from toolshim.testing import FakeUpstream, Reply, call
from toolshim.types import Mode


@pytest.fixture
def tools_module(tmp_path: Path) -> str:
    """A uniquely named module of tools in the agent file's directory (not on sys.path)."""
    name = f"agent_tools_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(
            '''
            NOT_CALLABLE = 3

            def shout(text: str) -> str:
                """Upper-case the text."""
                return text.upper()

            def count(text: str) -> int:
                """Count characters."""
                return len(text)

            def bad(*args):
                return args
            '''
        )
    )
    yield name
    sys.modules.pop(name, None)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_a_toml_file_with_two_phases(tmp_path: Path, tools_module: str) -> None:
    path = write(
        tmp_path,
        "agent.toml",
        f"""
        name = "demo"
        model = "default-model"
        max_turns = 4

        [[phases]]
        name = "loud"
        instructions = "Shout the input."
        tools = ["{tools_module}:shout", "{tools_module}:count"]
        use_native_tools = false
        dialect = "json"

        [[phases]]
        name = "plain"
        model = "other-model"
        use_native_tools = true
        max_turns = 2
        """,
    )
    spec = load_agent_file(path)
    assert spec.name == "demo" and len(spec.phases) == 2
    loud, plain = spec.phases
    assert [t.name for t in loud.tools] == ["shout", "count"]
    assert loud.mode is Mode.FORCE and loud.dialect == "json"
    assert loud.model == "default-model" and loud.max_turns == 4
    assert plain.mode is Mode.OFF and plain.model == "other-model" and plain.max_turns == 2
    assert plain.tools == () and plain.instructions == ""


def test_a_json_file(tmp_path: Path, tools_module: str) -> None:
    data = {"phases": [{"name": "only", "instructions": "x", "tools": [f"{tools_module}:shout"]}]}
    path = write(tmp_path, "agent.json", json.dumps(data))
    spec = load_agent_file(path)
    assert spec.phases[0].tool_paths == (f"{tools_module}:shout",)
    assert spec.phases[0].mode is None


def test_tools_resolve_from_the_current_directory(
    tmp_path: Path, tools_module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    spec = parse_agent_spec({"phases": [{"name": "a", "tools": [f"{tools_module}:count"]}]})
    assert spec.phases[0].tools[0].name == "count"


def test_every_problem_is_reported_at_once_with_file_phase_and_key(
    tmp_path: Path, tools_module: str
) -> None:
    path = write(
        tmp_path,
        "broken.toml",
        f"""
        cascade_id = "x"
        name = "y"

        [[phases]]
        name = "first"
        tackle = ["run_code"]
        instrctions = "typo"
        max_turns = "5"
        mode = "sometimes"

        [[phases]]
        name = "second"
        tools = [
            "no_such_module_xyz:f",
            "{tools_module}:missing",
            "{tools_module}:NOT_CALLABLE",
            "{tools_module}:bad",
            "not-a-path",
        ]
        dialect = "klingon"
        use_native_tools = true
        mode = "force"

        [[phases]]
        name = "first"
        """,
    )
    with pytest.raises(ConfigError) as info:
        load_agent_file(path)
    lines = info.value.message.splitlines()
    src = str(path)
    expected = [
        f"{src}: 'cascade_id' is seed 002's name for 'name', and both are given; keep one of them",
        f"{src}: phase 1 ('first'): unknown key 'instrctions' (did you mean 'instructions'?)",
        f"{src}: phase 1 ('first'): tool 'run_code' is not a built-in tool (the built-ins are "
        "'current_time', 'calculate', 'convert_units'); give a function of your own as an "
        "import path 'module:function'",
        f"{src}: phase 1 ('first'): key 'mode' must be one of 'off', 'fallback', 'force', "
        "'auto', 'strip', not 'sometimes' (a string)",
        f"{src}: phase 1 ('first'): key 'max_turns' must be an integer of at least 1, not '5' "
        "(a string)",
        f"{src}: phase 2 ('second'): 'use_native_tools = true' means mode 'off', but 'mode' is "
        "'force'; keep one of them",
        f"{src}: phase 2 ('second'): tool 'no_such_module_xyz:f': cannot import module "
        "'no_such_module_xyz'",
        f"{src}: phase 2 ('second'): tool '{tools_module}:missing': module '{tools_module}' has "
        "no 'missing'; its functions are: bad, count, shout",
        f"{src}: phase 2 ('second'): tool '{tools_module}:NOT_CALLABLE' is an integer, not a "
        "function",
        f"{src}: phase 2 ('second'): tool '{tools_module}:bad': tool 'bad': parameter '*args'",
        f"{src}: phase 2 ('second'): tool 'not-a-path' must be an import path 'module:function'",
        f"{src}: phase 2 ('second'): key 'dialect' must be one of",
        f"{src}: phase 3 ('first'): another phase is already named 'first'",
    ]
    for start in expected:
        assert any(line.startswith(start) for line in lines), (start, lines)
    assert len(lines) == len(expected)


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("a.yaml", "phases: []", "must end in .toml or .json"),
        ("a.toml", "phases = [", "not valid TOML"),
        ("a.json", "{", "not valid JSON"),
        ("a.json", "[]", "the top level must be a table/object"),
        ("a.toml", "name = 'x'", "'phases' must be a non-empty list of tables"),
        ("a.json", '{"phases": [3]}', "phase 1: must be a table/object, not an integer"),
    ],
)
def test_malformed_files(tmp_path: Path, name: str, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_agent_file(write(tmp_path, name, text))


def test_a_missing_file() -> None:
    with pytest.raises(ConfigError, match="no such agent file"):
        load_agent_file("/nonexistent/agent.toml")


async def test_phases_chain_their_answers(tmp_path: Path, tools_module: str) -> None:
    spec = parse_agent_spec(
        {
            "phases": [
                {"name": "loud", "instructions": "Shout it.", "tools": [f"{tools_module}:shout"]},
                {"name": "wrap", "instructions": "Wrap it.", "mode": "force"},
            ]
        },
        base_dir=tmp_path,
    )
    fake = FakeUpstream(
        [
            Reply(tool_calls=[call("shout", {"text": "hello"})]),
            "HELLO",
            "<<HELLO>>",
        ]
    )
    events: list[tuple[str, str]] = []
    run = await arun_agent_file(
        spec,
        {"text": "hello"},
        engine=Engine(fake),
        model="m",
        on_event=lambda phase, n, e: events.append((phase.name, type(e).__name__)),
    )
    assert run.output == "<<HELLO>>"
    assert [p.name for p in run.phases] == ["loud", "wrap"]
    assert run.phases[0].input == '{\n  "text": "hello"\n}'
    assert run.phases[1].input == "HELLO"
    assert fake.history[0]["messages"][0] == {"role": "system", "content": "Shout it."}
    assert fake.history[2]["messages"][-1] == {"role": "user", "content": "HELLO"}
    assert run.phases[1].mode == "force"
    assert events[0] == ("loud", "TurnStarted") and events[-1] == ("wrap", "RunFinished")
    data = json.loads(json.dumps(run.to_dict()))
    assert data["output"] == "<<HELLO>>" and data["input"] == {"text": "hello"}
    assert data["phases"][0]["tool_runs"][0]["result"] == "HELLO"
    assert data["usage"]["total_tokens"] == run.usage.total_tokens > 0


def test_input_text() -> None:
    assert input_text("plain") == "plain"
    assert input_text({"a": [1]}) == '{\n  "a": [\n    1\n  ]\n}'
