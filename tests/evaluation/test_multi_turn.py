"""BFCL's multi-turn categories: the bridge, the conversation runner, its report and the CLI,
against scripted models that do (or fail to do) what BFCL's answers say."""

from __future__ import annotations

import ast
import asyncio
import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from toolshim.cli.main import app
from toolshim.errors import ConfigError
from toolshim.evaluation import INSTALL_COMMAND, bfcl_available
from toolshim.evaluation.bfcl_multi_turn import (
    MULTI_TURN_CATEGORIES,
    MultiTurnCase,
    Simulator,
    canonical_multi_turn,
    load_multi_turn,
    load_multi_turn_cases,
    score_multi_turn,
)
from toolshim.evaluation.multi_turn_report import (
    load_multi_turn_report,
    multi_turn_markdown,
    summarize_multi_turn,
    write_multi_turn_report,
)
from toolshim.evaluation.multi_turn_runner import MultiTurnRunner
from toolshim.evaluation.runner import EvalConfig
from toolshim.testing import FunctionUpstream, Reply, call
from toolshim.testing.server import serve_fake

needs_bfcl = pytest.mark.skipif(
    bfcl_available() is not None, reason=f"bfcl-eval is not usable: {bfcl_available()}"
)

TWO_TURNS = "multi_turn_base_13"
"""cd + tail in the first turn, diff in the second (BFCL's simulated file system)."""


def case(case_id: str) -> MultiTurnCase:
    category, _, number = case_id.rpartition("_")
    cases = load_multi_turn_cases([category], limit=int(number) + 1, seed=None)
    return next(c for c in cases if c.id == case_id)


def parsed(text: str, functions: list[Mapping[str, Any]]) -> tuple[str, dict[str, Any]]:
    """A ground-truth call string as (name, arguments), positional arguments named."""
    node = ast.parse(text, mode="eval").body
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    doc = next(f for f in functions if f["name"] == node.func.id)
    names = list(doc["parameters"]["properties"])
    arguments = {names[i]: ast.literal_eval(a) for i, a in enumerate(node.args)}
    arguments.update({k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg})
    return node.func.id, arguments


class Scripted:
    """A model for one case: at each user turn it makes that turn's calls in one step (or
    ``wrong`` ones), and after the results it says it is done. Native requests get native
    ``tool_calls``; BFCL's prompt gets Python calls; toolshim's emulation gets JSON calls."""

    def __init__(self, case: MultiTurnCase, *, wrong: bool = False) -> None:
        self.case = case
        self.wrong = wrong
        self.functions = [*case.functions, *(f for fs in case.held_out.values() for f in fs)]

    def __call__(self, body: dict[str, Any]) -> Any:
        last = str(body["messages"][-1].get("content") or "")
        turn = next(
            (i for i, t in enumerate(self.case.turns) if t and str(t[0]["content"]) == last),
            None,
        )
        if turn is None or body["messages"][-1]["role"] != "user":
            return "Done."
        truth = list(self.case.ground_truth[turn])
        if self.wrong:
            truth = ["ls(a=True)"]
        calls = [parsed(text, self.functions) for text in truth]
        system = " ".join(str(m["content"]) for m in body["messages"] if m["role"] == "system")
        if body.get("tools"):
            return Reply(None, [call(name, arguments) for name, arguments in calls])
        if "You are an expert in composing functions" in system:
            return "[" + ", ".join(truth) + "]"
        return json.dumps({"tool_calls": [{"name": n, "arguments": a} for n, a in calls]})


CONFIGS = [EvalConfig.parse(c) for c in ("native", "bfcl-prompt", "force:json")]


def run(case: MultiTurnCase, *, wrong: bool = False, **options: Any) -> list[Any]:
    upstream = FunctionUpstream(Scripted(case, wrong=wrong), tools="native")
    runner = MultiTurnRunner(upstream, "scripted", CONFIGS, **options)
    return asyncio.run(runner.run([case]))


@needs_bfcl
def test_categories_and_the_alias() -> None:
    assert canonical_multi_turn(["multi_turn"]) == list(MULTI_TURN_CATEGORIES)
    with pytest.raises(ConfigError, match=r"unknown BFCL multi-turn category.*multi_turn_base"):
        canonical_multi_turn(["multi_turn_composite"])
    cases = load_multi_turn_cases(["multi_turn_miss_func"], limit=3, seed=None)
    assert [c.id for c in cases] == [f"multi_turn_miss_func_{i}" for i in range(3)]
    assert all(c.held_out for c in cases)
    first = cases[0]
    (turn, docs), *_ = first.held_out.items()
    assert first.turns[turn] == () and {d["name"] for d in docs}.isdisjoint(
        f["name"] for f in first.functions
    )


@needs_bfcl
def test_simulators_keep_state_per_run_and_are_removed() -> None:
    c = case(TWO_TURNS)
    before = len(load_multi_turn().instances)
    with Simulator(c, "a") as one, Simulator(c, "b") as two:
        assert "documents" in one.execute(["ls()"])[0]
        one.execute(["cd(folder='documents')"])
        assert "report.txt" in one.execute(["ls()"])[0]
        assert "report.txt" not in two.execute(["ls()"])[0]
    assert len(load_multi_turn().instances) == before


@needs_bfcl
def test_a_model_that_performs_a_two_turn_case_passes_in_every_configuration() -> None:
    c = case(TWO_TURNS)
    assert len(c.turns) == 2
    records = run(c)
    assert [r.config for r in records] == ["native", "bfcl-prompt", "force:json"]
    for record in records:
        assert record.valid, (record.config, record.error)
        assert record.failure is None and record.turns == 2
        assert record.steps == 4  # the calls, then "Done.", in each turn
        assert record.llm_calls >= 4 and record.seconds > 0
        made = [[c.replace(" ", "") for c in turn[0]["calls"]] for turn in record.trace]
        assert made == [list(calls) for calls in c.ground_truth]
        assert "Done." in str(record.trace[1][1]["text"])


@needs_bfcl
def test_a_model_that_does_something_else_fails_with_bfcls_reason() -> None:
    records = run(case(TWO_TURNS), wrong=True)
    for record in records:
        assert not record.valid
        assert record.failure in {"state_mismatch", "response_mismatch"}, record.failure
        assert record.error


@needs_bfcl
def test_a_model_that_only_talks_fails_on_an_empty_turn() -> None:
    c = case(TWO_TURNS)
    upstream = FunctionUpstream(lambda body: "Sure, done.", tools="native")
    runner = MultiTurnRunner(upstream, "talker", CONFIGS[:2])
    for record in asyncio.run(runner.run([c])):
        assert not record.valid and record.failure == "empty_turn"
        assert record.steps == 2 and record.llm_calls == 2


@needs_bfcl
def test_a_model_that_never_stops_calling_is_force_quit() -> None:
    c = case(TWO_TURNS)
    upstream = FunctionUpstream(lambda body: Reply(None, [call("pwd")]), tools="native")
    runner = MultiTurnRunner(upstream, "looper", CONFIGS[:1], max_steps=3)
    (record,) = asyncio.run(runner.run([c]))
    assert not record.valid and record.failure == "force_quit"
    assert record.turns == 1 and record.steps == 4


@needs_bfcl
def test_the_checker_is_bfcls() -> None:
    c = case(TWO_TURNS)
    right = [
        [[{n: json.dumps(a)} for n, a in (parsed(t, list(c.functions)) for t in turn)]]
        for turn in c.ground_truth
    ]
    assert score_multi_turn(c, right, decoder="fc").valid
    short = score_multi_turn(c, right[:1], decoder="fc")
    assert not short.valid and short.error_type == "multi_turn:force_terminated"
    prompt = [["[" + ", ".join(turn) + "]"] for turn in c.ground_truth]
    assert score_multi_turn(c, prompt, decoder="prompt").valid
    assert not score_multi_turn(c, [["hello"], ["[ls()]"]], decoder="prompt").valid


@needs_bfcl
def test_the_report_has_cost_beside_accuracy(tmp_path: Path) -> None:
    records = run(case(TWO_TURNS))
    path = tmp_path / "mt.json"
    write_multi_turn_report(path, {"model": "scripted"}, records)
    meta, again = load_multi_turn_report(path)
    assert meta["model"] == "scripted" and [r.to_dict() for r in again] == [
        r.to_dict() for r in records
    ]
    (native, *_) = summarize_multi_turn(records)
    assert native.correct == 1 and native.llm_calls_per_turn == 2.0
    table = multi_turn_markdown(summarize_multi_turn(records))
    assert "calls/turn" in table and "| multi_turn_base | `native` | 1/1 (100%" in table


@needs_bfcl
def test_the_cli_runs_multi_turn_cases_and_resumes(tmp_path: Path) -> None:
    c = case(TWO_TURNS)
    output = tmp_path / "mt.json"
    args = [
        "eval",
        "--categories",
        "multi_turn_base",
        "--limit",
        "1",
        "--seed",
        "0",
        "--config",
        "force:json",
        "-o",
        str(output),
    ]
    # the seeded sample of one: whichever case it is, the scripted model knows it
    (sampled,) = load_multi_turn_cases(["multi_turn_base"], limit=1, seed=0)
    upstream = FunctionUpstream(Scripted(sampled), tools="native", models=["scripted-1"])
    with serve_fake(upstream) as server:
        result = CliRunner().invoke(
            app, [*args, "--upstream", server.base_url], env={"COLUMNS": "200"}
        )
    assert result.exit_code == 0, result.output
    report = json.loads(output.read_text())
    assert report["meta"]["configs"] == ["native", "bfcl-prompt", "force:json"]
    assert report["meta"]["max_steps"] == 20 and report["meta"]["max_tokens"] == 512
    assert {r["case_id"] for r in report["cases"]} == {sampled.id}
    assert all(r["valid"] for r in report["cases"]), report["cases"]
    assert f"{sampled.id} force:json ✓" in result.output  # progress per case
    for word in ("calls/turn", "prompt tokens", "s/case", "multi_turn_base"):
        assert word in result.stdout
    assert c.id  # the two-turn case loads through the same path

    with serve_fake(FunctionUpstream(Scripted(sampled), tools="native")) as server:
        again = CliRunner().invoke(
            app, [*args, "--upstream", server.base_url, "--resume"], env={"COLUMNS": "200"}
        )
    assert again.exit_code == 0, again.output
    assert "0 runs to do" in again.output
    assert len(json.loads(output.read_text())["cases"]) == 3


@needs_bfcl
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--categories", "multi_turn_base,simple"], "run apart from the single-turn ones"),
        (["--categories", "multi_turn_composite"], "unknown BFCL multi-turn category"),
        (["--categories", "multi_turn", "--apply"], "not multi-turn ones"),
    ],
)
def test_bad_multi_turn_options_are_one_line_errors(args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["eval", "--upstream", "http://127.0.0.1:9/v1", *args])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert "Traceback" not in result.output


def test_missing_bfcl_says_what_to_install_for_multi_turn() -> None:
    code = (
        "import sys; sys.modules['bfcl_eval'] = None; "
        "sys.argv = ['toolshim', 'eval', '--upstream', 'http://127.0.0.1:9/v1', "
        "'--categories', 'multi_turn_base']; "
        "from toolshim.cli.main import main; main()"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 2, done.stderr
    assert INSTALL_COMMAND in " ".join(done.stderr.split())
    assert "Traceback" not in done.stderr


@needs_bfcl
def test_held_out_functions_arrive_at_their_turn_with_bfcls_message() -> None:
    (c,) = load_multi_turn_cases(["multi_turn_miss_func"], limit=1, seed=None)
    (turn, docs), *_ = c.held_out.items()
    held = {d["name"] for d in docs}
    seen: list[tuple[str, set[str], str]] = []

    def model(body: dict[str, Any]) -> Any:
        last = body["messages"][-1]
        names = {t["function"]["name"] for t in body.get("tools") or []}
        system = " ".join(str(m["content"]) for m in body["messages"] if m["role"] == "system")
        seen.append((str(last["content"]), names, system))
        return "Nothing to do."

    upstream = FunctionUpstream(model, tools="native")
    runner = MultiTurnRunner(upstream, "m", CONFIGS[:2])
    asyncio.run(runner.run([c]))
    native, prompt = seen[: len(c.turns)], seen[len(c.turns) :]
    for index, (_, names, _) in enumerate(native):
        assert (held <= names) == (index >= turn), index
    assert native[turn][0] == load_multi_turn().additional_function_prompt_fc
    # BFCL's prompt mode: the docs in the user message, the system prompt left as it was
    assert all(name in prompt[turn][0] for name in held)
    assert not any(name in prompt[turn][2] for name in held)
