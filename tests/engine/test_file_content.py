"""The content of the file left to write, asked as plain text; toolshim writes the call."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolshim.capabilities import Registry, Source
from toolshim.engine import Engine
from toolshim.engine.file_content import content_of
from toolshim.testing import FunctionUpstream

SAID = "Count the lines in data.txt and write the number into a new file count.txt.\n17 data.txt"


@pytest.mark.parametrize(
    ("reply", "content"),
    [
        ("17", "17"),
        ("  `17`\n", "17"),
        ('"17 data.txt"', "17 data.txt"),
        ("```python\nprint('hi')\n```", "print('hi')"),
        ("The number of lines is 17.", None),  # a sentence about the value
        ("18", None),  # a value nobody said
        ("17\n18", None),
        ("", None),
    ],
)
def test_a_value_said_as_it_is_or_a_whole_block_is_the_content(
    reply: str, content: str | None
) -> None:
    assert content_of(reply, SAID) == content


def codex_request() -> dict[str, Any]:
    shell = {
        "type": "function",
        "function": {
            "name": "exec_command",
            "parameters": {
                "type": "object",
                "properties": {"cmd": {"type": "string"}},
                "required": ["cmd"],
            },
        },
    }
    plan = {"type": "function", "function": {"name": "update_plan", "parameters": {}}}
    count = {"name": "exec_command", "arguments": '{"cmd": "wc -l data.txt"}'}
    return {
        "model": "small",
        "messages": [
            {
                "role": "user",
                "content": "Primary working directory: /w\nCount the lines in data.txt and "
                "write the number into a new file count.txt.",
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "type": "function", "function": count}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "17 data.txt\n"},
        ],
        "tools": [shell, plan],
    }


@pytest.mark.parametrize(
    ("asked", "written"), [("17", True), ("17 data.txt", True), ("about 20", False)]
)
async def test_a_shell_agents_file_left_to_write_is_written_with_the_content_it_gives(
    asked: str, written: bool
) -> None:
    seen: list[dict[str, Any]] = []

    def model(body: dict[str, Any]) -> str:
        seen.append(body)
        last = body["messages"][-1]
        if last["role"] == "assistant":  # the opened write, when the content was not usable
            return last["content"] + '17")]'
        if last["content"].startswith("Reply with only the exact text to write into count.txt"):
            return asked
        return "The number of lines in data.txt is 17."

    upstream = FunctionUpstream(model)
    engine = Engine(
        upstream, mode="force", dialect="pythonic", registry=Registry(), offer_tools="coding"
    )
    engine.registry.learn(upstream.key, "small", "prefill", "yes", Source.UPSTREAM)
    completion = await engine.acomplete(codex_request())
    (call,) = completion.message.tool_calls
    command = json.loads(call.arguments)["cmd"]
    if written:
        assert command == "cat > /w/count.txt <<'TOOLSHIM_EOF'\n17\nTOOLSHIM_EOF"
        assert len(seen) == 2
        assert any("asked for its content alone" in w for w in completion.meta.warnings)
    else:  # not a value anybody said: the write is opened for the model, as before
        assert command == "cat > /w/count.txt <<'EOF'\n17\nEOF" and len(seen) == 3
