"""An empty reply to a request that waits for its first step: the model began a result of its
own ("Tool result for ls (call id …") where the call was due, the dialect's stop sequence cut
it at once, and the reply came back empty. The call it skipped is opened
(toolshim.engine.next_step.skipped_call) instead of an answer asked for without tools. The
upstream below cuts its text at the request's stop sequences, as llama.cpp does."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.engine.test_audit_gaps import serve
from tests.engine.test_plans import engine_for
from toolshim.engine.next_step import EMPTY_WARNING
from toolshim.testing import FunctionUpstream
from toolshim.testing.tools import function_tool

TOOLS = [
    function_tool("ls", "List the files of the current directory", a="boolean"),
    function_tool("cat", "Show a file's content", file_name="string"),
]
QUESTION = "Which files are in this folder, hidden ones too?"
MADE_UP = 'Tool result for ls (call id emulated_9c1e_2):\n["goals.txt", ".hidden"]'
ANSWER = "There are goals.txt and .hidden."


def model(seen: list[dict[str, Any]], opened: str = "ls(a=True)]") -> Any:
    """Writes a made-up result where a call is due, the answer when asked without tools, and
    ``opened`` after a call's opening; its text is cut at the request's stop sequences."""

    def reply(body: dict[str, Any]) -> str:
        seen.append(body)
        last = body["messages"][-1]
        if last["role"] == "assistant":
            text = last["content"] + opened
        elif not any("ls(" in m["content"] for m in body["messages"] if m["role"] == "system"):
            text = ANSWER  # asked without tools
        else:
            text = MADE_UP
        cuts = [text.find(s) for s in body.get("stop") or () if s in text]
        return text[: min(cuts)] if cuts else text

    return reply


def body_of(*messages: dict[str, Any]) -> dict[str, Any]:
    return {
        "model": "small",
        "messages": list(messages) or [{"role": "user", "content": QUESTION}],
        "tools": TOOLS,
    }


async def complete(engine: Any, body: dict[str, Any], stream: bool) -> tuple[list[Any], str]:
    """The calls (name, arguments) and the text of a reply, whole or streamed."""
    out = await serve(engine, body, stream)
    return [(c["name"], json.loads(c["arguments"])) for c in out.calls.values()], out.content


@pytest.mark.parametrize("stream", [False, True])
async def test_the_call_a_made_up_result_skipped_is_opened(stream: bool) -> None:
    seen: list[dict[str, Any]] = []
    engine = engine_for(FunctionUpstream(model(seen)))
    calls, text = await complete(engine, body_of(), stream)
    assert calls == [("ls", {"a": True})] and not text
    assert seen[0]["messages"][-1]["role"] == "user"  # the first reply: cut empty
    assert seen[-1]["messages"][-1] == {"role": "assistant", "content": "["}
    assert len(seen) == 2


async def test_the_warning_names_the_tool_opened() -> None:
    engine = engine_for(FunctionUpstream(model([])))
    completion = await engine.acomplete(body_of())
    warnings = " ".join(completion.meta.warnings)  # type: ignore[union-attr]
    assert "opened as a call, it wrote 'ls'" in warnings
    assert EMPTY_WARNING not in warnings


async def test_after_a_result_an_empty_reply_is_still_answered_without_tools() -> None:
    """A result after the request is one the model has: a made-up second one is no step."""
    seen: list[dict[str, Any]] = []
    engine = engine_for(FunctionUpstream(model(seen)))
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    body = body_of(
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": '["goals.txt"]'},
    )
    completion = await engine.acomplete(body)
    assert not completion.message.tool_calls and completion.message.text == ANSWER
    assert all(m["messages"][-1]["role"] != "assistant" for m in seen)
    assert EMPTY_WARNING in completion.meta.warnings  # type: ignore[union-attr]


async def test_without_a_continued_reply_an_empty_reply_is_answered_without_tools() -> None:
    seen: list[dict[str, Any]] = []
    engine = engine_for(FunctionUpstream(model(seen)), prefill=False)
    completion = await engine.acomplete(body_of())
    assert not completion.message.tool_calls and completion.message.text == ANSWER
    assert all(m["messages"][-1]["role"] != "assistant" for m in seen)


@pytest.mark.parametrize(
    "opened",
    [
        'cat(file_name="report_2023.txt")]',  # a value nobody said
        "nothing to call here",  # no call at all
        'ls(colour="red")]',  # not the tool's parameters
        'cat(file_name={"a.txt", "b.txt"})]',  # a set: no JSON value (the 0.5B's, a crash once)
    ],
)
async def test_an_opened_call_that_is_not_a_good_one_leaves_the_answer(opened: str) -> None:
    engine = engine_for(FunctionUpstream(model([], opened)))
    completion = await engine.acomplete(body_of())
    assert not completion.message.tool_calls and completion.message.text == ANSWER
    assert EMPTY_WARNING in completion.meta.warnings  # type: ignore[union-attr]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_call_with_a_set_for_arguments_in_the_answer_is_no_crash(stream: bool) -> None:
    """Asked without tools, the model writes a call whose arguments are no JSON object: it is
    no call made (nor one whose result the turn holds), and the reply is still an answer."""
    leaked = '[cat(file_name={"a.txt", "b.txt"})]'

    def reply(body: dict[str, Any]) -> str:
        last = body["messages"][-1]
        if last["role"] == "assistant":
            return last["content"] + leaked[1:]
        if not any("ls(" in m["content"] for m in body["messages"] if m["role"] == "system"):
            return leaked  # asked without tools
        return ""

    engine = engine_for(FunctionUpstream(reply))
    calls, _ = await complete(engine, body_of(), stream)
    assert calls == []
