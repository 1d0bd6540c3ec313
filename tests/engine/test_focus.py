"""A long tool list shown to a small model: only the offered tools, condensed schemas, and
nothing left out without a warning. Against the engine with a recording fake upstream."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolshim.capabilities.facts import Source
from toolshim.capabilities.registry import Registry
from toolshim.engine import Engine
from toolshim.engine.focus import (
    CODING_TOOLS,
    condense_tools,
    first_sentences,
    parse_offer_tools,
    schema_size,
)
from toolshim.testing import FunctionUpstream, prefilling
from toolshim.types import ChatRequest, ToolSpec

LONG = (
    "Executes a given bash command and returns its output. The working directory persists "
    "between commands. " + "IMPORTANT: this is a long paragraph of usage notes. " * 40
)


def tool(name: str, description: str = LONG, **properties: Any) -> dict[str, Any]:
    props = properties or {
        "command": {"type": "string", "description": "The command to run. " + "More. " * 30},
        "timeout": {"type": "number", "description": "Optional timeout in ms.", "examples": [1]},
        "mode": {"type": "string", "enum": ["fast", "slow"], "description": "How."},
        "nested": {
            "type": "object",
            "properties": {"deep": {"type": "array", "items": {"type": "integer"}}},
            "required": ["deep"],
        },
    }
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": props, "required": ["command"]},
        },
    }


CLAUDE_TOOLS = [tool(n) for n in ("Agent", "Bash", "Edit", "Read", "ScheduleWakeup", "Write")]


def request(tools: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "model": "small",
        "messages": [{"role": "user", "content": "Create greeting.txt saying hi"}],
        "tools": tools,
    }


async def served(tools: list[dict[str, Any]], **options: Any) -> tuple[str, list[str]]:
    upstream = FunctionUpstream(lambda body: "I will do it.")
    engine = Engine(upstream, mode="force", dialect="hermes", registry=Registry(), **options)
    completion = await engine.acomplete(request(tools))
    system = upstream.history[0]["messages"][0]["content"]
    return system, list(completion.meta.warnings)


async def test_only_the_offered_tools_reach_the_prompt_and_the_rest_are_named() -> None:
    system, warnings = await served(CLAUDE_TOOLS, offer_tools="coding")
    assert '"name": "Bash"' in system and '"name": "Write"' in system
    assert '"name": "Agent"' not in system and "ScheduleWakeup" not in system
    (note,) = [w for w in warnings if w.startswith("tools left out")]
    assert "Agent" in note and "ScheduleWakeup" in note and "Bash" not in note


async def test_a_request_without_any_offered_tool_keeps_all_of_them() -> None:
    tools = [tool("get_weather"), tool("get_time")]
    system, warnings = await served(tools, offer_tools="coding")
    assert '"name": "get_weather"' in system and '"name": "get_time"' in system
    assert not [w for w in warnings if w.startswith("tools left out")]


async def test_long_schemas_are_condensed_in_the_prompt_and_short_ones_are_not() -> None:
    full, _ = await served(CLAUDE_TOOLS, compact_tools=False)
    auto, _ = await served(CLAUDE_TOOLS)
    assert len(auto) < len(full) / 2
    assert full.count("long paragraph of usage notes") == 40 * len(CLAUDE_TOOLS)
    assert auto.count("long paragraph of usage notes") <= 5 * len(CLAUDE_TOOLS)
    short = [tool("get_weather", "Current weather for a city.", city={"type": "string"})]
    assert schema_size([ToolSpec("x", LONG)]) > 0
    plain, _ = await served(short, compact_tools=None)
    forced, _ = await served(short, compact_tools=True)
    assert plain == forced  # nothing to condense in a short schema


def test_condensing_keeps_names_types_enums_required_and_nesting() -> None:
    spec = ToolSpec("Bash", LONG, tool("Bash")["function"]["parameters"])
    (short,) = condense_tools([spec])
    assert short.description.startswith("Executes a given bash command and returns its output.")
    assert len(short.description) <= 320
    props = short.parameters["properties"]
    assert list(props) == ["command", "timeout", "mode", "nested"]
    assert props["mode"]["enum"] == ["fast", "slow"]
    assert "examples" not in props["timeout"]
    assert props["nested"]["properties"]["deep"] == {"type": "array", "items": {"type": "integer"}}
    assert short.parameters["required"] == ["command"]
    assert spec.parameters["properties"]["timeout"]["examples"] == [1]  # the caller's untouched


async def test_calls_are_still_checked_against_the_full_schema() -> None:
    call = {"tool_calls": [{"name": "Bash", "arguments": {"timeout": 5}}]}  # no command
    upstream = FunctionUpstream(lambda body: json.dumps(call))
    engine = Engine(upstream, mode="force", registry=Registry(), max_reasks=1)
    completion = await engine.acomplete(request(CLAUDE_TOOLS))
    assert completion.meta.reasks == 1
    correction = json.dumps(upstream.history[1]["messages"][-1])
    assert "command" in correction  # the required parameter the condensed prompt also shows
    assert not completion.tool_calls


def test_first_sentences_cut_at_sentence_ends_and_within_the_limit() -> None:
    text = "One two. Three four five. Six."
    assert first_sentences(text, 100) == text
    assert first_sentences(text, 26) == "One two. Three four five."
    assert first_sentences("x" * 50 + " y", 20).endswith("…")
    assert len(first_sentences("word " * 100, 30)) <= 30


def test_offer_tools_parses_names_patterns_coding_and_all() -> None:
    assert parse_offer_tools("Bash, Read*") == ("Bash", "Read*")
    assert parse_offer_tools("coding") == CODING_TOOLS
    assert parse_offer_tools("all") is None
    assert parse_offer_tools("") is None
    assert parse_offer_tools(None) is None


CLAUDE_SYSTEM = "You are Claude Code. " + "Many rules about git, sub-agents and skills. " * 200
CLAUDE_ENVIRONMENT = (
    "# Environment\nYou have been invoked in the following environment: \n"
    " - Primary working directory: /tmp/task\n - Is a git repository: false\n"
    " - Platform: linux\n - Shell: bash\nThe following deferred tools are now available: X"
)


async def test_a_coding_agents_instructions_become_a_brief_with_its_environment() -> None:
    upstream = FunctionUpstream(lambda body: "Done.")
    engine = Engine(upstream, mode="force", registry=Registry(), offer_tools="coding")
    body = request(CLAUDE_TOOLS)
    body["messages"] = [
        {"role": "system", "content": CLAUDE_SYSTEM},
        *body["messages"],
        {"role": "system", "content": CLAUDE_ENVIRONMENT},
    ]
    completion = await engine.acomplete(body)
    system = upstream.history[0]["messages"][0]["content"]
    assert system.startswith("You are a coding agent")
    assert "/tmp/task" not in system  # the same system message for every session
    assert "sub-agents" not in system and "deferred tools" not in system
    first_user = upstream.history[0]["messages"][1]["content"]
    assert first_user.startswith("Environment:\n- Primary working directory: /tmp/task")
    assert "- Platform: linux" in first_user
    (note,) = [w for w in completion.meta.warnings if w.startswith("system prompt condensed")]
    assert str(len(CLAUDE_SYSTEM)) not in note  # the count is of what was left out, not zero
    assert first_user.endswith("Create greeting.txt saying hi")  # the user's words kept


async def test_full_system_and_unfocused_requests_keep_the_callers_instructions() -> None:
    for options in ({"offer_tools": "coding", "brief_system": False}, {}):
        upstream = FunctionUpstream(lambda body: "Done.")
        engine = Engine(upstream, mode="force", registry=Registry(), **options)
        body = request(CLAUDE_TOOLS)
        body["messages"] = [{"role": "system", "content": CLAUDE_SYSTEM}, *body["messages"]]
        completion = await engine.acomplete(body)
        assert CLAUDE_SYSTEM in upstream.history[0]["messages"][0]["content"]
        assert not [w for w in completion.meta.warnings if w.startswith("system prompt")]


async def test_a_coding_agents_turn_takes_the_first_step_of_a_chain() -> None:
    """The 1.5B's read-then-write in one reply, the write needing the read's result."""
    chain = (
        '[Read(file_path="config.ini"), Write(file_path="port.txt", '
        'content=str(Bash(command="grep port config.ini")))]'
    )
    path = {"type": "string"}
    tools = [
        tool("Agent", prompt=path),
        tool("Bash", command=path),
        tool("Read", file_path=path),
        tool("Write", file_path=path, content=path),
    ]
    for spec in tools:
        props = spec["function"]["parameters"]["properties"]
        spec["function"]["parameters"]["required"] = list(props)
    body = request(tools)
    body["messages"][0]["content"] = "Read config.ini and write its port into port.txt"
    upstream = FunctionUpstream(lambda body: chain)
    engine = Engine(
        upstream, mode="force", dialect="pythonic", registry=Registry(), offer_tools="coding"
    )
    completion = await engine.acomplete(body)
    assert [c.name for c in completion.message.tool_calls] == ["Read"], completion.meta
    assert json.loads(completion.message.tool_calls[0].arguments) == {"file_path": "config.ini"}
    assert completion.meta.reasks == 0 and len(upstream.history) == 1
    assert any(w.startswith("one step at a time") for w in completion.meta.warnings)
    unfocused = Engine(
        FunctionUpstream(lambda body: chain), mode="force", dialect="pythonic", registry=Registry()
    )
    assert (await unfocused.acomplete(body)).meta.reasks > 0


async def test_a_coding_agents_plan_keeps_the_calls_that_need_no_result() -> None:
    """The 1.5B's plan for "change the version in VERSION and setup.cfg": two reads and two
    edits whose values the request holds go out together; a write of a value nobody said
    (it needs a result) and everything after it wait."""
    path = {"type": "string"}
    tools = [
        tool("Agent", prompt=path),  # left out: a small model's coding-agent turn
        tool("Read", file_path=path),
        tool("Edit", file_path=path, old_string=path, new_string=path),
        tool("Write", file_path=path, content=path),
    ]
    for spec in tools:
        props = spec["function"]["parameters"]["properties"]
        spec["function"]["parameters"]["required"] = list(props)
    plan = (
        '[Read(file_path="VERSION"), Read(file_path="setup.cfg"), '
        'Edit(file_path="VERSION", old_string="1.2.3", new_string="1.3.0"), '
        'Edit(file_path="setup.cfg", old_string="1.2.3", new_string="1.3.0"), '
        'Write(file_path="notes.txt", content="released 1.3.0 as widget-pro"), '
        'Read(file_path="notes.txt")]'
    )
    body = request(tools)
    body["messages"][0]["content"] = (
        "Change the version from 1.2.3 to 1.3.0 in both VERSION and setup.cfg."
    )
    engine = Engine(
        FunctionUpstream(lambda body: plan),
        mode="force",
        dialect="pythonic",
        registry=Registry(),
        offer_tools="coding",
    )
    completion = await engine.acomplete(body)
    calls = [(c.name, json.loads(c.arguments)) for c in completion.message.tool_calls]
    assert calls == [
        ("Read", {"file_path": "VERSION"}),
        ("Read", {"file_path": "setup.cfg"}),
        ("Edit", {"file_path": "VERSION", "old_string": "1.2.3", "new_string": "1.3.0"}),
        ("Edit", {"file_path": "setup.cfg", "old_string": "1.2.3", "new_string": "1.3.0"}),
    ], completion.meta
    assert any("'Write', 'Read' left for the next turn" in w for w in completion.meta.warnings)


async def test_a_coding_agent_is_told_which_named_files_no_call_has_used() -> None:
    """After reading the test it was told to fix, the model hears that calc.py, named in the
    request, is still untouched; the reminder's own file names are not the user's."""
    upstream = FunctionUpstream(lambda body: "Done.")
    engine = Engine(
        upstream, mode="force", dialect="pythonic", registry=Registry(), offer_tools="coding"
    )
    body = request([tool("Agent"), tool("Read", file_path={"type": "string"})])
    body["messages"] = [
        {
            "role": "user",
            "content": "<system-reminder>Read CLAUDE.md first.</system-reminder>\n"
            "python3 test_calc.py fails. Fix the bug in calc.py so that the test passes.",
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "Read", "arguments": '{"file_path": "test_calc.py"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "from calc import add"},
    ]
    await engine.acomplete(body)
    asked = upstream.history[0]["messages"][-1]["content"]
    assert "not used by any call yet: calc.py." in asked, asked


async def test_a_coding_agents_prompt_keeps_its_system_message_across_turns() -> None:
    """The upstream's cache serves what is byte for byte the same: the system message."""
    upstream = FunctionUpstream(lambda body: "Done.")
    engine = Engine(
        upstream, mode="force", dialect="pythonic", registry=Registry(), offer_tools="coding"
    )
    first = request(CLAUDE_TOOLS)
    await engine.acomplete(first)
    later = request(CLAUDE_TOOLS)
    later["messages"] += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "Bash", "arguments": '{"command": "ls"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "greeting.txt"},
    ]
    await engine.acomplete(later)
    one, two = (h["messages"] for h in upstream.history[:2])
    assert one[0] == two[0]
    assert two[1]["content"].startswith(one[1]["content"])  # the question, then the results


def after_read(tools: list[dict[str, Any]]) -> dict[str, Any]:
    body = request(tools)
    body["messages"][0]["content"] = "Read config.ini and write its port into port.txt"
    read = {"name": "Read", "arguments": '{"file_path": "config.ini"}'}
    body["messages"] += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": read}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "[server]\nport = 8421\n"},
    ]
    return body


FILE_TOOLS = [
    tool(name, **{p: {"type": "string"} for p in params})
    for name, params in (
        ("Agent", ["prompt"]),
        ("Read", ["file_path"]),
        ("Write", ["file_path", "content"]),
    )
]
for _spec in FILE_TOOLS:
    _spec["function"]["parameters"]["required"] = list(
        _spec["function"]["parameters"]["properties"]
    )


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_coding_agent_that_answers_where_a_step_is_left_is_asked_once(stream: bool) -> None:
    replies = iter(
        [
            "The port setting in config.ini is 8421.",
            '[Write(file_path="port.txt", content="8421")]',
        ]
    )
    upstream = FunctionUpstream(lambda body: next(replies))
    engine = Engine(
        upstream, mode="force", dialect="pythonic", registry=Registry(), offer_tools="coding"
    )
    body = after_read(FILE_TOOLS)
    if stream:
        chunks = [c async for c in engine.astream({**body, "stream": True})]
        text = "".join(c.content or "" for c in chunks)
        names = [c.tool_calls[0].name for c in chunks if c.tool_calls and c.tool_calls[0].name]
        assert names == ["Write"] and "8421." not in text  # the held answer never went out
    else:
        completion = await engine.acomplete(body)
        assert [c.name for c in completion.message.tool_calls] == ["Write"]
    check = upstream.history[1]["messages"][-1]["content"]
    assert "If any part of it is not done yet" in check


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_the_answer_before_the_check_is_returned_when_the_model_answers_it(
    stream: bool,
) -> None:
    """Asked whether every part was done, the 1.5B replied "Yes, all parts of the reminder
    are done." in place of its answer, 35350."""
    replies = iter(["The script prints 35350.", "Yes, all parts are done."])
    upstream = FunctionUpstream(lambda body: next(replies))
    engine = Engine(
        upstream, mode="force", dialect="pythonic", registry=Registry(), offer_tools="coding"
    )
    body = after_read(FILE_TOOLS)
    body["messages"][0]["content"] = "What does config.ini set the port to?"
    if stream:
        chunks = [c async for c in engine.astream({**body, "stream": True})]
        text = "".join(c.content or "" for c in chunks)
    else:
        text = (await engine.acomplete(body)).message.content or ""
    assert text == "The script prints 35350." and len(upstream.history) == 2


async def test_a_coding_agents_answer_confirmed_once_is_returned() -> None:
    upstream = FunctionUpstream(lambda body: "Done: port.txt holds 8421.")
    engine = Engine(
        upstream, mode="force", dialect="pythonic", registry=Registry(), offer_tools="coding"
    )
    completion = await engine.acomplete(after_read(FILE_TOOLS))
    assert completion.message.content == "Done: port.txt holds 8421."
    assert len(upstream.history) == 2  # the answer, the check, no more
    plain = FunctionUpstream(lambda body: "The port is 8421.")
    unfocused = Engine(plain, mode="force", dialect="pythonic", registry=Registry())
    await unfocused.acomplete(after_read(FILE_TOOLS))
    assert len(plain.history) == 1  # an application's own turn is answered as before


async def test_a_coding_agents_tools_show_only_required_parameters() -> None:
    path = {"type": "string", "description": "The absolute path."}
    read = tool(
        "Read",
        "Reads a file.",
        file_path=path,
        limit={"type": "integer", "description": "Lines to read. Only if the file is large."},
    )
    read["function"]["parameters"]["required"] = ["file_path"]
    focused, _ = await served([read, tool("Agent")], offer_tools="coding")
    assert "file_path" in focused and "limit" not in focused
    upstream = FunctionUpstream(
        lambda body: (
            '<tool_call>{"name": "Read", "arguments": {"file_path": "a", "limit": 5}}</tool_call>'
        )
    )
    engine = Engine(
        upstream, mode="force", dialect="hermes", registry=Registry(), offer_tools="coding"
    )
    completion = await engine.acomplete(request([read, tool("Agent")]))
    assert json.loads(completion.message.tool_calls[0].arguments) == {"file_path": "a", "limit": 5}
    full, _ = await served([read, tool("Agent")], offer_tools="coding", compact_tools=False)
    assert "limit" in full


async def test_a_coding_agents_step_is_not_reasked_for_the_numbers_of_its_environment() -> None:
    reply = '[Read(file_path="config.ini")]'
    upstream = FunctionUpstream(lambda body: reply)
    engine = Engine(
        upstream, mode="force", dialect="pythonic", registry=Registry(), offer_tools="coding"
    )
    read = tool("Read", file_path={"type": "string"}, limit={"type": "integer"})
    read["function"]["parameters"]["required"] = ["file_path"]
    body = request([read, FILE_TOOLS[2], FILE_TOOLS[0]])
    body["messages"] = [
        {
            "role": "system",
            "content": "Env:\n - Primary working directory: /tmp/run-42\nToday's date is 2026-11-28.",
        },
        {"role": "user", "content": "Read config.ini and write its port into port.txt"},
    ]
    completion = await engine.acomplete(body)
    assert [c.name for c in completion.message.tool_calls] == ["Read"]
    assert completion.meta.reasks == 0 and len(upstream.history) == 1


def coding_engine(upstream: FunctionUpstream, dialect: str = "pythonic") -> Engine:
    engine = Engine(
        upstream, mode="force", dialect=dialect, registry=Registry(), offer_tools="coding"
    )
    engine.registry.learn(upstream.key, "small", "prefill", "yes", Source.UPSTREAM)
    return engine


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize(
    ("dialect", "continued"),
    [
        ("pythonic", '8421")]'),
        ("hermes", '8421"}}\n</tool_call>'),
    ],
)
async def test_an_answer_where_a_change_is_left_is_opened_as_the_next_call(
    stream: bool, dialect: str, continued: str
) -> None:
    seen: list[dict[str, Any]] = []
    upstream = FunctionUpstream(prefilling("The port is 8421.", continued, seen))
    engine = coding_engine(upstream, dialect)
    body = after_read(FILE_TOOLS)
    if stream:
        chunks = [c async for c in engine.astream({**body, "stream": True})]
        calls = [c.tool_calls[0] for c in chunks if c.tool_calls and c.tool_calls[0].name]
        assert "8421." not in "".join(c.content or "" for c in chunks)
    else:
        calls = list((await engine.acomplete(body)).message.tool_calls)
    assert [c.name for c in calls] == ["Write"]
    if not stream:
        assert json.loads(calls[0].arguments or "") == {"file_path": "port.txt", "content": "8421"}
    assert len(seen) == 2 and seen[1]["messages"][-1]["role"] == "assistant"
    # Opened as the write of the file the request asks for, up to its content.
    opening = seen[1]["messages"][-1]["content"]
    assert opening.endswith(('content="', '"content": "')) and "port.txt" in opening


async def test_the_answer_stands_when_the_opened_call_repeats_a_result_or_nothing_is_left() -> None:
    seen: list[dict[str, Any]] = []
    repeat = 'Read(file_path="config.ini")]'
    upstream = FunctionUpstream(prefilling("The port is 8421.", repeat, seen))
    changed = after_read(FILE_TOOLS)
    changed["messages"][0]["content"] = "Read config.ini and change its port to 9000"
    completion = await coding_engine(upstream).acomplete(changed)
    assert completion.message.content == "The port is 8421." and len(seen) == 2
    asked = after_read(FILE_TOOLS)
    asked["messages"][0]["content"] = "What port does config.ini set?"  # no change asked
    seen.clear()
    upstream = FunctionUpstream(prefilling("The port is 8421.", repeat, seen))
    completion = await coding_engine(upstream).acomplete(asked)
    assert completion.message.content == "The port is 8421."
    assert [m["role"] for m in seen[-1]["messages"]][-1] == "user"  # nothing opened


def test_a_change_counts_as_made_by_a_writing_tool_or_a_writing_command() -> None:
    from toolshim.engine.asked import changes as _changes

    assert _changes("Write", "{}") and _changes("Edit", "{}")
    assert _changes("Bash", '{"command": "echo 17 > count.txt"}')
    assert _changes("exec_command", '{"cmd": "sed -i s/a/b/ f.py"}')
    assert not _changes("Bash", '{"command": "wc -l data.txt 2>&1"}')
    assert not _changes("Read", '{"file_path": "x"}')


async def test_a_first_answer_in_text_to_a_change_request_is_opened_as_a_call() -> None:
    """Through Codex the 1.5B answered "create greeting.txt" with Python, not a call."""
    seen: list[dict[str, Any]] = []
    shell = tool("exec_command", "Runs a command.", cmd={"type": "string"})
    shell["function"]["parameters"]["required"] = ["cmd"]
    upstream = FunctionUpstream(
        prefilling(
            '[open("greeting.txt", "w").write("hi")]',
            'cmd="echo hi > greeting.txt")]',
            seen,
        )
    )
    completion = await coding_engine(upstream).acomplete(request([shell, tool("get_goal")]))
    (call,) = completion.message.tool_calls
    assert call.name == "exec_command"
    # The Python that writes the file is that write, in the agent's shell: no second request.
    assert json.loads(call.arguments) == {
        "cmd": "cat > greeting.txt <<'TOOLSHIM_EOF'\nhi\nTOOLSHIM_EOF"
    }
    assert len(seen) == 1
    # Any other answer is opened as the shell's call, which the model completes.
    seen.clear()
    upstream = FunctionUpstream(
        prefilling("I will create it.", 'cmd="echo hi > greeting.txt")]', seen)
    )
    completion = await coding_engine(upstream).acomplete(request([shell, tool("get_goal")]))
    (call,) = completion.message.tool_calls
    assert json.loads(call.arguments) == {"cmd": "echo hi > greeting.txt"}


async def test_after_results_a_coding_agent_is_told_to_take_the_next_step() -> None:
    agent = FunctionUpstream(lambda body: "Done.")
    await coding_engine(agent).acomplete(after_read(FILE_TOOLS))
    plain = FunctionUpstream(lambda body: "Done.")
    await Engine(plain, mode="force", dialect="pythonic", registry=Registry()).acomplete(
        after_read(FILE_TOOLS)
    )
    told = agent.history[0]["messages"][-1]["content"]
    assert "If a step of the request is still not done, make its call now" in told
    assert "make that call now" in agent.history[0]["messages"][0]["content"]  # the brief
    assert "If they give what is needed, answer now" in plain.history[0]["messages"][-1]["content"]


async def test_a_path_above_the_working_directory_is_pointed_into_it() -> None:
    """The 1.5B dropped the working directory's last folder from the path it wrote to."""
    reply = '[Write(file_path="/tmp/task/greeting.txt", content="hello")]'
    upstream = FunctionUpstream(lambda body: reply)
    engine = coding_engine(upstream)
    body = request(FILE_TOOLS)
    body["messages"] = [
        {"role": "system", "content": " - Primary working directory: /tmp/task/work"},
        {"role": "user", "content": "Create greeting.txt saying hello"},
    ]
    completion = await engine.acomplete(body)
    (call,) = completion.message.tool_calls
    assert json.loads(call.arguments)["file_path"] == "/tmp/task/work/greeting.txt"
    assert any("above the working directory" in w for w in completion.meta.warnings)


def working_in_task() -> ChatRequest:
    """A coding agent's request whose working directory is /tmp/task/work and whose user
    names /tmp/task/said.txt."""
    from toolshim.wire.openai_chat import parse_request

    return parse_request(
        {
            "model": "m",
            "messages": [
                {"role": "system", "content": "Primary working directory: /tmp/task/work"},
                {"role": "user", "content": "Copy it to /tmp/task/said.txt"},
            ],
        }
    )


@pytest.mark.parametrize(
    "path",
    ["/tmp/task/work/greeting.txt", "greeting.txt", "/etc/greeting.txt", "/tmp/task/said.txt"],
)
def test_paths_inside_the_working_directory_elsewhere_or_said_are_kept(path: str) -> None:
    from toolshim.dialects.calls import ParsedCall
    from toolshim.engine.focus import repair_paths

    chat = working_in_task()
    calls, notes = repair_paths(chat, [ParsedCall("Write", {"file_path": path})])
    assert calls[0].arguments == {"file_path": path} and notes == []


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("wc -l /tmp/task/data.txt", "wc -l /tmp/task/work/data.txt"),
        (
            "grep -c ERROR /tmp/task/app.log > /tmp/task/errors.txt",
            "grep -c ERROR /tmp/task/work/app.log > /tmp/task/work/errors.txt",
        ),
        # Kept: inside the working directory, elsewhere, said, relative, not a path.
        ("wc -l /tmp/task/work/data.txt", None),
        ("cat /etc/hostname && ls /tmp", None),
        ("cp data.txt /tmp/task/said.txt", None),
        ("wc -l data.txt", None),
        ("echo 3/4", None),
        ("cd /tmp/task && ls", None),  # a folder above it is not a file in it
        ("cd /tmp/task/work", None),
    ],
)
def test_paths_above_the_working_directory_in_a_command_are_pointed_into_it(
    command: str, expected: str | None
) -> None:
    """The 1.5B ran ``wc -l /tmp/task/data.txt`` through Claude Code's Bash for the working
    directory's data.txt, and then answered that it did not exist."""
    from toolshim.dialects.calls import ParsedCall
    from toolshim.engine.focus import repair_paths

    chat = working_in_task()
    calls, notes = repair_paths(chat, [ParsedCall("Bash", {"command": command})])
    assert calls[0].arguments == {"command": expected or command}
    assert bool(notes) == (expected is not None)


async def test_a_coding_agents_step_writes_at_most_1024_tokens() -> None:
    upstream = FunctionUpstream(lambda body: "Done.")
    body = {**request(FILE_TOOLS), "max_tokens": 32000}
    completion = await coding_engine(upstream).acomplete(body)
    assert upstream.history[0]["max_tokens"] == 1024
    assert "max_tokens lowered to 1024 for a small model's step" in completion.meta.warnings
    plain = FunctionUpstream(lambda body: "Done.")
    await Engine(plain, mode="force", registry=Registry()).acomplete(body)
    assert plain.history[0]["max_tokens"] == 32000


@pytest.mark.parametrize(
    ("dialect", "continued"),
    [("pythonic", '8421")]'), ("hermes", '8421"}}\n</tool_call>')],
)
async def test_with_a_shell_only_the_file_left_to_write_is_opened_as_a_here_document(
    dialect: str, continued: str
) -> None:
    """Through Codex the 0.5B read the port, then answered with it; opened as ``echo`` it
    wrote ``echo 8421`` and no file. The here-document names the file: the model writes the
    value, and the ``EOF`` it left out is added."""
    seen: list[dict[str, Any]] = []
    shell = tool("exec_command", "Runs a command.", cmd={"type": "string"})
    shell["function"]["parameters"]["required"] = ["cmd"]
    upstream = FunctionUpstream(prefilling("The port is 8421.", continued, seen))
    body = after_read([shell, tool("update_plan")])
    body["messages"][1]["tool_calls"][0]["function"] = {
        "name": "exec_command",
        "arguments": '{"cmd": "cat config.ini"}',
    }
    body["messages"][0]["content"] = (
        "Primary working directory: /w\nRead config.ini and write its port into a new file port.txt"
    )
    completion = await coding_engine(upstream, dialect).acomplete(body)
    (call,) = completion.message.tool_calls
    assert json.loads(call.arguments) == {"cmd": "cat > /w/port.txt <<'EOF'\n8421\nEOF"}
    assert seen[-1]["messages"][-1]["content"].endswith("<<'EOF'\\n")


async def test_a_coding_agents_results_reach_the_model_without_codexs_session_lines() -> None:
    shell = tool("exec_command", "Runs a command.", cmd={"type": "string"})
    body = after_read([shell, tool("update_plan")])
    body["messages"][2]["content"] = (
        "Chunk ID: 305e38\nWall time: 0.0000 seconds\nProcess exited with code 0\n"
        "Original token count: 2\nOutput:\nport = 8421\n"
    )
    coding = FunctionUpstream(lambda body: "Done.")
    completion = await coding_engine(coding).acomplete(body)
    prompt = json.dumps(coding.history[0]["messages"])
    assert "Process exited with code 0" in prompt and "8421" in prompt
    assert "Chunk ID" not in prompt and "Wall time" not in prompt
    assert any("session lines" in w for w in completion.meta.warnings)
    plain = FunctionUpstream(lambda body: "Done.")
    await Engine(plain, mode="force", dialect="pythonic", registry=Registry()).acomplete(body)
    assert "Chunk ID: 305e38" in json.dumps(plain.history[0]["messages"])


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_call_that_only_prints_a_new_files_text_is_opened_as_its_write(
    stream: bool,
) -> None:
    """Through Codex the 0.5B answered "create greeting.txt" with ``echo 'hi'``: no file."""
    seen: list[dict[str, Any]] = []
    shell = tool("exec_command", "Runs a command.", cmd={"type": "string"})
    shell["function"]["parameters"]["required"] = ["cmd"]
    printed = (
        '<tool_call>\n{"name": "exec_command", "arguments": {"cmd": "echo \'hi\'"}}\n</tool_call>'
    )
    upstream = FunctionUpstream(prefilling(printed, 'hi\\nEOF"}}\n</tool_call>', seen))
    engine = coding_engine(upstream, "hermes")
    body = request([shell, tool("update_plan")])
    if stream:
        chunks = [c async for c in engine.astream({**body, "stream": True})]
        arguments = "".join(c.tool_calls[0].arguments or "" for c in chunks if c.tool_calls)
    else:
        (call,) = (await engine.acomplete(body)).message.tool_calls
        arguments = call.arguments
    assert json.loads(arguments) == {"cmd": "cat > greeting.txt <<'EOF'\nhi\nEOF"}
    assert len(seen) == 2 and seen[1]["messages"][-1]["content"].endswith("<<'EOF'\\n")


@pytest.mark.parametrize(
    ("ask", "command"),
    [
        ("Create greeting.txt saying hi", "echo hi > greeting.txt"),
        ("Create greeting.txt saying hi", "echo hi | tee greeting.txt"),
        ("What is my PATH?", "echo $PATH"),
    ],
)
async def test_a_command_that_writes_or_a_request_that_creates_nothing_is_kept(
    ask: str, command: str
) -> None:
    shell = tool("exec_command", "Runs a command.", cmd={"type": "string"})
    shell["function"]["parameters"]["required"] = ["cmd"]
    reply = json.dumps({"name": "exec_command", "arguments": {"cmd": command}})
    upstream = FunctionUpstream(lambda body: f"<tool_call>\n{reply}\n</tool_call>")
    body = request([shell, tool("update_plan")])
    body["messages"][0]["content"] = ask
    (call,) = (await coding_engine(upstream, "hermes").acomplete(body)).message.tool_calls
    assert json.loads(call.arguments) == {"cmd": command} and len(upstream.history) == 1


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_before_the_turn_ends_the_file_a_pipeline_wrote_is_looked_at(stream: bool) -> None:
    """The 1.5B wrote ``=`` for the port with ``awk '{print $2}'`` and said it was done."""
    shell = tool("exec_command", "Runs a command.", cmd={"type": "string"})
    shell["function"]["parameters"]["required"] = ["cmd"]
    body = after_read([shell, tool("update_plan")])
    body["messages"][0]["content"] = "Write the port of config.ini into a new file port.txt"
    body["messages"][1]["tool_calls"][0]["function"] = {
        "name": "exec_command",
        "arguments": json.dumps({"cmd": "grep port config.ini | awk '{print $2}' > port.txt"}),
    }
    body["messages"][2]["content"] = "Process exited with code 0\nOutput:\n"
    upstream = FunctionUpstream(lambda body: "The port is written to port.txt.")
    engine = coding_engine(upstream)
    if stream:
        chunks = [c async for c in engine.astream({**body, "stream": True})]
        assert "written" not in "".join(c.content or "" for c in chunks)
        arguments = "".join(c.tool_calls[0].arguments or "" for c in chunks if c.tool_calls)
    else:
        completion = await engine.acomplete(body)
        (call,) = completion.message.tool_calls
        arguments = call.arguments
        assert any("sent a look at that file" in w for w in completion.meta.warnings)
    assert json.loads(arguments) == {"cmd": "head -n 40 config.ini port.txt"}
    assert len(upstream.history) == 1
    # Looked at, the model is asked for the file's content alone; what it gives is no value
    # anybody said, so its answer stands.
    looked = {"name": "exec_command", "arguments": '{"cmd": "head -n 40 config.ini port.txt"}'}
    body["messages"] += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c2", "type": "function", "function": looked}],
        },
        {"role": "tool", "tool_call_id": "c2", "content": "8421\n"},
    ]
    upstream.history.clear()
    completion = await engine.acomplete(body)
    assert completion.message.content == "The port is written to port.txt."
    assert len(upstream.history) == 2
    assert upstream.history[1]["messages"][-1]["content"].startswith(
        "Reply with only the exact text to write into port.txt"
    )


@pytest.mark.parametrize(("given", "rewritten"), [("8421", True), ("=", False)])
async def test_a_file_a_look_shows_wrong_is_written_again_with_the_content_the_model_gives(
    given: str, rewritten: bool
) -> None:
    """The 1.5B's awk wrote '=' for the port; shown it beside config.ini, it said it was done."""
    shell = tool("exec_command", "Runs a command.", cmd={"type": "string"})
    shell["function"]["parameters"]["required"] = ["cmd"]
    body = after_read([shell, tool("update_plan")])
    body["messages"][0]["content"] = "Write the port of config.ini into a new file port.txt"
    calls = [
        (
            "c1",
            "grep port config.ini | awk '{print $2}' > port.txt",
            "Process exited with code 0\nOutput:\n",
        ),
        (
            "c2",
            "head -n 40 config.ini port.txt",
            "==> config.ini <==\nport = 8421\n\n==> port.txt <==\n=\n",
        ),
    ]
    body["messages"] = body["messages"][:1]
    for call_id, command, result in calls:
        function = {"name": "exec_command", "arguments": json.dumps({"cmd": command})}
        body["messages"] += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": call_id, "type": "function", "function": function}],
            },
            {"role": "tool", "tool_call_id": call_id, "content": result},
        ]

    def model(request: dict[str, Any]) -> str:
        asked = request["messages"][-1]["content"].startswith("Reply with only the exact text")
        return given if asked else "The port is written to port.txt."

    upstream = FunctionUpstream(model)
    completion = await coding_engine(upstream).acomplete(body)
    if rewritten:
        (call,) = completion.message.tool_calls
        assert json.loads(call.arguments) == {
            "cmd": "cat > port.txt <<'TOOLSHIM_EOF'\n8421\nTOOLSHIM_EOF"
        }
    else:  # the same content: the answer stands
        assert completion.message.content == "The port is written to port.txt."
    assert len(upstream.history) == 2


async def test_a_request_to_run_a_command_is_opened_as_the_command_until_one_ran() -> None:
    """The 1.5B read compute.py, then answered with a number of its own instead of running it."""
    seen: list[dict[str, Any]] = []
    bash = tool("Bash", "Runs a command.", command={"type": "string"})
    bash["function"]["parameters"]["required"] = ["command"]
    upstream = FunctionUpstream(prefilling("It prints 2175.", 'python3 compute.py")]', seen))
    body = after_read([*FILE_TOOLS, bash])
    body["messages"][0]["content"] = "Run the script compute.py with python3 and tell me the number"
    body["messages"][1]["tool_calls"][0]["function"]["arguments"] = '{"file_path": "compute.py"}'
    completion = await coding_engine(upstream).acomplete(body)
    (call,) = completion.message.tool_calls
    assert call.name == "Bash" and json.loads(call.arguments) == {"command": "python3 compute.py"}
    assert seen[-1]["messages"][-1]["content"] == '[Bash(command="'
    # Once a command has run, the answer stands (after the check before finishing).
    ran = {"name": "Bash", "arguments": '{"command": "python3 compute.py"}'}
    body["messages"] += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c2", "type": "function", "function": ran}],
        },
        {"role": "tool", "tool_call_id": "c2", "content": "35350"},
    ]
    seen.clear()
    upstream = FunctionUpstream(prefilling("It prints 35350.", "", seen))
    completion = await coding_engine(upstream).acomplete(body)
    assert completion.message.content == "It prints 35350."
    assert all(b["messages"][-1]["role"] == "user" for b in seen)


async def test_a_count_written_before_any_command_ran_is_opened_as_the_command() -> None:
    """After reading data.txt, the 1.5B wrote 15 for its 17 lines."""
    seen: list[dict[str, Any]] = []
    bash = tool("Bash", "Runs a command.", command={"type": "string"})
    bash["function"]["parameters"]["required"] = ["command"]
    guess = '[Write(file_path="count.txt", content="15")]'
    upstream = FunctionUpstream(prefilling(guess, 'wc -l < data.txt")]', seen))
    body = after_read([*FILE_TOOLS, bash])
    body["messages"][0]["content"] = (
        "Count the lines in data.txt and write the number into count.txt"
    )
    body["messages"][1]["tool_calls"][0]["function"]["arguments"] = '{"file_path": "data.txt"}'
    completion = await coding_engine(upstream).acomplete(body)
    (call,) = completion.message.tool_calls
    assert json.loads(call.arguments) == {"command": "wc -l < data.txt"}
    assert any("no command had computed" in w for w in completion.meta.warnings)


async def test_a_string_the_opened_step_left_open_is_closed_before_the_call_ends() -> None:
    """Opened at new_string, the 1.5B ended with ``+ \\"!\\")]``: its string never closed."""
    seen: list[dict[str, Any]] = []
    edit = tool(
        "Edit",
        "Edits a file.",
        file_path={"type": "string"},
        old_string={"type": "string"},
        new_string={"type": "string"},
    )
    edit["function"]["parameters"]["required"] = ["file_path", "old_string", "new_string"]
    upstream = FunctionUpstream(
        prefilling("Change nam to name.", 'port = 8421", new_string="port = 9000)]', seen)
    )
    body = after_read([*FILE_TOOLS, edit])
    body["messages"][0]["content"] = "Fix config.ini: its port must be 9000"
    completion = await coding_engine(upstream).acomplete(body)
    (call,) = completion.message.tool_calls
    assert call.name == "Edit"
    assert seen[-1]["messages"][-1]["content"].endswith('old_string="')
    assert json.loads(call.arguments)["new_string"] == "port = 9000"


async def test_a_count_whose_command_failed_is_opened_as_a_command_again() -> None:
    seen: list[dict[str, Any]] = []
    bash = tool("Bash", "Runs a command.", command={"type": "string"})
    bash["function"]["parameters"]["required"] = ["command"]
    upstream = FunctionUpstream(prefilling("The sum is 14.", 'awk 1 numbers.txt")]', seen))
    body = after_read([*FILE_TOOLS, bash])
    body["messages"][0]["content"] = (
        "numbers.txt has one number per line. Write their sum into sum.txt"
    )
    failed = {"name": "Bash", "arguments": '{"command": "echo $(awk numbers.txt"}'}
    body["messages"] += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c2", "type": "function", "function": failed}],
        },
        {"role": "tool", "tool_call_id": "c2", "content": "Error: This command requires approval"},
    ]
    completion = await coding_engine(upstream).acomplete(body)
    (call,) = completion.message.tool_calls
    assert call.name == "Bash" and seen[-1]["messages"][-1]["content"] == '[Bash(command="'
