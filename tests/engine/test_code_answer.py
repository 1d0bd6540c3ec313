"""An answer that gives a file's whole new content, made the call that writes it, and the
answers that must stay answers: snippets, shell sessions, files nobody named."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolshim.capabilities.facts import Source
from toolshim.capabilities.registry import Registry
from toolshim.engine import Engine
from toolshim.engine.code_answer import written_file_call
from toolshim.testing import FunctionUpstream
from toolshim.types import ChatRequest, Message, ToolCall, ToolSpec

STRING = {"type": "string"}
WRITE = ToolSpec(
    "Write",
    "Write a file",
    {"type": "object", "properties": {"file_path": STRING, "content": STRING}},
)
READ = ToolSpec("Read", "Read a file", {"type": "object", "properties": {"file_path": STRING}})
EXEC = ToolSpec("exec_command", "Run", {"type": "object", "properties": {"cmd": STRING}})
SHELL = ToolSpec(
    "shell",
    "Run",
    {"type": "object", "properties": {"command": {"type": "array", "items": STRING}}},
)
GREET = 'def greet(name):\n    return "Hello, " + nam + "!"\n'
FIXED = 'def greet(name):\n    return "Hello, " + name + "!"\n'


def conversation(tools: tuple[ToolSpec, ...], read: str | None = GREET) -> ChatRequest:
    messages = [
        Message(
            "user", "Primary working directory: /w\n\npython3 test_greet.py fails. Fix greet.py."
        ),
    ]
    if read is not None:
        messages += [
            Message(
                "assistant",
                "",
                tool_calls=(ToolCall("c1", "Read", '{"file_path": "/w/greet.py"}'),),
            ),
            Message(
                "tool",
                "\n".join(f"{i}\t{line}" for i, line in enumerate(read.splitlines(), 1)),
                tool_call_id="c1",
            ),
        ]
    return ChatRequest(model="m", messages=tuple(messages), tools=tools)


def test_the_fixed_file_in_an_answer_becomes_a_write_of_it() -> None:
    answer = f"To fix the NameError, here's the corrected code:\n\n```python\n# greet.py\n{FIXED}```\n\nRun the test again."
    call = written_file_call(conversation((READ, WRITE)), answer)
    assert call is not None
    assert (call.name, call.arguments) == ("Write", {"file_path": "/w/greet.py", "content": FIXED})


def test_the_file_can_be_named_by_the_text_before_the_block() -> None:
    answer = f"Change greet.py to:\n```\n{FIXED}```"
    call = written_file_call(conversation((READ, WRITE)), answer)
    assert call is not None and call.arguments["content"] == FIXED
    # The 1.5B's own words: the file named a sentence before "Here's the corrected code:".
    answer = (
        "To fix the `greet.py` file so that the test passes, you need to add the missing "
        f"variable `nam`. Here's the corrected code:\n\n```python\n{FIXED}```\n\nRun it again."
    )
    call = written_file_call(conversation((READ, WRITE)), answer)
    assert call is not None and call.arguments["content"] == FIXED
    both = f"Fix greet.py as test_greet.py expects:\n```python\n{FIXED}```"
    # Both named: the block is greet.py as read with its line fixed, so greet.py it is.
    call = written_file_call(conversation((READ, WRITE)), both)
    assert call is not None and call.arguments["file_path"] == "/w/greet.py"


def test_without_a_writing_tool_the_shell_writes_it() -> None:
    answer = f"```python\n# greet.py\n{FIXED}```"
    call = written_file_call(conversation((EXEC,)), answer)
    assert call is not None and call.name == "exec_command"
    assert call.arguments["cmd"] == f"cat > /w/greet.py <<'TOOLSHIM_EOF'\n{FIXED}TOOLSHIM_EOF"
    array = written_file_call(conversation((SHELL,)), answer)
    assert array is not None and array.arguments["command"][:2] == ["bash", "-lc"]


def test_answers_that_are_not_a_whole_file_stay_answers() -> None:
    long = "".join(f"x{i} = {i}\n" for i in range(20)) + GREET
    request = conversation((READ, WRITE), read=long)
    snippet = f"The bug is here:\n```python\n# greet.py\n{FIXED}```"
    assert written_file_call(request, snippet) is None  # 2 lines of a 22-line file
    same = f"```python\n# greet.py\n{GREET}```"
    assert written_file_call(conversation((READ, WRITE)), same) is None  # nothing changed
    shell = "Run:\n```bash\npython3 test_greet.py\n```"
    assert written_file_call(conversation((READ, WRITE)), shell) is None
    stranger = f"```python\n# other.py\n{FIXED}```"
    assert written_file_call(conversation((READ, WRITE)), stranger) is None  # nobody named it
    two = f"```python\n# greet.py\n{FIXED}```\n```python\n# test_greet.py\nprint(1)\n```"
    # A block for the test the request runs is left out (tests are left as they are): the
    # fix alone is written.
    fixed = written_file_call(conversation((READ, WRITE)), two)
    assert fixed is not None and fixed.arguments["file_path"] == "/w/greet.py"
    assert written_file_call(conversation((READ,)), snippet.replace("The bug is here:", "")) is None


def continuing_engine(model: Any) -> Engine:
    """A coding agent's engine (tools left out for a small model) in front of an upstream that
    continues an assistant message, as llama.cpp does (next_step's rule)."""
    upstream = FunctionUpstream(model)
    engine = Engine(
        upstream, mode="force", dialect="pythonic", registry=Registry(), offer_tools="coding"
    )
    engine.registry.learn(upstream.key, "small", "prefill", "yes", Source.UPSTREAM)
    return engine


def claude_tool(name: str, **properties: Any) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": name,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": list(properties),
            },
        },
    }


async def test_a_coding_agent_gets_the_write_its_model_described() -> None:
    """Through the engine: the 1.5B's answer after reading greet.py, as Claude Code sends it."""
    answer = (
        "To fix the `NameError` in `greet.py`, you need to define the variable `nam`. Here's the "
        f"corrected code:\n\n```python\n# greet.py\n{FIXED}```\n\nNow run the test again."
    )
    engine = continuing_engine(lambda body: answer)
    body = {
        "model": "small",
        "tools": [
            claude_tool("Agent", prompt=STRING),
            claude_tool("Read", file_path=STRING),
            claude_tool("Write", file_path=STRING, content=STRING),
        ],
        "messages": [
            {
                "role": "user",
                "content": "Primary working directory: /w\n\nFix greet.py so that python3 test_greet.py passes.",
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "Read", "arguments": '{"file_path": "/w/greet.py"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": GREET},
        ],
    }
    completion = await engine.acomplete(body)
    calls = completion.message.tool_calls
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [
        ("Write", {"file_path": "/w/greet.py", "content": FIXED})
    ], completion.meta
    assert any("file's new content" in w for w in completion.meta.warnings)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_model_that_repeats_its_plan_is_opened_as_the_edit_instead_of_giving_up(
    stream: bool,
) -> None:
    """The 1.5B after reading test_calc.py and calc.py: its plan again (both calls answered),
    again after being told; opened as the edit of calc.py, it writes the fix."""
    plan = '[Read(file_path="/w/calc.py"), Bash(command="python3 test_calc.py")]'
    seen: list[dict[str, Any]] = []

    def model(body: dict[str, Any]) -> str:
        seen.append(body)
        last = body["messages"][-1]
        if last["role"] == "assistant":
            return last["content"] + 'return a - b", new_string="return a + b")]'
        return plan

    engine = continuing_engine(model)

    def called(i: int, name: str, arguments: dict[str, str], result: str) -> list[dict[str, Any]]:
        call = {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
        return [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": result},
        ]

    body = {
        "model": "small",
        "tools": [
            claude_tool("Agent", prompt=STRING),
            claude_tool("Read", file_path=STRING),
            claude_tool("Bash", command=STRING),
            claude_tool("Edit", file_path=STRING, old_string=STRING, new_string=STRING),
        ],
        "messages": [
            {
                "role": "user",
                "content": "Primary working directory: /w\n\npython3 test_calc.py fails. Fix the bug in calc.py.",
            },
            *called(1, "Read", {"file_path": "/w/test_calc.py"}, "assert add(2, 3) == 5"),
            *called(2, "Bash", {"command": "python3 test_calc.py"}, "Error: AssertionError: -1"),
            *called(3, "Read", {"file_path": "/w/calc.py"}, "def add(a, b):\n    return a - b"),
        ],
    }
    if stream:
        chunks = [c async for c in engine.astream({**body, "stream": True})]
        arguments = "".join(c.tool_calls[0].arguments or "" for c in chunks if c.tool_calls)
        names = [c.tool_calls[0].name for c in chunks if c.tool_calls and c.tool_calls[0].name]
    else:
        completion = await engine.acomplete(body)
        names = [c.name for c in completion.message.tool_calls]
        arguments = completion.message.tool_calls[0].arguments if names else ""
    assert names == ["Edit"]
    assert json.loads(arguments) == {
        "file_path": "/w/calc.py",
        "old_string": "return a - b",
        "new_string": "return a + b",
    }
    assert seen[-1]["messages"][-1]["content"] == '[Edit(file_path="/w/calc.py", old_string="'


async def test_a_count_to_write_is_opened_as_a_command_not_as_the_write() -> None:
    """Asked to write data.txt's line count, the 1.5B wrote 16 for 17 when opened as the
    write; a count is a command's to make, opened up to the command (opened at the name
    only, it wrote ``Bash(rg -l …)`` with no argument name). Claude Code's reminder about
    pull requests "you create" does not make a question a change to make."""
    seen: list[dict[str, Any]] = []

    def model(body: dict[str, Any]) -> str:
        seen.append(body)
        last = body["messages"][-1]
        if last["role"] == "assistant":
            return last["content"] + 'wc -l < data.txt > count.txt")]'
        return "data.txt has 16 lines."

    engine = continuing_engine(model)
    read = {
        "id": "c1",
        "type": "function",
        "function": {"name": "Read", "arguments": '{"file_path": "/w/data.txt"}'},
    }
    body = {
        "model": "small",
        "tools": [
            claude_tool("Agent", prompt=STRING),
            claude_tool("Read", file_path=STRING),
            claude_tool("Bash", command=STRING),
            claude_tool("Write", file_path=STRING, content=STRING),
        ],
        "messages": [
            {
                "role": "user",
                "content": "Primary working directory: /w\n\nCount the lines in data.txt and write the number into a new file count.txt.",
            },
            {"role": "assistant", "content": None, "tool_calls": [read]},
            {"role": "tool", "tool_call_id": "c1", "content": "a\nb\nc"},
        ],
    }
    completion = await engine.acomplete(body)
    calls = [(c.name, json.loads(c.arguments)) for c in completion.message.tool_calls]
    assert calls == [("Bash", {"command": "wc -l < data.txt > count.txt"})], completion.meta
    assert seen[-1]["messages"][-1]["content"] == '[Bash(command="'


async def test_claude_codes_reminder_does_not_make_a_question_a_change() -> None:
    """ "What is the capital of France?" under Claude Code's reminder ("pull requests you
    create"): answered, not opened as a call."""
    seen: list[dict[str, Any]] = []

    def model(body: dict[str, Any]) -> str:
        seen.append(body)
        last = body["messages"][-1]
        if last["role"] == "assistant":
            return last["content"] + 'Read(file_path="/w/capitals.txt")]'
        return "Paris"

    engine = continuing_engine(model)
    reminder = (
        "<system-reminder>\nAttribution for git commits and pull requests you create from here "
        "on: end commit messages with Co-Authored-By.\n</system-reminder>\n\n"
    )
    body = {
        "model": "small",
        "tools": [claude_tool("Agent", prompt=STRING), claude_tool("Read", file_path=STRING)],
        "messages": [
            {
                "role": "user",
                "content": reminder + "What is the capital of France? Answer in one word.",
            }
        ],
    }
    completion = await engine.acomplete(body)
    assert completion.message.text == "Paris" and not completion.message.tool_calls
    assert len(seen) == 1


async def test_once_the_count_is_in_a_result_the_write_is_opened() -> None:
    """The 1.5B ran grep -c (3), then, opened as a command again, ran it again: once a
    command has run, the file asked for is opened as its write."""
    seen: list[dict[str, Any]] = []

    def model(body: dict[str, Any]) -> str:
        seen.append(body)
        last = body["messages"][-1]
        if last["role"] == "assistant":
            return last["content"] + '3")]'
        return "3"

    engine = continuing_engine(model)
    grep = {
        "id": "c1",
        "type": "function",
        "function": {"name": "Bash", "arguments": '{"command": "grep -c ERROR app.log"}'},
    }
    body = {
        "model": "small",
        "tools": [
            claude_tool("Agent", prompt=STRING),
            claude_tool("Bash", command=STRING),
            claude_tool("Write", file_path=STRING, content=STRING),
        ],
        "messages": [
            {
                "role": "user",
                "content": "Primary working directory: /w\n\nHow many lines of app.log contain ERROR? Write the number into a new file errors.txt.",
            },
            {"role": "assistant", "content": None, "tool_calls": [grep]},
            {"role": "tool", "tool_call_id": "c1", "content": "3"},
        ],
    }
    completion = await engine.acomplete(body)
    calls = [(c.name, json.loads(c.arguments)) for c in completion.message.tool_calls]
    assert calls == [("Write", {"file_path": "/w/errors.txt", "content": "3"})], completion.meta
    assert seen[-1]["messages"][-1]["content"] == '[Write(file_path="/w/errors.txt", content="'


def test_a_block_that_changes_lines_of_a_read_file_is_written_into_it() -> None:
    """The 1.5B read greet.py through Codex, then answered with the fixed function and a
    test after it, naming test_greet.py: greet.py gets the changed line, nothing else."""
    from toolshim.engine.code_answer import written_file_call
    from toolshim.types import ChatRequest, Message, ToolCall, ToolSpec

    shell = ToolSpec(
        "exec_command", "", {"type": "object", "properties": {"cmd": {"type": "string"}}}
    )
    read = ToolCall("c1", "exec_command", '{"cmd": "cat /w/greet.py"}')
    request = ChatRequest(
        model="m",
        messages=(
            Message(
                "user",
                "Primary working directory: /w\npython3 test_greet.py fails with a NameError. "
                "Fix greet.py.",
            ),
            Message("assistant", "", tool_calls=(read,)),
            Message(
                "tool",
                'Process exited with code 0\nOutput:\ndef greet(name):\n    return "Hello, " + '
                'nam + "!"\n',
                tool_call_id="c1",
            ),
        ),
        tools=(shell,),
    )
    answer = (
        "To fix the code in `test_greet.py`, define `nam`. Here's the corrected code:\n\n"
        '```python\ndef greet(name):\n    return "Hello, " + name + "!"\n\n'
        '# Call the greet function\nassert greet("Ada") == "Hello, Ada!"\n```\n'
    )
    call = written_file_call(request, answer)
    assert call is not None and call.name == "exec_command"
    assert call.arguments == {
        "cmd": "cat > /w/greet.py <<'TOOLSHIM_EOF'\ndef greet(name):\n"
        '    return "Hello, " + name + "!"\nTOOLSHIM_EOF'
    }
    # A block that changes nothing, or shares too little with the file, is no fix of it.
    same = answer.replace("+ name +", "+ nam +")
    assert written_file_call(request, same) is None
    other = "```python\nimport os\nprint(os.getcwd())\n```"
    assert written_file_call(request, other) is None
