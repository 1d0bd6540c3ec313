"""The mode × strategy × tool_choice table, with the number of upstream calls asserted.

Expected counts follow DESIGN.md's table (per turn, ``single`` strategy; ``decision`` costs
one more call when no tool is needed; a rejected native attempt counts as a call).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.engine.helpers import CALL_TEXT as CALL
from tests.engine.helpers import Scripted, request
from toolshim.engine import Engine
from toolshim.errors import UpstreamStatusError

# (mode, kind, needed) -> (single calls, decision calls, outcome) for tool_choice auto.
AUTO_TABLE: dict[tuple[str, str, bool], tuple[int, int, str]] = {
    ("off", "native", True): (1, 1, "call"),
    ("off", "native", False): (1, 1, "text"),
    ("off", "ignore", True): (1, 1, "text"),
    ("off", "ignore", False): (1, 1, "text"),
    ("off", "reject", True): (1, 1, "error"),
    ("off", "reject", False): (1, 1, "error"),
    ("fallback", "native", True): (1, 1, "call"),
    ("fallback", "native", False): (2, 3, "text"),
    ("fallback", "ignore", True): (2, 2, "call"),
    ("fallback", "ignore", False): (2, 3, "text"),
    ("fallback", "reject", True): (2, 2, "call"),
    ("fallback", "reject", False): (2, 3, "text"),
    ("force", "native", True): (1, 1, "call"),
    ("force", "native", False): (1, 2, "text"),
    ("force", "ignore", True): (1, 1, "call"),
    ("force", "ignore", False): (1, 2, "text"),
    ("force", "reject", True): (1, 1, "call"),
    ("force", "reject", False): (1, 2, "text"),
    ("auto", "native", True): (1, 1, "call"),
    ("auto", "native", False): (1, 1, "text"),
    ("auto", "ignore", True): (1, 1, "text"),
    ("auto", "ignore", False): (1, 1, "text"),
    ("auto", "reject", True): (2, 2, "call"),
    ("auto", "reject", False): (2, 3, "text"),
    ("strip", "native", True): (1, 1, "text"),
    ("strip", "native", False): (1, 1, "text"),
    ("strip", "ignore", True): (1, 1, "text"),
    ("strip", "reject", True): (1, 1, "text"),
    ("strip", "reject", False): (1, 1, "text"),
}


def _engine(scripted: Scripted, mode: str, strategy: str) -> tuple[Engine, Any]:
    upstream = scripted.upstream()
    return Engine(upstream, mode=mode, strategy=strategy, registry=":memory:"), upstream


@pytest.mark.parametrize("strategy", ["single", "decision"])
@pytest.mark.parametrize(("mode", "kind", "needed"), sorted(AUTO_TABLE))
async def test_tool_choice_auto(mode: str, kind: str, needed: bool, strategy: str) -> None:
    single, decision, expected = AUTO_TABLE[(mode, kind, needed)]
    scripted = Scripted(kind, needed, decision=strategy == "decision")
    engine, upstream = _engine(scripted, mode, strategy)
    if expected == "error":
        with pytest.raises(UpstreamStatusError, match="does not support tools"):
            await engine.acomplete(request())
        assert upstream.calls == 1
        return
    completion = await engine.acomplete(request())
    from tests.engine.helpers import outcome

    assert outcome(completion) == expected
    calls = single if strategy == "single" else decision
    assert upstream.calls == calls
    assert completion.meta is not None
    assert completion.meta.llm_calls == calls
    assert completion.meta.mode == mode
    warned = "tool calls emulated" in completion.meta.warnings
    assert warned == (completion.meta.emulated and bool(completion.tool_calls))
    if mode == "force":
        assert completion.meta.emulated
        assert all("tools" not in body for body in upstream.history)
    if mode == "strip":
        assert all("tools" not in body for body in upstream.history)
        assert any("tools dropped" in w for w in completion.meta.warnings)


# tool_choice "none": no tool instructions, no calls; the upstream still gets the tools natively.
NONE_TABLE = {
    ("off", "native"): 1,
    ("fallback", "native"): 1,
    ("fallback", "ignore"): 1,
    ("fallback", "reject"): 2,
    ("force", "native"): 1,
    ("auto", "native"): 1,
    ("auto", "reject"): 2,
    ("strip", "native"): 1,
}


@pytest.mark.parametrize("strategy", ["single", "decision"])
@pytest.mark.parametrize(("mode", "kind"), sorted(NONE_TABLE))
async def test_tool_choice_none(mode: str, kind: str, strategy: str) -> None:
    scripted = Scripted(kind, needed=True, decision=strategy == "decision")
    engine, upstream = _engine(scripted, mode, strategy)
    completion = await engine.acomplete(request(tool_choice="none"))
    assert completion.message.tool_calls == ()
    assert completion.message.content
    assert upstream.calls == NONE_TABLE[(mode, kind)]
    for body in upstream.history:
        if "tools" not in body:
            assert "get_weather" not in str(body["messages"])  # no tool instructions


# tool_choice "required" and a named function: the reply must be a call.
FORCED_TABLE = {
    ("off", "native"): (1, "call"),
    ("off", "ignore"): (1, "text"),  # off never intervenes
    ("fallback", "native"): (1, "call"),
    ("fallback", "ignore"): (2, "call"),
    ("fallback", "reject"): (2, "call"),
    ("force", "ignore"): (1, "call"),
    ("auto", "native"): (1, "call"),
    ("auto", "ignore"): (2, "call"),  # the upstream ignored tool_choice: emulated
    ("auto", "reject"): (2, "call"),
}


@pytest.mark.parametrize("strategy", ["single", "decision"])
@pytest.mark.parametrize(
    "choice", ["required", {"type": "function", "function": {"name": "get_weather"}}]
)
@pytest.mark.parametrize(("mode", "kind"), sorted(FORCED_TABLE))
async def test_tool_choice_forces_a_call(mode: str, kind: str, choice: Any, strategy: str) -> None:
    calls, expected = FORCED_TABLE[(mode, kind)]
    scripted = Scripted(kind, needed=False, decision=strategy == "decision")
    engine, upstream = _engine(scripted, mode, strategy)
    completion = await engine.acomplete(request(tool_choice=choice))
    from tests.engine.helpers import outcome

    assert outcome(completion) == expected
    assert upstream.calls == calls


async def test_auto_learns_a_rejection_and_goes_straight_to_emulation() -> None:
    scripted = Scripted("reject", needed=True)
    upstream = scripted.upstream()
    engine = Engine(upstream, mode="auto", registry=":memory:")
    first = await engine.acomplete(request())
    assert first.meta is not None and first.meta.llm_calls == 2
    assert any("rejected tools" in w for w in first.meta.warnings)
    second = await engine.acomplete(request())
    assert second.meta is not None and second.meta.llm_calls == 1
    assert "tools" not in upstream.history[-1]
    assert engine.support("m").value == "no"


async def test_fallback_learns_a_rejection_too() -> None:
    upstream = Scripted("reject", needed=True).upstream()
    engine = Engine(upstream, mode="fallback", registry=":memory:")
    await engine.acomplete(request())
    assert upstream.calls == 2
    await engine.acomplete(request())
    assert upstream.calls == 3


@pytest.mark.parametrize("source", ["profile", "upstream", "runtime_error", "probe"])
async def test_fallback_tries_native_first_whatever_the_registry_remembers(source: str) -> None:
    from toolshim.capabilities import Source

    upstream = Scripted("native", needed=True).upstream()
    engine = Engine(upstream, mode="fallback", registry=":memory:")
    engine.registry.learn(upstream.key, "m", "native_tools", "no", Source(source))
    completion = await engine.acomplete(request())
    assert completion.message.tool_calls
    assert upstream.calls == 1 and upstream.history[0]["tools"]


async def test_fallback_believes_a_person_who_says_the_model_has_no_tools() -> None:
    from toolshim.capabilities import Source

    upstream = Scripted("reject", needed=True).upstream()
    engine = Engine(upstream, mode="fallback", registry=":memory:")
    engine.registry.learn(upstream.key, "m", "native_tools", "no", Source.USER)
    completion = await engine.acomplete(request())
    assert completion.message.tool_calls
    assert upstream.calls == 1 and "tools" not in upstream.history[0]


async def test_without_learning_a_rejection_is_acted_on_but_not_stored() -> None:
    upstream = Scripted("reject", needed=True).upstream()
    engine = Engine(upstream, mode="auto", registry=":memory:", learn=False)
    first = await engine.acomplete(request())
    assert first.message.tool_calls and upstream.calls == 2
    assert engine.registry.fact(upstream.key, "m", "native_tools") is None
    await engine.acomplete(request())
    assert upstream.calls == 3  # this process remembers: no second failed attempt


async def test_strip_sends_tools_to_a_model_known_to_support_them() -> None:
    upstream = Scripted("native", needed=True).upstream()
    engine = Engine(upstream, mode="strip", registry=":memory:")
    from toolshim.capabilities import Source

    engine.registry.learn(upstream.key, "m", "native_tools", "yes", Source.USER)
    completion = await engine.acomplete(request())
    assert completion.message.tool_calls
    assert upstream.history[0]["tools"]


async def test_strip_tells_the_model_no_tools_are_available() -> None:
    upstream = Scripted("native", needed=True).upstream()
    engine = Engine(upstream, mode="strip", registry=":memory:")
    await engine.acomplete(request())
    body = upstream.history[0]
    assert "tools" not in body and "tool_choice" not in body
    assert body["messages"][0]["role"] == "system"
    assert "no tools are available" in body["messages"][0]["content"]


async def test_a_native_call_despite_tool_choice_none_is_not_returned() -> None:
    def ignores_choice(body: dict[str, Any]) -> Any:
        from toolshim.testing import Reply, call

        if body.get("tools"):
            return Reply(None, [call("get_weather", {"city": "Paris"})])
        return "It is sunny in Paris, I believe."

    from toolshim.testing import FunctionUpstream

    upstream = FunctionUpstream(ignores_choice)
    engine = Engine(upstream, mode="auto", registry=":memory:")
    completion = await engine.acomplete(request(tool_choice="none"))
    assert completion.message.tool_calls == ()
    assert completion.message.content == "It is sunny in Paris, I believe."
    assert upstream.calls == 2
    assert completion.meta is not None
    assert any("tool_choice is 'none'" in w for w in completion.meta.warnings)


@pytest.mark.parametrize("stream", [False, True])
async def test_strip_learns_when_a_model_said_to_support_tools_rejects_them(stream: bool) -> None:
    from toolshim.capabilities import Source
    from toolshim.testing import FakeUpstream

    upstream = FakeUpstream(["Paris is sunny."], tools="reject")
    engine = Engine(upstream, mode="strip", registry=":memory:")
    engine.registry.learn(upstream.key, "m", "native_tools", "yes", Source.PROFILE)
    if stream:
        chunks = [c async for c in engine.astream(request(stream=True))]
        text = "".join(c.content or "" for c in chunks)
        meta = chunks[-1].meta
    else:
        completion = await engine.acomplete(request())
        text, meta = completion.message.text, completion.meta
    assert text == "Paris is sunny."
    assert upstream.calls == 2
    assert "tools" in upstream.history[0] and "tools" not in upstream.history[1]
    assert meta is not None and any("tools dropped" in w for w in meta.warnings)
    assert engine.support("m").value == "no"


async def test_a_rejection_overrides_a_stronger_yes_for_a_while() -> None:
    from toolshim.capabilities import Source
    from toolshim.testing import FakeUpstream

    upstream = FakeUpstream([CALL, CALL], tools="reject")
    engine = Engine(upstream, mode="auto", registry=":memory:")
    engine.registry.learn(upstream.key, "m", "native_tools", "yes", Source.PROBE)
    first = await engine.acomplete(request())
    assert upstream.calls == 2 and first.tool_calls
    assert engine.registry.native_tools(upstream.key, "m").value == "yes"  # the probe still wins
    second = await engine.acomplete(request())
    assert upstream.calls == 3, "no second native attempt within the memory window"
    assert second.tool_calls


def test_the_library_reads_the_upstream_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from toolshim.errors import ConfigError

    monkeypatch.setenv("TOOLSHIM_UPSTREAM", "http://127.0.0.1:11434")
    assert Engine(registry=":memory:").upstream.key == "http://127.0.0.1:11434/v1"
    monkeypatch.delenv("TOOLSHIM_UPSTREAM")
    with pytest.raises(ConfigError, match="set TOOLSHIM_UPSTREAM"):
        Engine(registry=":memory:")
