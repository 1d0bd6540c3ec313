"""``toolshim models …`` through typer's CliRunner, against real HTTP servers on 127.0.0.1."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from tests.capabilities.fake_servers import FakeModel, closed_port_url, fake_server
from toolshim.capabilities.facts import Source
from toolshim.capabilities.registry import Registry
from toolshim.cli.main import app

runner = CliRunner()


@pytest.fixture
def registry_path() -> Path:
    """The private store tests/conftest.py points TOOLSHIM_REGISTRY at."""
    return Path(os.environ["TOOLSHIM_REGISTRY"])


def run(*args: str, env: dict[str, str] | None = None) -> Result:
    return runner.invoke(app, list(args), env=env)


def run_json(*args: str, env: dict[str, str] | None = None) -> Any:
    result = run(*args, "--json", env=env)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def one_line_error(result: Result) -> str:
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.stderr
    assert result.stderr.strip().splitlines()[-1] == errors[0]
    return errors[0]


def test_the_models_group_is_part_of_toolshim() -> None:
    assert "models" in run("--help").stdout
    help_text = run("models", "--help").stdout
    for command in ("list", "show", "set", "probe", "forget", "refresh"):
        assert command in help_text
    assert "--tools" in run("models", "set", "--help").stdout


def test_show_names_the_source_of_every_fact(registry_path: Path) -> None:
    data = run_json("models", "show", "gemma3:1b")
    assert data["registry"] == str(registry_path)
    assert data["family"] == "gemma3"
    tools = data["facts"]["native_tools"]
    assert (tools["value"], tools["source"], tools["scope"]) == ("no", "profile", "shipped profile")
    assert "ollama.com/library/gemma3" in tools["detail"]
    assert any("emulated" in line for line in data["treatment"])


def test_set_stores_a_user_fact_that_wins_and_show_explains_it(registry_path: Path) -> None:
    data = run_json(
        "models",
        "set",
        "gemma3:1b",
        "--tools",
        "yes",
        "--dialect",
        "hermes",
        "--note",
        "custom template with tools",
    )
    tools = data["facts"]["native_tools"]
    assert (tools["value"], tools["source"], tools["scope"]) == ("yes", "user", "any upstream")
    assert tools["detail"] == "custom template with tools"
    assert [o["source"] for o in tools["overridden"]] == ["profile"]
    assert data["dialect"] == "hermes"
    text = run("models", "show", "gemma3:1b").stdout
    assert "user" in text and "overridden" in text and "profile" in text
    assert "custom template with tools" in text
    assert "auto: tools are sent natively" in text
    stored = Registry.open(registry_path).fact("http://any/v1", "gemma3:1b", "native_tools")
    assert stored is not None and stored.source is Source.USER


def test_set_for_one_upstream_only(registry_path: Path) -> None:
    run_json("models", "set", "custom", "--tools", "no", "--upstream", "127.0.0.1:11434")
    registry = Registry.open(registry_path)
    assert registry.native_tools("http://127.0.0.1:11434/v1", "custom").value == "no"
    assert registry.fact("http://127.0.0.1:8080/v1", "custom", "native_tools") is None
    data = run_json("models", "show", "custom", "--upstream", "http://127.0.0.1:11434/v1")
    assert data["facts"]["native_tools"]["scope"] == "this upstream"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["models", "set", "m"], "nothing to set"),
        (["models", "set", "m", "--tools", "maybe"], "yes, no or unknown"),
        (["models", "set", "m", "--dialect", "klingon"], "available: "),
        (["models", "set", "m", "--context-window", "0"], "positive"),
        (["models", "forget", "m", "--source", "rumour"], "known: user, probe"),
        (["models", "forget", "m", "--fact", "colour"], "known facts: native_tools"),
        (["models", "probe", "m"], "needs an upstream"),
        (["models", "refresh"], "needs an upstream"),
    ],
)
def test_mistakes_are_one_clear_line(args: list[str], message: str) -> None:
    assert message in one_line_error(run(*args, env={"TOOLSHIM_UPSTREAM": ""}))


def test_forget_brings_back_the_weaker_facts() -> None:
    run_json("models", "set", "gemma3:1b", "--tools", "yes")
    assert run_json("models", "forget", "gemma3:1b", "--source", "user")["removed"] == 1
    data = run_json("models", "show", "gemma3:1b")
    assert data["facts"]["native_tools"]["source"] == "profile"
    assert run_json("models", "forget", "gemma3:1b")["removed"] == 0


def test_list_without_an_upstream_shows_the_store() -> None:
    run_json("models", "set", "a-model", "--tools", "no")
    run_json("models", "set", "b-model", "--tools", "yes", "--upstream", "http://h:1/v1")
    rows = run_json("models", "list", env={"TOOLSHIM_UPSTREAM": ""})["models"]
    assert [(r["model"], r["upstream"], r["native_tools"]["value"]) for r in rows] == [
        ("a-model", "any", "no"),
        ("b-model", "http://h:1/v1", "yes"),
    ]


def ollama_models() -> list[FakeModel]:
    return [
        FakeModel("qwen2.5:7b", chat="tools"),
        FakeModel(
            "gemma3:1b",
            capabilities=["completion", "vision"],
            chat="reject",
            parameter_size="999.89M",
        ),
        FakeModel("custom-model:latest", chat="text"),
        FakeModel("broken:1", show="error"),
    ]


def test_list_shows_the_upstreams_models_with_status_and_source() -> None:
    with fake_server("ollama", *ollama_models()) as server:
        run_json("models", "set", "deleted:1", "--tools", "no", "--upstream", server.base_url)
        data = run_json("models", "list", "--upstream", server.base_url)
        text = run("models", "list", "--upstream", server.base_url).stdout
    assert data["server"] == "ollama"
    rows = {r["model"]: r for r in data["models"]}
    assert rows.pop("deleted:1")["listed"] is False  # stored, no longer listed
    assert set(rows) == {"qwen2.5:7b", "gemma3:1b", "custom-model:latest", "broken:1"}
    assert rows["qwen2.5:7b"]["native_tools"]["source"] == "profile"
    assert rows["custom-model:latest"]["native_tools"] == {
        "value": "unknown",
        "source": None,
        "learned_at": None,
    }
    assert all(r["listed"] for r in rows.values())
    assert "5 models at" in text and "(not listed)" in text
    assert "toolshim models refresh" in text


def test_refresh_reads_the_upstream_and_reports_what_failed(registry_path: Path) -> None:
    with fake_server("ollama", *ollama_models()) as server:
        result = run("models", "refresh", "--upstream", server.base_url)
        listed = run_json("models", "list", "--upstream", server.base_url)
        key = server.base_url
    assert result.exit_code == 0, result.output
    assert "ollama at" in result.stdout and "facts stored (source upstream)" in result.stdout
    assert "could not read" in result.stdout and "broken:1" in result.stdout
    assert "[4] " in result.stderr  # progress, one line per model
    rows = {r["model"]: r for r in listed["models"]}
    assert rows["gemma3:1b"]["native_tools"]["source"] == "upstream"
    assert rows["gemma3:1b"]["dialect"] == "compact"
    assert rows["qwen2.5:7b"]["context_window"] == 32768
    registry = Registry.open(registry_path)
    fact = registry.fact(key, "custom-model", "tool_choice")
    assert fact is not None and fact.value == "no" and "ollama/ollama#8421" in fact.detail


def test_refresh_json_and_an_unreachable_upstream() -> None:
    with fake_server("ollama", FakeModel("a:1")) as server:
        data = run_json("models", "refresh", "--upstream", server.base_url, "--model", "a:1")
    assert data["server"] == "ollama" and data["stored"] == 3 and data["problems"] == []
    line = one_line_error(
        run("models", "refresh", "--upstream", closed_port_url(), "--timeout", "1")
    )
    assert "could not reach the upstream at http://127.0.0.1:" in line


def test_probe_classifies_and_stores_only_conclusive_results(registry_path: Path) -> None:
    with fake_server("ollama", *ollama_models()) as server:
        env = {"TOOLSHIM_UPSTREAM": server.base_url}
        rejected = run_json("models", "probe", "gemma3:1b", env=env)
        native = run("models", "probe", "qwen2.5:7b", env=env)
        chatty = run_json("models", "probe", "custom-model:latest", env=env)
        unsaved = run_json(
            "models",
            "probe",
            "qwen2.5:7b",
            "--no-save",
            "--upstream",
            "http://127.0.0.1:9/v1",
            "--timeout",
            "1",
        )
        key = server.base_url
    assert rejected["outcome"] == "unsupported" and rejected["saved"]
    assert rejected["native_tools"]["source"] == "probe"
    assert native.exit_code == 0 and "supported" in native.stdout
    assert "probing qwen2.5:7b" in native.stderr
    assert chatty["outcome"] == "inconclusive" and not chatty["saved"]
    assert unsaved["outcome"] == "inconclusive" and not unsaved["saved"]
    registry = Registry.open(registry_path)
    assert registry.fact(key, "gemma3:1b", "native_tools").source is Source.PROBE  # type: ignore[union-attr]
    assert registry.fact(key, "qwen2.5:7b", "native_tools").source is Source.PROBE  # type: ignore[union-attr]
    assert registry.fact(key, "custom-model", "native_tools") is None


def test_a_corrupt_registry_is_reported_moved_aside_and_rebuilt(tmp_path: Path) -> None:
    path = tmp_path / "broken.sqlite3"
    path.write_bytes(b"\x00garbage" * 500)
    result = run("models", "set", "m", "--tools", "no", "--registry", str(path), "--json")
    assert result.exit_code == 0, result.output
    assert "was corrupt" in result.stderr and "moved it to" in result.stderr
    assert json.loads(result.stdout)["facts"]["native_tools"]["value"] == "no"
    assert list(tmp_path.glob("broken.sqlite3.corrupt-*"))


@pytest.fixture
def embedded_facts(monkeypatch: pytest.MonkeyPatch, registry_path: Path) -> str:
    """What a run on the embedded model records (the real path, over a scripted upstream)."""
    from rich.console import Console

    from tests.e2e.fake_local import FakeEmbeddedServer, install
    from toolshim.cli._common import upstream_target

    install(monkeypatch.setattr)
    monkeypatch.setattr(FakeEmbeddedServer, "model_name", "house-model")
    monkeypatch.setattr(FakeEmbeddedServer, "facts", {"native_tools": "no", "context_window": 8192})
    with upstream_target(None, None, Registry.open(registry_path), Console(quiet=True)) as target:
        return target.key


def test_the_embedded_models_facts_are_listed_under_its_key(embedded_facts: str) -> None:
    assert embedded_facts == "embedded://default.gguf"
    rows = run_json("models", "list", env={"TOOLSHIM_UPSTREAM": ""})["models"]
    assert [(r["model"], r["upstream"]) for r in rows] == [("house-model", embedded_facts)]
    assert (rows[0]["native_tools"]["value"], rows[0]["native_tools"]["source"]) == (
        "no",
        "upstream",
    )
    assert rows[0]["context_window"] == 8192
    table = run("models", "list", env={"TOOLSHIM_UPSTREAM": "", "COLUMNS": "200"}).stdout
    assert "embedded://default.gguf" in table and "house-model" in table
    # Asked by its key, nothing is contacted: the stored facts are shown.
    data = run_json("models", "list", "--upstream", embedded_facts)
    assert data["upstream"] == embedded_facts and "stored facts only" in data["server"]
    assert [(r["model"], r["listed"]) for r in data["models"]] == [("house-model", None)]


def test_the_embedded_models_facts_are_shown_and_forgotten_by_its_key(
    embedded_facts: str,
) -> None:
    report = run_json("models", "show", "house-model", "--upstream", embedded_facts)
    tools = report["facts"]["native_tools"]
    assert (tools["value"], tools["source"], tools["scope"]) == ("no", "upstream", "this upstream")
    assert tools["detail"] == "embedded llama.cpp server (default.gguf)"
    assert report["upstream"] == embedded_facts
    text = run("models", "show", "house-model", "--upstream", embedded_facts).stdout
    assert f"house-model at {embedded_facts}" in text
    forgot = run_json("models", "forget", "house-model", "--upstream", embedded_facts)
    assert forgot["removed"] == 2
    assert run_json("models", "list", env={"TOOLSHIM_UPSTREAM": ""})["models"] == []


@pytest.mark.parametrize("command", ["probe", "refresh"])
def test_commands_that_ask_a_server_refuse_the_embedded_key(
    embedded_facts: str, command: str
) -> None:
    args = ["models", command, *(["house-model"] if command == "probe" else [])]
    message = one_line_error(run(*args, "--upstream", embedded_facts))
    assert "needs the URL of a running server, not the embedded model's registry key" in message


def test_show_says_where_each_preference_came_from_and_the_markup(registry_path: Path) -> None:
    """An eval's pick is shown with its source, score and date; the family's markup too."""
    registry = Registry.open(registry_path)
    detail = "eval 2026-11-26: combined 61% (BFCL 64% on 64 cases, agent 58% on 70 tasks)"
    for name, value in (("dialect", "pythonic"), ("strategy", "single"), ("constrain", "no")):
        registry.learn("*", "qwen2.5-coder:7b", name, value, Source.EVAL, detail=detail)
    registry.flush()
    registry.close()
    data = run_json("models", "show", "qwen2.5-coder:7b")
    dialect = data["facts"]["dialect"]
    assert (dialect["value"], dialect["source"], dialect["detail"]) == ("pythonic", "eval", detail)
    assert [o["source"] for o in dialect["overridden"]] == ["profile"]  # hermes, from the table
    assert data["facts"]["strategy"]["source"] == "eval"
    assert data["facts"]["markup"]["value"] == "hermes"
    assert data["facts"]["markup"]["source"] == "profile"
    assert data["dialect"] == "pythonic"
    text = run("models", "show", "qwen2.5-coder:7b").stdout
    assert "markup" in text and "hermes" in text
    lines = [line.strip() for line in text.splitlines()]
    pick = next(line for line in lines if line.startswith("dialect: pythonic"))
    assert "source eval" in pick and "combined 61%" in pick and "2026-11-26" in pick
    assert any(line.startswith("constrain: no (source eval") for line in lines)


def test_set_stores_strategy_and_constrain() -> None:
    data = run_json("models", "set", "m", "--strategy", "decision", "--constrain", "no")
    assert data["facts"]["strategy"]["value"] == "decision"
    assert data["facts"]["constrain"]["value"] == "no"
    assert "strategy must be one of single, decision" in one_line_error(
        run("models", "set", "m", "--strategy", "twice")
    )


@pytest.mark.parametrize("fact", ["prefill", "doubt"])
def test_set_stores_a_yes_no_fact(fact: str) -> None:
    data = run_json("models", "set", "m", f"--{fact}", "yes")
    assert (data["facts"][fact]["value"], data["facts"][fact]["source"]) == ("yes", "user")
    assert f"{fact} must be yes, no or unknown" in one_line_error(
        run("models", "set", "m", f"--{fact}", "sometimes")
    )
