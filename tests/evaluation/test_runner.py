"""The eval runner: configurations, the two baselines and toolshim through one scripted upstream."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.evaluation.conftest import OracleModel
from toolshim.capabilities import Registry, Source
from toolshim.errors import ConfigError, UpstreamStatusError
from toolshim.evaluation import EvalConfig, EvalRunner, bfcl_available, load_cases
from toolshim.evaluation.runner import interleave
from toolshim.testing import FunctionUpstream, Reply, opening_logprobs

pytestmark = pytest.mark.skipif(
    bfcl_available() is not None, reason=f"bfcl-eval is not usable: {bfcl_available()}"
)

NATIVE = EvalConfig.parse("native")
PROMPT = EvalConfig.parse("bfcl-prompt")
FORCE_JSON = EvalConfig.parse("force:json")
BMI = "determine_body_mass_index"


def test_config_parsing_and_labels() -> None:
    assert NATIVE.kind == "native" and NATIVE.decoder == "fc"
    assert PROMPT.kind == "bfcl-prompt" and PROMPT.decoder == "prompt"
    assert EvalConfig.parse("force:pythonic").label == "force:pythonic"
    assert EvalConfig.parse("AUTO").label == "auto"
    assert EvalConfig.parse("auto::decision").label == "auto::decision"
    assert EvalConfig.parse("force:json:single") == EvalConfig.parse("force:json")
    with pytest.raises(ConfigError, match=r"unknown dialect 'klingon'; available: .*json"):
        EvalConfig.parse("force:klingon")
    with pytest.raises(ConfigError, match="unknown mode"):
        EvalConfig.parse("sometimes")
    with pytest.raises(ConfigError, match="bad configuration"):
        EvalConfig.parse("force:json:single:extra")
    constrained = EvalConfig.parse("force:json+constrain")
    assert constrained.constrain and not constrained.served
    assert constrained.label == "force:json+constrain"
    assert EvalConfig.parse("auto+served+constrain").label == "auto+constrain+served"
    assert EvalConfig.parse("auto+doubt+served").label == "auto+served+doubt"
    assert EvalConfig.parse("auto+served+doubt").doubt
    with pytest.raises(ConfigError, match="bad configuration 'auto\\+fast'"):
        EvalConfig.parse("auto+fast")


async def test_constrained_emulation_asks_for_a_json_schema() -> None:
    (case,) = load_cases(["simple"], limit=1, seed=None)
    upstream = FunctionUpstream(OracleModel([case]))
    runner = EvalRunner(upstream, "m", [EvalConfig.parse("force:json+constrain")])
    (record,) = await runner.run([case])
    (body,) = upstream.history
    assert body["response_format"]["type"] == "json_schema"
    assert "calculate_triangle_area" in json.dumps(body["response_format"])
    assert record.valid, record.error


async def test_served_configs_start_from_the_upstreams_own_facts() -> None:
    (case,) = load_cases(["simple"], limit=1, seed=None)
    upstream = FunctionUpstream(OracleModel([case]))
    served = EvalConfig.parse("auto+served")
    with pytest.raises(ConfigError, match="only the embedded model provides"):
        EvalRunner(upstream, "m", [served])

    def facts(registry: Registry) -> None:  # what EmbeddedServer records for Qwen
        registry.learn(upstream.key, "m", "native_tools", "no", Source.UPSTREAM)
        registry.learn(upstream.key, "m", "dialect", "hermes", Source.UPSTREAM)

    runner = EvalRunner(upstream, "m", [EvalConfig.parse("auto"), served], served_facts=facts)
    plain, seeded = await runner.run([case])
    first, second = upstream.history
    assert "tools" in first  # auto on an unknown upstream: native first
    assert "tools" not in second and "<tool_call>" in second["messages"][0]["content"]
    assert "tool calls emulated" in seeded.warnings
    assert seeded.valid, seeded.error
    # the oracle answers native requests in content, as Qwen does: auto rescues the call
    assert plain.valid and "tool calls recovered from content" in plain.warnings


async def test_a_doubt_configuration_answers_a_call_the_model_opened_unsure_of_without_tools() -> (
    None
):
    """``+doubt`` measures the opt-in fact: the first request asks for the opening's
    log-probabilities, and a call opened under the bar is answered without tools."""
    (case,) = load_cases(["irrelevance"], limit=1, seed=None)
    assert "triangle" in str(case.chat_messages()) and case.tools()[0]["function"]["name"] == BMI
    # the nearest tool, called with the question's own values: a valid call of no use
    call = json.dumps({"name": BMI, "arguments": {"weight": 10, "height": 5}})
    call = f"<tool_call>\n{call}\n</tool_call>"

    def unsure_model(body: dict[str, Any]) -> Reply:
        if "tools" not in body and "<tool_call>" not in json.dumps(body["messages"]):
            return Reply("No tool fits that question.")  # asked again, without tools
        alternatives = {"<tool_call>": 0.4, "No": 0.5, "I": 0.1}
        return Reply(call, logprobs=opening_logprobs("<tool_call>", alternatives))

    upstream = FunctionUpstream(unsure_model)
    plain, doubting = (EvalConfig.parse(f"force:hermes{flag}") for flag in ("", "+doubt"))
    runner = EvalRunner(upstream, "m", [plain, doubting])
    without, with_doubt = await runner.run([case])
    assert not without.valid and without.tool_calls  # the unsure call stands
    assert "logprobs" not in upstream.history[0]
    assert upstream.history[1]["logprobs"] is True
    assert with_doubt.valid and not with_doubt.tool_calls, with_doubt.error
    assert any("unsure a tool was needed" in w for w in with_doubt.warnings)
    doubting_registry = runner.engines[doubting].registry
    assert doubting_registry.supports(upstream.key, "m", "doubt")
    assert not doubting_registry.supports(upstream.key, "another-model", "doubt")
    assert not runner.engines[plain].registry.supports(upstream.key, "m", "doubt")


def test_interleave_alternates_categories() -> None:
    cases = load_cases(["simple", "irrelevance"], limit=3)
    assert [c.category for c in interleave(cases)] == ["simple_python", "irrelevance"] * 3


async def test_baselines_and_toolshim_on_the_same_cases() -> None:
    cases = load_cases(["simple", "parallel", "irrelevance"], limit=2)
    upstream = FunctionUpstream(OracleModel(cases))
    runner = EvalRunner(upstream, "fake-model", [NATIVE, PROMPT, FORCE_JSON], max_tokens=64)
    records = await runner.run(cases)
    assert len(records) == 3 * len(cases)
    assert upstream.calls == len(records)  # one request per run: no re-ask was needed
    by = {(r.case_id, r.config): r for r in records}
    for case in cases:
        native, prompt, force = (by[(case.id, c.label)] for c in (NATIVE, PROMPT, FORCE_JSON))
        if case.is_relevance:
            assert native.valid and prompt.valid and force.valid
            continue
        # The oracle answers natively the way Qwen does: fenced JSON in content, no tool_calls.
        assert not native.valid and native.well_formed is False and not native.tool_calls
        assert native.raw_output and native.raw_output.startswith("```json")
        assert prompt.valid, prompt.error
        assert force.valid, force.error
        assert force.well_formed and force.tool_calls and force.raw_output is None
        assert "tool calls emulated" in force.warnings
        assert force.parsed_calls and len(force.parsed_calls) == len(case.ground_truth or ())
    for record in records:
        assert record.llm_calls == 1
        assert record.latency_s >= 0
        assert record.prompt_tokens == 10 and record.completion_tokens


async def test_requests_carry_the_cases_tools_and_params() -> None:
    (case,) = load_cases(["simple"], limit=1, seed=None)
    upstream = FunctionUpstream(OracleModel([case], native_tool_calls=True))
    runner = EvalRunner(upstream, "m", [NATIVE, PROMPT, FORCE_JSON], temperature=0.3, max_tokens=99)
    records = await runner.run([case])
    native_body, prompt_body, force_body = upstream.history
    assert native_body["tools"] == case.tools()
    assert native_body["temperature"] == 0.3 and native_body["max_tokens"] == 99
    assert "tools" not in prompt_body
    assert prompt_body["messages"] == case.prompt_messages()
    assert "tools" not in force_body  # force: emulated, the tools are in the prompt
    assert "calculate_triangle_area" in force_body["messages"][0]["content"]
    assert force_body["max_tokens"] == 99
    assert all(r.valid for r in records), [r.error for r in records]


async def test_reasks_are_counted_as_llm_calls() -> None:
    (case,) = load_cases(["simple"], limit=1, seed=None)
    replies = iter(
        [
            '{"tool_calls": [{"name": "no_such_tool", "arguments": {}}]}',
            '{"tool_calls": [{"name": "calculate_triangle_area", "arguments": {"base": 10, "height": 5}}]}',
        ]
    )
    upstream = FunctionUpstream(lambda body: next(replies))
    runner = EvalRunner(upstream, "m", [FORCE_JSON])
    (record,) = await runner.run([case])
    assert record.llm_calls == 2
    assert record.valid, record.error
    assert record.prompt_tokens == 2 * 10  # FakeUpstream counts 10 prompt tokens a request


async def test_a_failed_request_is_a_failed_record_not_a_crash() -> None:
    cases = load_cases(["simple", "irrelevance"], limit=1)

    def overloaded(body: dict[str, Any]) -> Any:
        raise UpstreamStatusError("the request exceeds the available context size", status=400)

    runner = EvalRunner(FunctionUpstream(overloaded), "m", [NATIVE, FORCE_JSON])
    records = await runner.run(cases)
    assert len(records) == 4
    for record in records:
        assert not record.valid
        assert record.error_type == "request_failed"
        assert "context size" in (record.error or "")
        assert record.llm_calls == 1
        assert record.well_formed is (None if record.category == "irrelevance" else False)


async def test_skip_resumes_where_a_run_stopped() -> None:
    cases = load_cases(["simple"], limit=3)
    upstream = FunctionUpstream(OracleModel(cases))
    runner = EvalRunner(upstream, "m", [NATIVE, PROMPT])
    done = {(cases[0].id, "native"), (cases[0].id, "bfcl-prompt"), (cases[1].id, "native")}
    assert runner.pending(cases, done) == 3
    seen = []
    records = await runner.run(cases, skip=done, on_record=seen.append)
    assert [(r.case_id, r.config) for r in records] == [
        (cases[1].id, "bfcl-prompt"),
        (cases[2].id, "native"),
        (cases[2].id, "bfcl-prompt"),
    ]
    assert seen == records
    assert upstream.calls == 3


async def test_a_parallel_run_gives_the_serial_run_in_content_and_order() -> None:
    cases = load_cases(["simple", "irrelevance"], limit=3)
    configs = [NATIVE, PROMPT, FORCE_JSON]

    def run_with(parallel: int) -> Any:
        upstream = FunctionUpstream(OracleModel(cases))
        return EvalRunner(upstream, "m", configs).run(cases, parallel=parallel)

    serial = await run_with(1)
    parallel = await run_with(4)

    def content(record: Any) -> dict[str, Any]:
        data = {k: v for k, v in record.to_dict().items() if k != "latency_s"}
        data["tool_calls"] = [c["function"] for c in data["tool_calls"]]  # ids hold the time
        return data

    assert [content(r) for r in parallel] == [content(r) for r in serial]
    assert [r.llm_calls for r in parallel] == [1] * len(parallel)
