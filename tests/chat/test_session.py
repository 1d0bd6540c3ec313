"""The chat session's flows in-process: a scripted terminal, the real engine, agent and registry."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from toolshim.agent.tools import Tool
from toolshim.capabilities.facts import Source, Support
from toolshim.capabilities.registry import Registry
from toolshim.chat.builtin import builtin_tools
from toolshim.chat.session import ChatSession, ChatSettings
from toolshim.engine.engine import Engine
from toolshim.testing import FakeUpstream, Reply, call
from toolshim.types import Mode


class ScriptedTerminal:
    """Lines and answers from lists; ``during`` runs while a reply is being watched."""

    interactive = True

    def __init__(
        self,
        lines: list[str] | None = None,
        answers: list[str | None] | None = None,
        during: Callable[[asyncio.Task[Any], Callable[[str], None]], Any] | None = None,
    ) -> None:
        self.console = Console(file=io.StringIO(), width=200, highlight=False, soft_wrap=True)
        self.lines = list(lines or [])
        self.answers = list(answers or [])
        self.questions: list[str] = []
        self.during = during

    @property
    def output(self) -> str:
        file = self.console.file
        assert isinstance(file, io.StringIO)
        return file.getvalue()

    async def read_line(self, prompt: str) -> str | None:
        return self.lines.pop(0) if self.lines else None

    async def ask(self, question: str, answers: Mapping[str, str], time_limit: float) -> str | None:
        self.questions.append(question)
        reply = self.answers.pop(0) if self.answers else None
        return answers.get(reply) if reply is not None else None

    async def watch(self, task: asyncio.Task[Any], on_line: Callable[[str], None]) -> bool:
        if self.during is not None:
            await self.during(task, on_line)
        await asyncio.wait({task})
        return task.cancelled()


def session_for(
    upstream: FakeUpstream,
    terminal: ScriptedTerminal,
    *,
    tools: list[Tool] | None = None,
    mode: Mode = Mode.AUTO,
) -> ChatSession:
    engine = Engine(upstream, registry=Registry.open(":memory:"))
    settings = ChatSettings(mode=mode, prompt_timeout=1.0)
    return ChatSession(engine, builtin_tools() if tools is None else tools, terminal, settings)


def alternates(messages: list[dict[str, Any]]) -> bool:
    """Every assistant tool call is answered, and no two user messages follow each other."""
    pending: set[str] = set()
    previous = None
    for message in messages:
        if message["role"] == "user" and previous == "user":
            return False
        for tool_call in message.get("tool_calls") or ():
            pending.add(tool_call["id"])
        if message["role"] == "tool":
            pending.discard(message["tool_call_id"])
        previous = message["role"]
    return not pending


async def test_a_tool_call_runs_and_the_conversation_carries_over() -> None:
    upstream = FakeUpstream(
        [Reply("", [call("calculate", {"expression": "17*23"})]), "It is 391.", "Yes, 391."]
    )
    terminal = ScriptedTerminal(["what is 17*23?", "sure?"])
    session = session_for(upstream, terminal)
    assert await session.run("llama3.2") == 0
    assert 'calculate(expression="17*23")' in terminal.output
    assert "calculate → 391" in terminal.output
    assert [m["role"] for m in session.messages] == [
        "user", "assistant", "tool", "assistant", "user", "assistant"
    ]  # fmt: skip
    last_request = upstream.history[-1]["messages"]
    assert [m["role"] for m in last_request][:4] == ["user", "assistant", "tool", "assistant"]
    assert last_request[-1] == {"role": "user", "content": "sure?"}


async def test_cancelling_during_a_tool_keeps_the_history_valid() -> None:
    started = asyncio.Event()
    release = asyncio.Event()

    async def slow_lookup(city: str) -> str:
        """Look something up slowly."""
        started.set()
        await release.wait()
        return "never"

    async def cancel_when_the_tool_runs(task: asyncio.Task[Any], on_line: Any) -> None:
        await started.wait()
        task.cancel()

    upstream = FakeUpstream([Reply("", [call("slow_lookup", {"city": "Paris"})]), "Next answer."])
    terminal = ScriptedTerminal(["look up Paris", "next"], during=cancel_when_the_tool_runs)
    session = session_for(upstream, terminal, tools=[Tool(slow_lookup)])
    await session.run("llama3.2")
    assert "Reply cancelled" in terminal.output
    assert session.messages[:2] == [
        {"role": "user", "content": "look up Paris"},
        {"role": "assistant", "content": "(reply cancelled by the user)"},
    ]
    assert alternates(session.messages)
    assert session.transcript.exchanges[0]["outcome"] == "cancelled"


async def test_an_upstream_error_leaves_the_conversation_as_it_was() -> None:
    from toolshim.errors import UpstreamStatusError

    upstream = FakeUpstream(
        ["First.", UpstreamStatusError("model 'nope' not found", status=404), "Third."]
    )
    terminal = ScriptedTerminal(["one", "two", "three"])
    session = session_for(upstream, terminal)
    await session.run("llama3.2")
    assert "error: model 'nope' not found" in terminal.output
    assert "/model list shows the models" in terminal.output
    assert [m.get("content") for m in session.messages] == ["one", "First.", "three", "Third."]


async def test_runtime_learning_no_is_for_this_session_only() -> None:
    upstream = FakeUpstream(["Emulated one.", "Emulated two."], tools="reject")
    terminal = ScriptedTerminal(["hello", "again"], answers=["n"])
    session = session_for(upstream, terminal)
    await session.run("llama3.2")
    assert terminal.questions == [
        "This model appears not to support native tools. Remember this? [y/n] ›"
    ]
    registry, key = session.registry, upstream.key
    evidence = registry.evidence(key, "llama3.2")["native_tools"]
    assert [e.fact.source for e in evidence] == [Source.PROFILE]  # the learned fact was taken back
    assert "in this session only" in terminal.output
    # the second question went straight to emulation: no tools were sent
    assert [bool(body.get("tools")) for body in upstream.history] == [True, False, False]


async def test_runtime_learning_yes_is_stored_and_never_asked_again() -> None:
    upstream = FakeUpstream(["Emulated one.", "Emulated two."], tools="reject")
    terminal = ScriptedTerminal(["hello", "again"], answers=["y"])
    session = session_for(upstream, terminal)
    await session.run("llama3.2")
    fact = session.registry.fact(upstream.key, "llama3.2", "native_tools")
    assert fact is not None and fact.source is Source.USER and fact.support is Support.NO
    assert len(terminal.questions) == 1
    assert "Tools: emulated (pythonic) from now on" in terminal.output


async def test_a_user_decision_is_never_questioned() -> None:
    upstream = FakeUpstream(["Emulated anyway."], tools="reject")
    terminal = ScriptedTerminal(["hello"])
    session = session_for(upstream, terminal)
    session.registry.learn(upstream.key, "mystery", "native_tools", "yes", Source.USER)
    await session.run("mystery")
    assert terminal.questions == []
    assert "although you set it to native" in terminal.output


async def test_lines_typed_during_a_reply_run_after_it() -> None:
    typed = ["/model use gemma3:1b", "and you?"]

    async def type_a_swap(task: asyncio.Task[Any], on_line: Callable[[str], None]) -> None:
        while typed:
            on_line(typed.pop(0))

    upstream = FakeUpstream(["Answer from llama.", "Answer from gemma."])
    terminal = ScriptedTerminal(["hi"], during=type_a_swap)
    session = session_for(upstream, terminal)
    await session.run("llama3.2")
    output = terminal.output
    assert "llama3.2 completes this turn first, then toolshim switches to gemma3:1b" in output
    assert output.index("Answer from llama.") < output.index("Switched to gemma3:1b")
    assert [body["model"] for body in upstream.history] == ["llama3.2", "gemma3:1b"]


async def test_unknown_model_timeout_emulates_for_the_session_and_asks_again_on_use() -> None:
    upstream = FakeUpstream(["Hi."])
    terminal = ScriptedTerminal(["hello", "/model use mystery"], answers=[None, "n"])
    session = session_for(upstream, terminal)
    await session.run("mystery")
    assert len(terminal.questions) == 2
    assert "No answer within 1 s" in terminal.output
    assert upstream.history[0].get("tools") is None  # emulated: tools described in the prompt
    fact = session.registry.fact(upstream.key, "mystery", "native_tools")
    assert fact is not None and fact.source is Source.USER and fact.support is Support.NO


async def test_save_writes_the_transcript(tmp_path: Path) -> None:
    upstream = FakeUpstream([Reply("", [call("calculate", {"expression": "2**10"})]), "1024."])
    target = tmp_path / "chat.json"
    terminal = ScriptedTerminal(["power?", f"/save {target}", f"/save {tmp_path}"])
    session = session_for(upstream, terminal)
    await session.run("llama3.2")
    data = json.loads(target.read_text())
    assert data["format"] == "toolshim-chat-transcript/1"
    assert data["model"] == "llama3.2"
    assert [m["role"] for m in data["messages"]] == ["user", "assistant", "tool", "assistant"]
    exchange = data["exchanges"][0]
    assert exchange["tool_runs"][0]["name"] == "calculate"
    assert exchange["tool_runs"][0]["result"] == "1024"
    assert exchange["turns"][0]["toolshim"]["emulated"] is False
    assert {t["function"]["name"] for t in data["tools"]} == {
        "current_time",
        "calculate",
        "convert_units",
    }
    assert "cannot save to" in terminal.output  # a directory is not a file


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("/help", "/model use NAME"),
        ("/tools", "convert_units"),
        ("/mode force", "Mode force. llama3.2. Tools: emulated"),
        ("/mode sometimes", "unknown mode 'sometimes'"),
        ("/hlep", "unknown command '/hlep'; did you mean /help?"),
        ("/clear", "Conversation cleared."),
        ("/model", "Model llama3.2. Tools: native"),
        ("/model use", "/model use needs a model name"),
    ],
)
async def test_commands(line: str, expected: str) -> None:
    terminal = ScriptedTerminal([line])
    session = session_for(FakeUpstream(), terminal)
    await session.run("llama3.2")
    assert expected in terminal.output


async def test_a_swap_leaves_the_last_providers_own_fields_behind() -> None:
    signed = {**call("calculate", {"expression": "6*7"}), "extra_content": {"google": {"s": "x"}}}
    upstream = FakeUpstream([Reply("", [signed]), "42.", "Still 42."])
    terminal = ScriptedTerminal(["what is 6*7?", "/model use qwen2.5:7b", "sure?"])
    session = session_for(upstream, terminal)
    await session.run("llama3.2")
    second_turn = upstream.history[1]["messages"]
    assert any("extra_content" in c for m in second_turn for c in m.get("tool_calls") or [])
    after_swap = upstream.history[-1]
    assert after_swap["model"] == "qwen2.5:7b" and after_swap.get("tools")
    assert "extra_content" not in json.dumps(after_swap["messages"])
    assert "6*7" in json.dumps(after_swap["messages"])  # the conversation itself is kept
