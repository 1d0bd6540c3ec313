"""Picking the configuration to serve a model with: the combined score, ``eval --apply``, the shipped picks."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolshim.capabilities.facts import Source
from toolshim.capabilities.registry import Registry
from toolshim.capabilities.shipped_picks import SHIPPED_PREFIX, shipped_picks
from toolshim.cli.main import app
from toolshim.errors import ConfigError
from toolshim.evaluation import CaseRecord, EvalConfig, load_report, write_report
from toolshim.evaluation.agent_report import load_agent_report, write_agent_report
from toolshim.evaluation.agent_runner import AgentRecord
from toolshim.evaluation.pick import config_settings, pick_configuration, resolve_settings
from toolshim.local import KNOWN_MODELS
from toolshim.local.server import EmbeddedServer

REPO = Path(__file__).resolve().parents[2]
META = {"upstream": "http://127.0.0.1:9/v1", "model": "m", "finished": "2026-11-20T10:00:00"}


def bfcl_records(scores: dict[str, list[bool]]) -> list[CaseRecord]:
    """One record per (case, configuration): ``scores[config][i]`` says whether case i was right."""
    return [
        CaseRecord(f"simple_{i}", "simple_python", config, ok, True, True, 1, 0.1)
        for config, results in scores.items()
        for i, ok in enumerate(results)
    ]


def agent_records(scores: dict[str, list[bool]]) -> list[AgentRecord]:
    return [
        AgentRecord(f"task_{i}", "one_call", "text", config, ok, None if ok else "hang", 1, 1)
        for config, results in scores.items()
        for i, ok in enumerate(results)
    ]


def write_reports(
    tmp_path: Path, bfcl: dict[str, list[bool]] | None, agent: dict[str, list[bool]] | None
) -> tuple[Path, Path]:
    """Real JSON reports, as `toolshim eval` writes them."""
    bfcl_path, agent_path = tmp_path / "bfcl.json", tmp_path / "agent.json"
    if bfcl is not None:
        write_report(bfcl_path, META, bfcl_records(bfcl))
    if agent is not None:
        write_agent_report(agent_path, {**META, "suite": "agent"}, agent_records(agent))
    return bfcl_path, agent_path


SINGLE_CALL_WINNER = {
    # hermes wins BFCL's single calls, but never closes the loop: pythonic is the best overall
    "bfcl": {
        "native": [False] * 4,
        "force:hermes": [True, True, True, True],
        "force:pythonic": [True, True, True, False],
        "force:json": [True, False, False, False],
    },
    "agent": {
        "native": [False] * 4,
        "force:hermes": [False, False, False, False],
        "force:pythonic": [True, True, False, False],
        "force:json": [True, True, True, True],
    },
}


def test_a_configuration_that_cannot_close_the_loop_is_not_the_best(tmp_path: Path) -> None:
    bfcl_path, agent_path = write_reports(
        tmp_path, SINGLE_CALL_WINNER["bfcl"], SINGLE_CALL_WINNER["agent"]
    )
    pick = pick_configuration(load_report(bfcl_path), load_agent_report(agent_path))
    scores = {c.config: (c.bfcl, c.agent, c.score) for c in pick.candidates}
    assert scores == {
        "force:hermes": (1.0, 0.0, 0.5),
        "force:pythonic": (0.75, 0.5, 0.625),
        "force:json": (0.25, 1.0, 0.625),
    }
    # a tie on the combined score goes to the better agent score
    assert pick.best.config == "force:json"
    assert [c.config for c in pick.candidates] == ["force:json", "force:pythonic", "force:hermes"]
    assert pick.facts() == {
        "dialect": "json",
        "strategy": "single",
        "constrain": "no",
        "doubt": "no",
    }
    assert pick.basis == "bfcl+agent" and pick.date == "2026-11-20"
    assert "native" not in scores  # baselines are not settings toolshim can serve with


def test_at_equal_accuracy_the_configuration_with_fewer_llm_calls_wins(tmp_path: Path) -> None:
    same = {"force:json": [True, False], "force:hermes": [True, False]}
    bfcl_path, agent_path = write_reports(tmp_path, same, same)
    bfcl, agent = load_report(bfcl_path), load_agent_report(agent_path)
    # json spends 3 LLM calls on each agent task, hermes 1: equal scores, hermes first.
    agent = (
        agent[0],
        [replace(r, llm_calls=3 if r.config == "force:json" else 1) for r in agent[1]],
    )
    pick = pick_configuration(bfcl, agent)
    assert pick.best.config == "force:hermes"
    assert {c.config: c.llm_calls for c in pick.candidates} == {
        "force:hermes": 1.0,
        "force:json": 2.0,
    }
    cheap_json = (agent[0], [replace(r, llm_calls=1) for r in agent[1]])
    assert pick_configuration(bfcl, cheap_json).best.config == "force:hermes"  # then the label


def kinded_agent_records(scores: dict[str, dict[str, list[bool]]]) -> list[AgentRecord]:
    """``scores[config][kind][i]``: whether task i of that kind was answered right."""
    return [
        AgentRecord(f"{kind}_{i}", kind, "text", config, ok, None if ok else "wrong_answer", 1, 1)
        for config, kinds in scores.items()
        for kind, results in kinds.items()
        for i, ok in enumerate(results)
    ]


# The 0.5B's case, in small: pythonic wins the mean on BFCL's parallel calls and agent tasks
# of two calls, but misses one-call tasks an agent meets most (5 of 10, below the bar of 80%).
LOOP_BAR_BFCL = {"force:hermes": [True] * 5 + [False] * 5, "force:pythonic": [True] * 9 + [False]}
LOOP_BAR_AGENT = {
    "force:hermes": {"one_call": [True] * 9 + [False], "two_independent": [False] * 10},
    "force:pythonic": {"one_call": [True] * 5 + [False] * 5, "two_independent": [True] * 10},
}


def test_a_configuration_below_the_loop_bar_ranks_below_those_that_reach_it(
    tmp_path: Path,
) -> None:
    bfcl_path = tmp_path / "bfcl.json"
    write_report(bfcl_path, META, bfcl_records(LOOP_BAR_BFCL))
    agent = ({**META, "suite": "agent"}, kinded_agent_records(LOOP_BAR_AGENT))
    pick = pick_configuration(load_report(bfcl_path), agent)
    by = {c.config: c for c in pick.candidates}
    assert (by["force:pythonic"].score, by["force:pythonic"].one_call) == (0.825, 0.5)
    assert (by["force:hermes"].score, by["force:hermes"].one_call) == (0.475, 0.9)
    assert by["force:pythonic"].meets_loop_bar is False and by["force:hermes"].meets_loop_bar
    assert pick.best.config == "force:hermes"  # lower combined score, but it closes the loop
    assert pick.as_dict()["one_call"] == 0.9
    assert "force:pythonic (82% combined, one-call 50%) scored higher" in pick.detail()

    # when no configuration reaches the bar, the combined score decides and says so
    below = {c: {**k, "one_call": [True] * 5 + [False] * 5} for c, k in LOOP_BAR_AGENT.items()}
    pick = pick_configuration(load_report(bfcl_path), (agent[0], kinded_agent_records(below)))
    assert pick.best.config == "force:pythonic"
    assert "no configuration reached 80% of one-call agent tasks" in pick.detail()

    # an agent report without one-call tasks: the bar is not judged
    none = {c: {"two_independent": k["two_independent"]} for c, k in LOOP_BAR_AGENT.items()}
    pick = pick_configuration(load_report(bfcl_path), (agent[0], kinded_agent_records(none)))
    assert pick.best.config == "force:pythonic" and pick.best.one_call is None
    assert pick.loop_bar_note() is None


def test_configurations_are_compared_on_the_cases_every_one_finished(tmp_path: Path) -> None:
    bfcl = {"force:json": [True, True, False, False], "force:hermes": [False, True]}
    agent = {"force:json": [False], "force:hermes": [True], "force:compact": [True]}
    bfcl_path, agent_path = write_reports(tmp_path, bfcl, agent)
    pick = pick_configuration(load_report(bfcl_path), load_agent_report(agent_path))
    by = {c.config: c for c in pick.candidates}
    assert (by["force:json"].bfcl, by["force:json"].bfcl_cases) == (1.0, 2)  # not 0.5 of 4
    assert (by["force:hermes"].bfcl, by["force:hermes"].agent) == (0.5, 1.0)
    assert pick.best.config == "force:hermes"
    assert pick.left_out == (("force:compact", "in the agent report only"),)


def test_a_label_that_ran_with_different_settings_in_each_report_is_not_judged(
    tmp_path: Path,
) -> None:
    bfcl_path, agent_path = write_reports(
        tmp_path, {"force:json": [True], "auto": [True]}, {"force:json": [True], "auto": [True]}
    )
    bfcl, agent = load_report(bfcl_path), load_agent_report(agent_path)
    ran = {"mode": "auto", "strategy": "single", "constrain": False}
    bfcl_meta = {**bfcl[0], "settings": {"auto": {**ran, "dialect": "hermes"}}}
    agent_meta = {**agent[0], "settings": {"auto": {**ran, "dialect": "pythonic"}}}
    pick = pick_configuration((bfcl_meta, bfcl[1]), (agent_meta, agent[1]))
    assert [c.config for c in pick.candidates] == ["force:json"]
    assert pick.left_out == (("auto", "it ran with different settings in the two reports"),)


def test_nothing_to_judge_on_is_refused_with_what_is_missing(tmp_path: Path) -> None:
    bfcl_path, agent_path = write_reports(
        tmp_path, {"force:json": [True]}, {"native": [True], "auto+served": [True]}
    )
    bfcl, agent = load_report(bfcl_path), load_agent_report(agent_path)
    with pytest.raises(ConfigError, match="no agent report: the pick is judged on the BFCL and"):
        pick_configuration(bfcl, None)
    with pytest.raises(ConfigError, match="no BFCL report and no agent report"):
        pick_configuration(None, None)
    with pytest.raises(ConfigError, match=r"no toolshim configuration is in both reports"):
        pick_configuration(bfcl, agent)
    other = load_agent_report(agent_path)
    with pytest.raises(ConfigError, match="different models"):
        pick_configuration(bfcl, ({**other[0], "model": "n"}, other[1]))
    one = pick_configuration(bfcl, None, allow_one_suite=True)
    assert (one.basis, one.missing) == ("bfcl only", "no agent report for this model")
    assert "bfcl only" in one.detail()


def test_apply_prints_the_scores_and_stores_the_pick(tmp_path: Path) -> None:
    bfcl_path, agent_path = write_reports(
        tmp_path, SINGLE_CALL_WINNER["bfcl"], SINGLE_CALL_WINNER["agent"]
    )
    store = tmp_path / "reg.sqlite3"
    args = ["eval", "--report-only", "-o", str(bfcl_path), "--chart", str(tmp_path / "c.png")]
    args += ["--other-report", str(agent_path), "--apply", "--registry", str(store)]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for text in ("force:json", "25.0% of 4", "100.0% of 4", "62.5%", "force:hermes", "50.0%"):
        assert text in result.stdout
    assert "one-call (bar 80%)" in result.stdout and "50% (below)" in result.stdout
    assert "Picked force:json: combined 62% (BFCL 25% on 4 cases, agent 100% on 4 tasks)" in (
        result.stdout
    )
    assert "Stored for m at http://127.0.0.1:9/v1 (source eval" in result.stdout
    assert "mode force" in result.stdout  # the winner always emulated: said how to get that
    facts = Registry.open(store).facts("http://127.0.0.1:9/v1", "m")
    assert {n: (facts[n].value, facts[n].source) for n in ("dialect", "strategy", "constrain")} == {
        "dialect": ("json", Source.EVAL),
        "strategy": ("single", Source.EVAL),
        "constrain": ("no", Source.EVAL),
    }
    assert "eval 2026-11-20: force:json scored combined 62%" in facts["dialect"].detail
    assert str(bfcl_path) in facts["dialect"].detail

    # the same pick from the agent suite's side
    args = ["eval", "--suite", "agent", "--report-only", "-o", str(agent_path)]
    args += ["--other-report", str(bfcl_path), "--apply", "--registry", str(store)]
    again = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert again.exit_code == 0, again.output
    assert "Picked force:json" in again.stdout


def test_a_doubt_configuration_that_wins_is_applied_with_its_doubt(tmp_path: Path) -> None:
    """``+doubt`` is a configuration like any other: when it wins, ``--apply`` stores fact
    ``doubt`` with the rest (and ``no`` when a configuration without it wins)."""
    scores = {"force:json": [True, False, True, True], "force:json+doubt": [True] * 4}
    bfcl_path, agent_path = write_reports(tmp_path, scores, scores)
    store = tmp_path / "reg.sqlite3"
    args = ["eval", "--report-only", "-o", str(bfcl_path), "--chart", str(tmp_path / "c.png")]
    args += ["--other-report", str(agent_path), "--apply", "--registry", str(store)]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "Picked force:json+doubt" in result.stdout and "doubt" in result.stdout
    facts = Registry.open(store).facts("http://127.0.0.1:9/v1", "m")
    assert (facts["doubt"].value, facts["doubt"].source) == ("yes", Source.EVAL)

    # a report written before settings had doubt: read as without it
    meta, records = load_report(bfcl_path)
    ran = {"mode": "force", "dialect": "json", "strategy": "single", "constrain": False}
    pick = pick_configuration(
        ({**meta, "settings": {"force:json": ran}}, records[:4]), None, allow_one_suite=True
    )
    assert pick.facts()["doubt"] == "no"


@pytest.mark.parametrize(
    ("label", "held"),
    [
        ("force:json+constrain", True),
        ("force:hermes+constrain", False),
        ("force:pythonic+constrain", False),
        ("force:compact:decision+constrain", True),
        ("force:compact+constrain", False),
    ],
)
def test_constrain_is_stored_only_where_the_dialect_holds_replies_to_a_schema(
    label: str, held: bool
) -> None:
    """A dialect without a JSON Schema (hermes, pythonic) is sent unconstrained whatever
    ``constrain`` says: the pick says what took effect, from the settings a report recorded
    too (reports before this recorded the request)."""
    config = EvalConfig.parse(label)
    registry = Registry.open(":memory:")
    settings = config_settings(config, registry, "http://127.0.0.1:9/v1", "m")
    assert settings.constrain is held
    recorded = {**settings.as_dict(), "constrain": True}
    again = resolve_settings(label, {**META, "settings": {label: recorded}})
    assert again is not None and again.constrain is held


def test_apply_refuses_without_the_other_report_and_stores_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # where the other report's default file is looked for
    bfcl_path, _ = write_reports(tmp_path, SINGLE_CALL_WINNER["bfcl"], None)
    store = tmp_path / "reg.sqlite3"
    args = ["eval", "--report-only", "-o", str(bfcl_path), "--chart", str(tmp_path / "c.png")]
    args += ["--apply", "--registry", str(store)]
    result = CliRunner().invoke(app, [*args, "--other-report", str(tmp_path / "missing.json")])
    assert result.exit_code == 1
    assert "cannot read the agent report" in result.stderr and "nothing stored" in result.stderr
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1
    assert "no agent report (toolshim-agent-eval.json not found)" in result.stderr
    assert Registry.open(store).known() == []
    result = CliRunner().invoke(app, [*args, "--one-suite"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "Judged on one suite only: no agent report for this model." in result.stdout


def _docs_report(kind: str, name: str) -> Path | None:
    path = REPO / "docs" / f"{kind}-{name}.json"
    return path if path.is_file() else None


@pytest.mark.parametrize("name", sorted(KNOWN_MODELS))
def test_the_shipped_pick_is_what_apply_picks_from_the_reports_in_docs(name: str) -> None:
    """Regenerating a report (or adding the missing one) without updating
    src/toolshim/data/eval_picks.json fails here."""
    bfcl, agent = _docs_report("bfcl", name), _docs_report("agent", name)
    if bfcl is None and agent is None:
        assert name not in shipped_picks()
        return
    pick = pick_configuration(
        load_report(bfcl) if bfcl else None,
        load_agent_report(agent) if agent else None,
        names=(
            str(bfcl.relative_to(REPO)) if bfcl else "BFCL report",
            str(agent.relative_to(REPO)) if agent else "agent report",
        ),
        allow_one_suite=True,
    )
    expected = pick.as_dict()
    assert shipped_picks().get(name) == expected, (
        f"update src/toolshim/data/eval_picks.json: {name!r}: " + json.dumps(expected, indent=2)
    )


def test_the_embedded_model_is_recorded_with_its_shipped_pick(tmp_path: Path) -> None:
    known = KNOWN_MODELS["qwen2.5-coder-1.5b"]
    server = EmbeddedServer(tmp_path / known.filename)  # not started: its facts are known
    store = tmp_path / "reg.sqlite3"
    registry = Registry.open(store)
    stored = server.record_capabilities(registry)
    assert stored["dialect"] == shipped_picks()[known.name]["dialect"]
    registry.close()
    facts = Registry.open(store).facts(server.key, server.model)
    dialect = facts["dialect"]
    assert dialect.source is Source.EVAL and dialect.detail.startswith(SHIPPED_PREFIX)
    assert shipped_picks()[known.name]["detail"] in dialect.detail  # its scores, its reports
    assert facts["native_tools"].source is Source.UPSTREAM

    # a pick of the user's own --apply is kept on the next start
    registry = Registry.open(store)
    registry.learn(server.key, server.model, "dialect", "json", Source.EVAL, detail="eval mine")
    server.record_capabilities(registry)
    mine = registry.facts(server.key, server.model)["dialect"]
    assert (mine.value, mine.detail) == ("json", "eval mine")
    registry.close()
