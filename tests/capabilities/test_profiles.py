"""Shipped profiles: name normalisation, family matching, the size rule, wiring into the registry."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from toolshim.capabilities.facts import Source, Support
from toolshim.capabilities.profiles import (
    ProfileTable,
    normalize_name,
    parameter_count,
    shipped_profiles,
)
from toolshim.capabilities.registry import Registry
from toolshim.engine import Engine
from toolshim.errors import ConfigError
from toolshim.testing import FakeUpstream

TABLE = shipped_profiles()
EXAMPLES = [(family.name, example) for family in TABLE.families for example in family.examples]
DESIGN_DIALECTS = {"json", "hermes", "compact", "pythonic"}


@pytest.mark.parametrize(("family", "example"), EXAMPLES, ids=[e for _, e in EXAMPLES])
def test_every_example_in_the_file_resolves_to_its_family(family: str, example: str) -> None:
    found = TABLE.match(example).family
    assert found is not None, f"{example!r} matched no family"
    assert found.name == family


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("gemma3:latest", "gemma3"),
        ("llama3.2:1b", "llama3.2-1b"),
        ("ollama/qwen2.5:7b-instruct-q4_K_M", "qwen2.5-7b"),
        ("hf.co/bartowski/Qwen2.5-7B-Instruct-GGUF:Q4_K_M", "qwen2.5-7b"),
        ("Qwen/Qwen2.5-7B-Instruct", "qwen2.5-7b"),
        ("openrouter/meta-llama/llama-3.1-8b-instruct:free", "llama-3.1-8b"),
        ("gemma-3-12b-it-Q4_K_M.gguf", "gemma-3-12b"),
        ("/models/Meta-Llama-3.1-8B-Instruct.Q8_0.gguf", "meta-llama-3.1-8b"),
        ("registry.ollama.ai/library/gemma3:4b", "gemma3-4b"),
        ("Llama-2-7b-chat-hf", "llama-2-7b"),
        ("deepseek-chat", "deepseek-chat"),
        ("mlx-community/Qwen3-4B-4bit", "qwen3-4b"),
        ("  Mistral Nemo  ", "mistral-nemo"),
    ],
)
def test_names_are_normalised(raw: str, normalized: str) -> None:
    assert normalize_name(raw) == normalized


@pytest.mark.parametrize(
    ("name", "count"),
    [
        ("qwen2.5-0.5b", 5e8),
        ("smollm2-135m", 1.35e8),
        ("mixtral-8x7b", 5.6e10),
        ("llama3.2-1b", 1e9),
        ("phi-3-mini-4k", None),
        ("gpt-4o", None),
        ("qwen3-30b-a3b", 3e10),
    ],
)
def test_sizes_are_read_from_names(name: str, count: float | None) -> None:
    assert parameter_count(name) == count


def test_models_under_1b_prefer_the_compact_dialect_whatever_their_family() -> None:
    for model in ("qwen2.5:0.5b", "smollm2:360m", "gemma3:270m", "my-own-model-350M.gguf"):
        facts = TABLE.lookup(model)
        assert facts["dialect"].value == "compact", model
        assert "size rule" in facts["dialect"].detail
    assert TABLE.lookup("llama3.2:1b")["dialect"].value == "pythonic"
    assert TABLE.lookup("qwen2.5:7b")["dialect"].value == "hermes"


@pytest.mark.parametrize(
    ("model", "tools"),
    [
        ("gemma3:4b", "no"),  # gemma3 has no native tools in Ollama
        ("gemma2:9b", "no"),
        ("llama3.1:8b", "yes"),
        ("llama3.2:3b", "yes"),
        ("llama3", "no"),
        ("qwen2.5-coder:7b", "yes"),
        ("qwen3:8b", "yes"),
        ("mistral:7b", "yes"),
        ("mixtral:8x7b", "yes"),
        ("phi4:14b", "no"),
        ("phi4-mini", "yes"),
        ("phi3:3.8b", "no"),
        ("deepseek-coder:6.7b", "no"),
        ("granite3.3:8b", "yes"),
        ("command-r:35b", "yes"),
        ("smollm2:1.7b", "yes"),
        ("smollm:1.7b", "no"),
        ("gpt-4o-mini", "yes"),
        ("claude-3-5-sonnet-latest", "yes"),
        ("o1-mini", "no"),
    ],
)
def test_known_tool_support_of_common_families(model: str, tools: str) -> None:
    assert TABLE.lookup(model)["native_tools"].value == tools


def test_unknown_and_uncertain_models_have_no_tool_fact() -> None:
    assert "native_tools" not in TABLE.lookup("custom-model:latest")
    assert "native_tools" not in TABLE.lookup("deepseek-r1:1.5b")  # varies by pull date
    assert TABLE.match("custom-model:latest").family is None


def test_the_qwen_and_hermes_families_prefer_hermes() -> None:
    for model in ("qwen2.5:7b", "qwen3:8b", "qwen2.5-coder:7b", "hermes3:8b", "qwq:32b"):
        assert TABLE.lookup(model)["dialect"].value == "hermes", model


def test_the_file_says_where_every_fact_comes_from_and_names_real_dialects() -> None:
    raw = json.loads(resources.files("toolshim").joinpath("data/profiles.json").read_text())
    keys = set(raw["sources"])
    for family in TABLE.families:
        assert any(key in family.source for key in keys), family.name
        assert family.examples, family.name
        dialect = family.facts.get("dialect")
        assert dialect is None or dialect in DESIGN_DIALECTS, family.name
    names = [f.name for f in TABLE.families]
    assert len(names) == len(set(names))
    covered = {
        "llama3.1",
        "llama3.2",
        "qwen2.5",
        "qwen3",
        "qwen2.5-coder",
        "mistral",
        "mixtral",
        "gemma2",
        "gemma3",
        "phi3",
        "phi4",
        "deepseek-r1",
        "deepseek-coder",
        "granite",
        "command-r",
        "smollm2",
    }
    assert covered <= set(names)


def test_profile_facts_are_the_weakest_source_with_the_checked_date() -> None:
    fact = TABLE.lookup("gemma3:1b")["native_tools"]
    assert fact.source is Source.PROFILE
    assert fact.updated_at == TABLE.checked_at
    assert fact.detail.startswith("gemma3 family: ollama-library")


def test_a_malformed_table_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="profiles table is malformed"):
        ProfileTable({"checked": "2026-01-01", "size_rule": {}, "families": []})
    with pytest.raises(ConfigError, match="yes, no or unknown"):
        ProfileTable(
            {
                "checked": "2026-01-01",
                "size_rule": {"below_parameters": 1e9, "dialect": "compact"},
                "families": [
                    {
                        "family": "x",
                        "match": "x",
                        "source": "s",
                        "facts": {"native_tools": "sometimes"},
                    }
                ],
            }
        )


def test_registry_open_wires_the_profiles_in(tmp_path: Path) -> None:
    registry = Registry.open(tmp_path / "caps.sqlite3")
    fact = registry.fact("http://any/v1", "gemma3:1b", "native_tools")
    assert fact is not None and fact.source is Source.PROFILE
    assert registry.native_tools("http://any/v1", "qwen2.5:7b") is Support.YES
    assert registry.preferred_dialect("http://any/v1", "qwen2.5:7b") == "hermes"


def test_the_engine_gets_profile_facts_from_its_registry_path(tmp_path: Path) -> None:
    engine = Engine(FakeUpstream(), registry=str(tmp_path / "caps.sqlite3"))
    assert engine.support("gemma3:1b") is Support.NO
    fact = engine.registry.fact(engine.upstream.key, "gemma3:1b", "native_tools")
    assert fact is not None and fact.source is Source.PROFILE
