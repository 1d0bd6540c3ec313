"""A model's stored preferences (source ``eval``) reach serve, chat and run through a real SQLite file."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from tests.server.helpers import WEATHER
from toolshim.capabilities.facts import Source
from toolshim.capabilities.registry import Registry
from toolshim.cli.main import app
from toolshim.engine import Engine
from toolshim.testing import FakeUpstream
from toolshim.testing.server import serve_fake
from toolshim.types import Strategy

TOOLS = [WEATHER]
PYTHONIC = "You can call these Python functions:"
DECISION = "Decide whether a function must be called"


def store_eval_pick(path: Path, upstream: str, model: str) -> None:
    """What `toolshim eval --apply` stores: pythonic, decision, no constraint (source eval);
    and what an embedded server says about itself (source upstream), which the pick beats."""
    registry = Registry.open(path)
    detail = "eval 2026-11-26: combined 60%"
    for name, value in (("dialect", "pythonic"), ("strategy", "decision"), ("constrain", "no")):
        registry.learn(upstream, model, name, value, Source.EVAL, detail=detail)
    registry.learn(upstream, model, "dialect", "hermes", Source.UPSTREAM)
    registry.learn(upstream, model, "structured_output", "yes", Source.UPSTREAM)
    registry.flush()
    registry.close()


def test_the_engine_takes_dialect_strategy_and_constraint_from_the_eval(tmp_path: Path) -> None:
    path = tmp_path / "reg.sqlite3"
    store_eval_pick(path, "http://up/v1", "m")
    registry = Registry.open(path)
    engine = Engine(FakeUpstream(["hi"], key="http://up/v1"), mode="force", registry=registry)
    turn = engine.turn(
        {"model": "m", "messages": [{"role": "user", "content": "?"}], "tools": TOOLS}
    )
    assert turn.dialect.name == "pythonic"
    assert turn.strategy is Strategy.DECISION
    # structured_output is yes, but the eval's "constrain: no" is the measured preference
    assert turn.constrained is False
    # the caller's own options still win over any stored preference
    turn = engine.turn(
        {"model": "m", "messages": [{"role": "user", "content": "?"}], "tools": TOOLS},
        dialect="json",
        strategy="single",
    )
    assert (turn.dialect.name, turn.strategy) == ("json", Strategy.SINGLE)
    # a person's setting beats the eval's
    registry.learn("http://up/v1", "m", "dialect", "compact", Source.USER)
    turn = engine.turn(
        {"model": "m", "messages": [{"role": "user", "content": "?"}], "tools": TOOLS}
    )
    assert turn.dialect.name == "compact"
    registry.close()


def test_without_a_stored_strategy_the_engine_uses_single(tmp_path: Path) -> None:
    registry = Registry.open(tmp_path / "reg.sqlite3")
    engine = Engine(FakeUpstream(["hi"], key="http://up/v1"), mode="force", registry=registry)
    turn = engine.turn(
        {"model": "m", "messages": [{"role": "user", "content": "?"}], "tools": TOOLS}
    )
    assert turn.strategy is Strategy.SINGLE
    registry.close()


def test_run_uses_the_stored_preference(tmp_path: Path) -> None:
    agent = tmp_path / "agent.toml"
    agent.write_text(
        '[[phases]]\nname = "ask"\ninstructions = "Answer."\ntools = ["current_time"]\n'
    )
    fake = FakeUpstream(["[]", "It is noon."], models=["m"])
    path = tmp_path / "reg.sqlite3"
    with serve_fake(fake) as server:
        store_eval_pick(path, server.base_url, "m")
        result = CliRunner().invoke(
            app,
            [
                *("run", str(agent), "--input", "what time?", "--upstream", server.base_url),
                *("--mode", "force", "--registry", str(path), "--verbose"),
            ],
        )
    assert result.exit_code == 0, result.output
    system = fake.history[0]["messages"][0]["content"]
    assert PYTHONIC in system and DECISION in system
    assert "(pythonic)" in result.stderr
