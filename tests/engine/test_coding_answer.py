"""A coding agent's answer from its results: asked at once when the model writes the call it
just made again, and in a prompt that starts as the turn's earlier requests did (the tools
stay described), so that llama.cpp's cache serves all of it but the closing note."""

from __future__ import annotations

import json
from typing import Any

from toolshim.capabilities import Registry
from toolshim.engine import Engine
from toolshim.testing import FunctionUpstream
from toolshim.testing.tools import function_tool

SHELL = function_tool("exec_command", cmd="string")
PLAN = {"type": "function", "function": {"name": "update_plan", "parameters": {}}}
ASK = "Primary working directory: /w\nWhat is the first line of notes.txt? Tell me."


def ran(*commands: tuple[str, str]) -> list[dict[str, Any]]:
    """The messages of commands that ran, each with its output."""
    out: list[dict[str, Any]] = []
    for n, (command, output) in enumerate(commands):
        call = {"name": "exec_command", "arguments": json.dumps({"cmd": command})}
        out.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": f"c{n}", "type": "function", "function": call}],
            }
        )
        out.append({"role": "tool", "tool_call_id": f"c{n}", "content": output})
    return out


def codex_request(*commands: tuple[str, str]) -> dict[str, Any]:
    return {
        "model": "small",
        "messages": [{"role": "user", "content": ASK}, *ran(*commands)],
        "tools": [SHELL, PLAN],
    }


def engine_for(replies: list[str], seen: list[dict[str, Any]]) -> Engine:
    def model(body: dict[str, Any]) -> str:
        seen.append(body)
        return replies[min(len(seen), len(replies)) - 1]

    return Engine(
        FunctionUpstream(model),
        mode="force",
        dialect="pythonic",
        registry=Registry(),
        offer_tools="coding",
    )


async def test_the_call_just_made_written_again_is_answered_at_once_from_a_cached_prompt() -> None:
    seen: list[dict[str, Any]] = []
    again = '[exec_command(cmd="head -n 1 notes.txt")]'
    engine = engine_for([again, "The first line is: hello there"], seen)
    completion = await engine.acomplete(codex_request(("head -n 1 notes.txt", "hello there\n")))
    assert completion.message.text == "The first line is: hello there"
    assert not completion.message.tool_calls
    assert len(seen) == 2  # no re-ask between the repeat and the answer
    first, answer = (body["messages"] for body in seen)
    assert [m["role"] for m in first] == [m["role"] for m in answer] == ["system", "user"]
    assert answer[0] == first[0]  # the tools are still described: the same system prompt
    asked, results = first[-1]["content"], answer[-1]["content"]
    shared = len(asked) - len(asked.split("Use these results.")[-1]) - len("Use these results.")
    assert results[:shared] == asked[:shared]  # the question and the results, as before
    assert "hello there" in results[:shared]
    assert results.endswith("Do not call a tool.")


async def test_a_call_written_again_that_was_not_the_last_one_is_re_asked() -> None:
    seen: list[dict[str, Any]] = []
    earlier = '[exec_command(cmd="head -n 1 notes.txt")]'
    engine = engine_for([earlier, "The first line is: hello there"], seen)
    completion = await engine.acomplete(
        codex_request(("head -n 1 notes.txt", "hello there\n"), ("wc -l notes.txt", "3 notes.txt"))
    )
    assert completion.message.text == "The first line is: hello there"
    reask = seen[1]["messages"][-1]["content"]
    assert "you already called exec_command" in reask  # told, not answered for
    # The call was written well: no format reminder (what the upstream's cache cannot serve).
    assert "To call functions, reply with only a Python list of calls" not in reask


async def test_a_coding_agents_re_ask_of_a_call_written_badly_reminds_it_of_the_format() -> None:
    seen: list[dict[str, Any]] = []
    broken = "[exec_command(cmd=head + notes)]"
    engine = engine_for([broken, "The first line is: hello there"], seen)
    await engine.acomplete(codex_request(("wc -l notes.txt", "3 notes.txt")))
    reask = seen[1]["messages"][-1]["content"]
    assert "Your last reply could not be used" in reask
    assert "To call functions, reply with only a Python list of calls" in reask


async def test_an_answer_that_writes_a_call_anyway_is_returned_as_its_prose() -> None:
    seen: list[dict[str, Any]] = []
    again = '[exec_command(cmd="head -n 1 notes.txt")]'
    engine = engine_for([again, f"It says hello there.\n{again}"], seen)
    completion = await engine.acomplete(codex_request(("head -n 1 notes.txt", "hello there\n")))
    assert completion.message.text == "It says hello there."
    assert not completion.message.tool_calls


async def test_the_call_just_made_written_again_with_a_fix_still_to_make_is_re_asked() -> None:
    seen: list[dict[str, Any]] = []
    again = '[exec_command(cmd="cat calc.py")]'
    engine = engine_for([again, "The bug is in add."], seen)
    request = codex_request(("cat calc.py", "def add(a, b):\n    return a - b\n"))
    request["messages"][0]["content"] = "Primary working directory: /w\nFix the bug in calc.py."
    await engine.acomplete(request)
    reask = seen[1]["messages"][-1]["content"]
    assert "you already called exec_command" in reask
    # the result stands just above in the prompt: not quoted again (the cache serves it)
    assert "have its result: (above)" in reask and "return a - b" not in reask


async def test_the_call_just_made_written_again_after_a_pipeline_wrote_a_file_looks_at_it() -> None:
    seen: list[dict[str, Any]] = []
    command = "wc -l data.txt > count.txt"
    engine = engine_for([f'[exec_command(cmd="{command}")]', "Done."], seen)
    request = codex_request((command, "Process exited with code 0\nOutput:\n"))
    request["messages"][0]["content"] = (
        "Primary working directory: /w\nCount the lines in data.txt and write the number "
        "into a new file count.txt."
    )
    completion = await engine.acomplete(request)
    (look,) = completion.message.tool_calls
    assert "count.txt" in json.loads(look.arguments)["cmd"]
    assert len(seen) == 1
    assert any("sent a look at that file" in w for w in completion.meta.warnings)


async def test_an_answer_that_is_only_the_call_again_is_that_calls_result() -> None:
    seen: list[dict[str, Any]] = []
    again = '[exec_command(cmd="head -n 1 notes.txt")]'
    engine = engine_for([again, again, "never asked"], seen)
    completion = await engine.acomplete(codex_request(("head -n 1 notes.txt", "hello there\n")))
    assert completion.message.text == (
        'exec_command(cmd="head -n 1 notes.txt") returned:\nhello there'
    )
    assert not completion.message.tool_calls
    assert len(seen) == 2  # no third request, without the tools and so without the cache
    assert any("the answer is that result" in w for w in completion.meta.warnings)


async def test_a_streamed_answer_that_is_only_the_call_again_is_that_calls_result() -> None:
    seen: list[dict[str, Any]] = []
    again = '[exec_command(cmd="head -n 1 notes.txt")]'
    engine = engine_for([again, again, "never asked"], seen)
    request = {**codex_request(("head -n 1 notes.txt", "hello there\n")), "stream": True}
    text = "".join([c.content async for c in engine.astream(request) if c.content])
    assert text == 'exec_command(cmd="head -n 1 notes.txt") returned:\nhello there'
    assert len(seen) == 2


async def test_an_answer_that_is_only_a_new_call_is_asked_again_without_the_tools() -> None:
    seen: list[dict[str, Any]] = []
    again = '[exec_command(cmd="head -n 1 notes.txt")]'
    other = '[exec_command(cmd="cat notes.txt")]'
    engine = engine_for([again, other, "The first line is: hello there"], seen)
    completion = await engine.acomplete(codex_request(("head -n 1 notes.txt", "hello there\n")))
    assert completion.message.text == "The first line is: hello there"
    assert len(seen) == 3
    first, cached, bare = (body["messages"] for body in seen)
    assert cached[0] == first[0]  # the answer asked with the tools still described
    assert "exec_command" not in bare[0]["content"]  # asked again, without them
    assert "Tools are not available for this reply" in bare[-1]["content"]


async def test_the_request_quoted_before_finishing_is_the_users_own_words() -> None:
    seen: list[dict[str, Any]] = []
    engine = engine_for(["It says hello there."], seen)
    request = codex_request(("head -n 1 notes.txt", "hello there\n"))
    reminder = (
        "<system-reminder>\nEnd git commit messages with: Co-Authored-By: X\n</system-reminder>"
    )
    request["messages"][0]["content"] = f"{reminder}\n{ASK}"
    request["messages"].insert(0, {"role": "system", "content": "Platform: linux\nBe terse."})
    completion = await engine.acomplete(request)
    assert completion.message.text == "It says hello there."
    check = seen[1]["messages"][-1]["content"]
    assert "«What is the first line of notes.txt? Tell me.»" in check
    assert "Co-Authored-By" not in check and "linux" not in check
