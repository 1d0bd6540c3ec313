"""The BFCL bridge: case loading, tools as JSON Schema, BFCL's prompt, and scoring by BFCL's own checker."""

from __future__ import annotations

import ast
import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from toolshim.errors import ConfigError
from toolshim.evaluation.bfcl import (
    CATEGORY_ALIASES,
    DEFAULT_CATEGORIES,
    FC_PROFILE,
    PROMPT_PROFILE,
    BfclCase,
    _standin_model_config,
    bfcl_available,
    canonical_category,
    load_cases,
)
from toolshim.evaluation.bfcl_score import score

pytestmark = pytest.mark.skipif(
    bfcl_available() is not None, reason=f"bfcl-eval is not usable: {bfcl_available()}"
)

BFCL_TYPES = {"dict", "float", "tuple", "any"}
REPO = Path(__file__).resolve().parents[2]


def first(category: str, n: int = 1) -> list[BfclCase]:
    return load_cases([category], limit=n, seed=None)


def fc(*calls: tuple[str, dict[str, Any]]) -> list[dict[str, str]]:
    """Tool calls as BFCL's OpenAI handler stores them: ``[{name: arguments_json}]``."""
    return [{name: json.dumps(arguments)} for name, arguments in calls]


# -- loading ------------------------------------------------------------------------------------


def test_default_categories_load_with_answers() -> None:
    cases = load_cases(DEFAULT_CATEGORIES, limit=3)
    assert [c.category for c in cases] == [
        canonical_category(c) for c in DEFAULT_CATEGORIES for _ in range(3)
    ]
    for case in cases:
        assert case.messages and case.messages[-1]["role"] == "user"
        assert case.functions
        assert (case.ground_truth is None) == case.is_relevance


def test_the_default_sample_keeps_the_published_cases_and_adds_the_live_ones() -> None:
    """Adding categories leaves every other category's seeded sample as it was, so the reports
    in docs/ (made on the first six) line up case for case with the larger sample."""
    cases = load_cases(DEFAULT_CATEGORIES, limit=50, seed=0)
    counts: dict[str, int] = {}
    for case in cases:
        counts[case.category] = counts.get(case.category, 0) + 1
    assert {k: counts[k] for k in ("live_multiple", "live_parallel", "live_irrelevance")} == {
        "live_multiple": 50,
        "live_parallel": 16,  # all there are
        "live_irrelevance": 50,
    }
    assert len(cases) == 416
    report = json.loads((REPO / "docs" / "bfcl-qwen2.5-coder-0.5b.json").read_text())
    published = {c["case_id"] for c in report["cases"] if c["config"] == "native"}
    first_six = {CATEGORY_ALIASES.get(c, c) for c in DEFAULT_CATEGORIES[:6]}
    sample = {c.id: c.category for c in cases}
    assert {i for i in published if sample.get(i) in first_six} == {
        i for i, category in sample.items() if category in first_six
    }  # the 300 published cases, all of them
    assert published <= set(sample)  # the live cases run so far are the sample's own


def test_selection_is_deterministic_and_seeded() -> None:
    a = [c.id for c in load_cases(["multiple", "parallel"], limit=5, seed=7)]
    b = [c.id for c in load_cases(["multiple", "parallel"], limit=5, seed=7)]
    other = [c.id for c in load_cases(["multiple", "parallel"], limit=5, seed=8)]
    assert a == b
    assert a != other
    assert [c.id for c in first("simple", 3)] == [
        "simple_python_0",
        "simple_python_1",
        "simple_python_2",
    ]


def test_limit_past_the_end_takes_everything() -> None:
    everything = load_cases(["simple"], limit=None)
    assert len(everything) == len(load_cases(["simple"], limit=10_000))
    assert len(everything) > 300


def test_unknown_category_lists_the_known_ones() -> None:
    with pytest.raises(
        ConfigError, match=r"unknown BFCL category 'multi_turn_base'.*simple.*live_simple"
    ):
        canonical_category("multi_turn_base")
    with pytest.raises(ConfigError, match="at least 1"):
        load_cases(["simple"], limit=0)


# -- tools and prompts --------------------------------------------------------------------------


def _types(schema: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(schema, dict):
        if isinstance(schema.get("type"), str):
            found.add(schema["type"])
        for value in schema.values():
            found |= _types(value)
    elif isinstance(schema, list):
        for value in schema:
            found |= _types(value)
    return found


def test_tools_are_valid_json_schema_with_openai_names() -> None:
    cases = load_cases(
        ["simple", "multiple", "parallel", "parallel_multiple", "live_simple"], limit=40
    )
    seen: set[str] = set()
    for case in cases:
        for tool in case.tools():
            function = tool["function"]
            assert tool["type"] == "function"
            assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", function["name"]), function["name"]
            jsonschema.Draft202012Validator.check_schema(function["parameters"])
            types = _types(function["parameters"])
            assert not types & BFCL_TYPES, (case.id, types)
            seen |= types
    assert {"object", "number", "array", "integer", "string"} <= seen


def test_tool_conversion_follows_bfcls_openai_handler() -> None:
    (case,) = first("multiple")  # circle_properties.get: a dotted name, dict and float types
    (source,) = [f for f in case.functions if f["name"] == "circle_properties.get"]
    (tool,) = [t for t in case.tools() if t["function"]["name"] == "circle_properties_get"]
    parameters = tool["function"]["parameters"]
    assert source["parameters"]["type"] == "dict"
    assert parameters["type"] == "object"
    floats = [k for k, v in source["parameters"]["properties"].items() if v["type"] == "float"]
    assert floats
    for name in floats:
        assert parameters["properties"][name]["type"] == "number"
        assert parameters["properties"][name]["format"] == "float"
    assert tool["function"]["description"].endswith(
        "Note that the provided function is in Python 3 syntax."
    )
    # the case itself is untouched: tools() works on copies
    assert case.functions[0] == first("multiple")[0].functions[0]


def test_prompt_messages_are_bfcls_default_prompt() -> None:
    (case,) = first("simple")
    messages = case.prompt_messages()
    assert [m["role"] for m in messages] == ["system", "user"]
    system = messages[0]["content"]
    assert system.startswith("You are an expert in composing functions.")
    assert "[func_name1(params_name1=params_value1" in system
    assert '"name": "calculate_triangle_area"' in system
    assert messages[1] == dict(case.messages[0])
    assert case.chat_messages() == [dict(case.messages[0])]


# -- scoring ------------------------------------------------------------------------------------


def test_known_good_tool_call_passes_the_checker() -> None:
    (case,) = first("simple")
    verdict = score(case, fc(("calculate_triangle_area", {"base": 10, "height": 5})), decoder="fc")
    assert verdict.valid, verdict.error
    assert verdict.well_formed is True
    assert verdict.decoded == [{"calculate_triangle_area": {"base": 10, "height": 5}}]


def test_wrong_value_fails_with_the_checkers_reason() -> None:
    (case,) = first("simple")
    verdict = score(case, fc(("calculate_triangle_area", {"base": 10, "height": 6})), decoder="fc")
    assert not verdict.valid
    assert verdict.well_formed is True  # a call of the right shape, with a wrong value
    assert "height" in (verdict.error or "")
    assert verdict.error_type == "value_error:others"


def test_text_reply_is_neither_valid_nor_well_formed() -> None:
    (case,) = first("simple")
    verdict = score(case, '```json\n{"name": "calculate_triangle_area"}\n```', decoder="fc")
    assert not verdict.valid
    assert verdict.well_formed is False
    assert verdict.error_type == "ast_decoder:decoder_failed"


def test_dotted_names_are_scored_as_bfcl_does_per_mode() -> None:
    case = first("simple", 2)[1]
    assert case.functions[0]["name"] == "math.factorial"
    assert score(case, fc(("math_factorial", {"number": 5})), decoder="fc").valid
    assert score(case, "[math.factorial(number=5)]", decoder="prompt").valid
    unknown = score(case, fc(("factorial", {"number": 5})), decoder="fc")
    assert not unknown.valid and unknown.well_formed is False


def test_prompt_decoder_is_bfcls() -> None:
    (case,) = first("simple")
    assert score(
        case, "```\n[calculate_triangle_area(base=10, height=5)]\n```", decoder="prompt"
    ).valid
    assert score(case, "calculate_triangle_area(base=10, height=5)", decoder="prompt").valid
    prose = score(case, "The area is 25 square units.", decoder="prompt")
    assert not prose.valid and prose.well_formed is False


def test_parallel_calls_in_any_order() -> None:
    (case,) = first("parallel")
    calls = []
    for entry in case.ground_truth or ():
        ((name, params),) = entry.items()
        calls.append((name.replace(".", "_"), {k: v[0] for k, v in params.items() if v[0] != ""}))
    assert len(calls) > 1
    assert score(case, fc(*reversed(calls)), decoder="fc").valid
    short = score(case, fc(calls[0]), decoder="fc")
    assert not short.valid and short.well_formed is True


def test_irrelevance_is_scored_on_whether_a_call_was_made() -> None:
    (case,) = first("irrelevance")
    answer = score(case, "I cannot help with that using these tools.", decoder="fc")
    assert answer.valid and not answer.called and answer.well_formed is None
    name = case.tool_names()[0]
    called = score(case, fc((name, {})), decoder="fc")
    assert not called.valid and called.called
    assert called.error_type == "irrelevance_error:decoder_success"
    assert score(case, "[]", decoder="prompt").valid


# -- the stand-in for BFCL's model table ---------------------------------------------------------


def _model_table_flags() -> dict[str, bool]:
    """``underscore_to_dot`` of every entry of BFCL's model table, read from its source."""
    spec = importlib.util.find_spec("bfcl_eval")
    assert spec is not None and spec.origin is not None
    source = Path(spec.origin).parent / "constants" / "model_config.py"
    flags: dict[str, bool] = {}
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and isinstance(value, ast.Call):
                    for keyword in value.keywords:
                        if keyword.arg == "underscore_to_dot" and isinstance(
                            keyword.value, ast.Constant
                        ):
                            flags[str(key.value)] = bool(keyword.value.value)
    return flags


def test_scoring_profiles_match_bfcls_model_table() -> None:
    flags = _model_table_flags()
    assert flags[FC_PROFILE] is True
    assert flags[PROMPT_PROFILE] is False
    standin = _standin_model_config().MODEL_CONFIG_MAPPING
    assert {name: standin[name].underscore_to_dot for name in standin} == {
        FC_PROFILE: True,
        PROMPT_PROFILE: False,
    }
