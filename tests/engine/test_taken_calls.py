"""After the re-asks for unusable calls are spent, the answer is asked for without tools; a
call the model writes there anyway is taken when it passes the checks, instead of returned as
the answer's text. The 1.5B, asked in BFCL's ``multi_turn_base_17`` to "cd into project
folder", wrote ``[cd(project); find(kelly's test report)]`` three times, then ``[cd(project)]``
when its answer was asked for, and the caller got that text as the answer."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.engine.test_audit_gaps import serve
from toolshim.engine import Engine
from toolshim.engine.emulate import TAKEN_WARNING
from toolshim.testing import FakeUpstream


def _tool(name: str, parameter: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name} in the file system",
            "parameters": {
                "type": "object",
                "properties": {parameter: {"type": "string"}},
                "required": [parameter],
            },
        },
    }


TOOLS = [_tool("cd", "folder"), _tool("cat", "file_name")]
BROKEN = "[cd(project); find(kelly's test report)]"
QUESTION = "Please cd into the project folder and read the report to me."


def request(**extra: Any) -> dict[str, Any]:
    return {
        "model": "m",
        "messages": [{"role": "user", "content": QUESTION}],
        "tools": TOOLS,
        **extra,
    }


async def run(replies: list[str], stream: bool, **extra: Any) -> tuple[Any, FakeUpstream]:
    upstream = FakeUpstream(replies)
    engine = Engine(upstream, mode="force", dialect="pythonic", registry=":memory:")
    return await serve(engine, request(**extra), stream), upstream


@pytest.mark.parametrize("stream", [False, True])
async def test_a_valid_call_written_when_asked_without_tools_is_returned_as_the_call(
    stream: bool,
) -> None:
    out, upstream = await run([BROKEN, BROKEN, BROKEN, "[cd(project)]"], stream)
    assert [(c["name"], json.loads(c["arguments"])) for c in out.calls.values()] == [
        ("cd", {"folder": "project"})
    ]
    assert out.finish == "tool_calls"
    assert not out.content.strip()
    assert TAKEN_WARNING in out.meta.warnings
    assert upstream.calls == 4  # no request more than the answer it replaces
    system = json.dumps(upstream.history[-1]["messages"][0])
    assert "func_name1" in json.dumps(upstream.history[0]["messages"][0])
    assert "func_name1" not in system  # asked without the tool format


@pytest.mark.parametrize("stream", [False, True])
async def test_a_prose_answer_after_the_re_asks_is_the_answer(stream: bool) -> None:
    out, upstream = await run([BROKEN, BROKEN, BROKEN, "I cannot find the report."], stream)
    assert out.calls == {}
    assert out.content.strip() == "I cannot find the report."
    assert TAKEN_WARNING not in out.meta.warnings
    assert upstream.calls == 4


@pytest.mark.parametrize("stream", [False, True])
async def test_a_call_that_fails_the_checks_is_not_taken(stream: bool) -> None:
    # The tool exists, its argument does not: the schema check fails it, so the answer is
    # asked for again without tools, as before.
    replies = [BROKEN, BROKEN, BROKEN, "[cat(path='x')]", "The report is not there."]
    out, upstream = await run(replies, stream)
    assert out.calls == {}
    assert out.content.strip() == "The report is not there."
    assert TAKEN_WARNING not in out.meta.warnings
    assert upstream.calls == 5


@pytest.mark.parametrize("stream", [False, True])
async def test_under_tool_choice_none_the_call_is_never_taken(stream: bool) -> None:
    # No re-asks for calls under "none": the answer path alone, which keeps calls out.
    out, _ = await run(
        ["[cd(project)]", "You are in the project folder."], stream, tool_choice="none"
    )
    assert out.calls == {}
    assert out.content.strip() == "You are in the project folder."
    assert TAKEN_WARNING not in out.meta.warnings
