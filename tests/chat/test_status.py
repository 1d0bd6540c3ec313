"""What the chat says about a model's tools: native / emulated / disabled, and why."""

from __future__ import annotations

import pytest

from toolshim.capabilities.facts import Fact, Source
from toolshim.capabilities.registry import Registry
from toolshim.chat.render import summarize_parameters
from toolshim.chat.status import describe_fact, effective_mode, tool_status
from toolshim.types import Mode

UPSTREAM = "http://127.0.0.1:11434/v1"


@pytest.fixture
def registry() -> Registry:
    return Registry.open(":memory:")


def status_line(registry: Registry, model: str, mode: Mode = Mode.AUTO, **kw: object) -> str:
    options = {"dialect": None, "has_tools": True, **kw}
    status = tool_status(registry, UPSTREAM, model, mode=mode, **options)  # type: ignore[arg-type]
    return f"{status.headline} — {status.why}"


def test_profiles_give_native_or_emulated(registry: Registry) -> None:
    assert status_line(registry, "llama3.2:3b") == "Tools: native — from profile llama3.2"
    assert status_line(registry, "gemma3:1b") == (
        "Tools: emulated (json) — the model has no native tool calling (from profile gemma3)"
    )


def test_the_strongest_source_is_the_reason(registry: Registry) -> None:
    registry.learn(
        UPSTREAM, "gemma3:1b", "native_tools", "yes", Source.UPSTREAM, "ollama /api/show"
    )
    assert "reported by the upstream" in status_line(registry, "gemma3:1b")
    registry.learn(UPSTREAM, "gemma3:1b", "native_tools", "no", Source.RUNTIME_ERROR, "x")
    line = status_line(registry, "gemma3:1b")
    assert line.startswith("Tools: emulated (json)")
    assert "learned from an upstream error on 20" in line
    registry.learn(UPSTREAM, "gemma3:1b", "native_tools", "yes", Source.USER, "chat")
    assert status_line(registry, "gemma3:1b").startswith("Tools: native — set by you on 20")


def test_the_preferred_dialect_or_the_flag_is_named(registry: Registry) -> None:
    registry.learn(UPSTREAM, "mystery", "native_tools", "no", Source.PROBE, "rejected")
    registry.learn(UPSTREAM, "mystery", "dialect", "hermes", Source.USER)
    assert status_line(registry, "mystery").startswith("Tools: emulated (hermes) — ")
    assert "auto-detected on" in status_line(registry, "mystery")
    assert status_line(registry, "mystery", dialect="pythonic").startswith(
        "Tools: emulated (pythonic)"
    )


@pytest.mark.parametrize(
    ("mode", "model", "has_tools", "expected"),
    [
        (Mode.FORCE, "llama3.2", True, "Tools: emulated (pythonic) — mode force always"),
        (Mode.OFF, "gemma3:1b", True, "Tools: native — mode off sends tools natively although"),
        (Mode.STRIP, "gemma3:1b", True, "Tools: disabled — mode strip drops tools"),
        (Mode.STRIP, "llama3.2", True, "Tools: native — from profile llama3.2"),
        (Mode.AUTO, "llama3.2", False, "Tools: disabled — no tools are loaded"),
        (Mode.FALLBACK, "llama3.2", True, "Tools: native — from profile llama3.2; emulated when"),
        (Mode.AUTO, "who-knows", True, "Tools: native first — tool support is unknown"),
    ],
)
def test_modes_decide_what_tools_become(
    registry: Registry, mode: Mode, model: str, has_tools: bool, expected: str
) -> None:
    assert status_line(registry, model, mode, has_tools=has_tools).startswith(expected)


def test_a_session_only_decision_emulates_without_a_fact(registry: Registry) -> None:
    line = status_line(registry, "who-knows", session_note="no answer, emulated for this session")
    assert line == "Tools: emulated (json) — no answer, emulated for this session"
    assert effective_mode(Mode.AUTO, True) is Mode.FORCE
    assert effective_mode(Mode.FALLBACK, True) is Mode.FORCE
    assert effective_mode(Mode.STRIP, True) is Mode.STRIP
    assert effective_mode(Mode.AUTO, False) is Mode.AUTO


def test_describe_fact_says_where_it_came_from() -> None:
    stamp = 1795564800.0  # 2026-11-25
    assert describe_fact(Fact("native_tools", "no", Source.PROFILE, stamp), "gemma3") == (
        "from profile gemma3"
    )
    assert describe_fact(Fact("native_tools", "no", Source.RUNTIME_ERROR, stamp)) == (
        "learned from an upstream error on 2026-11-25"
    )
    assert (
        describe_fact(Fact("native_tools", "no", Source.USER, stamp)) == "set by you on 2026-11-25"
    )


def test_summarize_parameters_reads_like_a_signature() -> None:
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "units": {"enum": ["c", "f"], "default": "c"},
            "days": {"type": ["integer", "null"]},
        },
        "required": ["city"],
    }
    assert summarize_parameters(schema) == (
        "city: string; units?: 'c' | 'f' = 'c'; days?: integer | null"
    )
    assert summarize_parameters({"type": "object", "properties": {}}) == "(none)"
