"""A path where the tool's own documentation takes only a name in the current directory
(engine.checks.local_names): the 1.5B copied ``./projects/photography/test_image1.jpg`` by its
path on BFCL's file system, whose ``cp`` says "Both source and destination must be local to
the current directory", and every call failed where the step meant was to go into the folder."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.engine.helpers import called
from toolshim.engine import Engine
from toolshim.engine.checks.local_names import change_directory_tool, local_parameters
from toolshim.evaluation.bfcl import bfcl_available
from toolshim.testing import FunctionUpstream
from toolshim.types import ToolSpec


def tool(name: str, description: str, **parameters: str) -> dict[str, Any]:
    """A tool whose string parameters have the descriptions given."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {
                    k: {"type": "string", "description": d} for k, d in parameters.items()
                },
                "required": list(parameters),
            },
        },
    }


CD = tool(
    "cd",
    "Change the current working directory to the specified folder.",
    folder="The folder of the directory to change to. You can only change one folder level at a time.",
)
CAT = tool(
    "cat",
    "Display the contents of a file of any extension from current directory.",
    file_name="The name of the file from current directory to display. No path is allowed.",
)
CP = tool(
    "cp",
    "Copy a file or directory from one location to another. Both source and destination "
    "must be local to the current directory.",
    source="The name of the file or directory to copy.",
    destination="The destination name to copy the file or directory to. No file paths allowed.",
)
READ = tool("read_file", "Read a file by its path.", path="The path of the file to read.")
FILES = [CD, CAT, CP, READ]


def replying(*replies: str) -> tuple[FunctionUpstream, list[dict[str, Any]]]:
    seen: list[dict[str, Any]] = []
    left = list(replies)

    def reply(body: dict[str, Any]) -> str:
        seen.append(body)
        return left.pop(0) if len(left) > 1 else left[0]

    return FunctionUpstream(reply), seen


def engine_for(upstream: FunctionUpstream) -> Engine:
    return Engine(upstream, mode="force", dialect="pythonic", registry=":memory:")


def body(question: str, tools: list[dict[str, Any]], *earlier: dict[str, Any]) -> dict[str, Any]:
    return {
        "model": "small",
        "messages": [*earlier, {"role": "user", "content": question}],
        "tools": tools,
    }


def calls_of(completion: Any) -> list[tuple[str, dict[str, Any]]]:
    return [(c.name, json.loads(c.arguments)) for c in completion.message.tool_calls]


async def test_a_path_becomes_the_walk_into_its_folder_then_the_name() -> None:
    upstream, seen = replying("[cat(file_name='archive/log.txt')]")
    done = await engine_for(upstream).acomplete(body("Show me archive's log.txt.", FILES))
    assert calls_of(done) == [("cd", {"folder": "archive"}), ("cat", {"file_name": "log.txt"})]
    assert any("named a path where its description says" in w for w in done.meta.warnings)
    assert len(seen) == 1


async def test_streamed_the_same() -> None:
    upstream, _ = replying("[cat(file_name='archive/log.txt')]")
    streamed: dict[int, list[str]] = {}
    request = {**body("Show me archive's log.txt.", FILES), "stream": True}
    async for chunk in engine_for(upstream).astream(request):
        for delta in chunk.tool_calls:
            call = streamed.setdefault(delta.index, ["", ""])
            call[0] += delta.name or ""
            call[1] += delta.arguments or ""
    assert [(n, json.loads(a)) for n, a in streamed.values()] == [
        ("cd", {"folder": "archive"}),
        ("cat", {"file_name": "log.txt"}),
    ]


async def test_one_folder_level_at_a_time_and_never_twice_in_a_reply() -> None:
    upstream, _ = replying(
        "[cp(source='./projects/photography/test_image1.jpg', "
        "destination='./projects/photography/backup_tests'), "
        "cp(source='./projects/photography/test_document.txt', "
        "destination='./projects/photography/backup_tests')]"
    )
    found = [{"role": "user", "content": "Find the files with 'test' in their name."}]
    found += called(
        "find",
        '{"name": "test"}',
        '{"matches": ["./projects/photography/test_image1.jpg", '
        '"./projects/photography/test_document.txt"]}',
    )
    question = "Back the test files up into backup_tests."
    done = await engine_for(upstream).acomplete(body(question, FILES, *found))
    assert calls_of(done) == [
        ("cd", {"folder": "projects"}),
        ("cd", {"folder": "photography"}),
        ("cp", {"source": "test_image1.jpg", "destination": "backup_tests"}),
        ("cp", {"source": "test_document.txt", "destination": "backup_tests"}),
    ]


async def test_folders_the_conversation_already_went_into_are_not_entered_again() -> None:
    earlier = [
        {"role": "user", "content": "Go to workspace, then into archive."},
        *called("cd", '{"folder": "workspace"}', '{"current_working_directory": "workspace"}', "a"),
        *called("cd", '{"folder": "archive"}', '{"current_working_directory": "archive"}', "b"),
        *called("cd", '{"folder": "nowhere"}', '{"error": "cd: nowhere: No such directory"}', "c"),
        {"role": "assistant", "content": "Done."},
    ]
    upstream, _ = replying("[cat(file_name='archive/log.txt')]")
    done = await engine_for(upstream).acomplete(body("Show log.txt.", FILES, *earlier))
    assert calls_of(done) == [("cat", {"file_name": "log.txt"})]


async def test_a_cd_the_model_wrote_first_counts() -> None:
    upstream, _ = replying("[cd(folder='workspace'), cat(file_name='workspace/log.txt')]")
    done = await engine_for(upstream).acomplete(body("Show workspace's log.txt.", FILES))
    assert calls_of(done) == [("cd", {"folder": "workspace"}), ("cat", {"file_name": "log.txt"})]


@pytest.mark.parametrize(
    "reply",
    [
        # a path beside a bare name: which folder the bare name is in cannot be told
        "[cp(source='docs/a.txt', destination='backup')]",
        # an absolute path: the current directory's own place is not known
        "[cat(file_name='/home/alex/log.txt')]",
    ],
    ids=["path-beside-name", "absolute"],
)
async def test_what_cannot_be_walked_is_re_asked_with_the_rule_once(reply: str) -> None:
    upstream, seen = replying(reply, "[cat(file_name='log.txt')]")
    done = await engine_for(upstream).acomplete(body("Show log.txt, from docs/a.txt.", FILES))
    assert calls_of(done) == [("cat", {"file_name": "log.txt"})]
    assert len(seen) == 2
    correction = json.dumps(seen[1]["messages"])
    assert "is a path" in correction and "call cd to go into its folder first" in correction


async def test_without_a_change_directory_tool_the_rule_is_re_asked() -> None:
    upstream, seen = replying("[cat(file_name='archive/log.txt')]")
    done = await engine_for(upstream).acomplete(body("Show archive/log.txt.", [CAT]))
    # re-asked once; written again, the call goes out as the model wrote it
    assert calls_of(done) == [("cat", {"file_name": "archive/log.txt"})]
    assert len(seen) == 2
    assert "No path is allowed" in json.dumps(seen[1]["messages"])


async def test_a_tool_that_takes_paths_is_never_touched() -> None:
    upstream, seen = replying("[read_file(path='src/app/main.py')]")
    done = await engine_for(upstream).acomplete(body("Read src/app/main.py.", FILES))
    assert calls_of(done) == [("read_file", {"path": "src/app/main.py"})]
    assert len(seen) == 1 and not any("path" in w for w in done.meta.warnings)


def spec(entry: dict[str, Any]) -> ToolSpec:
    f = entry["function"]
    return ToolSpec(f["name"], f.get("description", ""), f["parameters"])


def test_the_documentation_is_what_restricts_a_parameter() -> None:
    specs = {t["function"]["name"]: spec(t) for t in FILES}
    assert local_parameters(specs["cat"]) == ("file_name",)
    assert local_parameters(specs["cp"]) == ("destination", "source")
    assert local_parameters(specs["read_file"]) == ()
    assert change_directory_tool(list(specs.values())) == ("cd", "folder")
    assert change_directory_tool([specs["cat"], specs["read_file"]]) is None


@pytest.mark.skipif(bfcl_available() is not None, reason="bfcl-eval is not installed")
def test_bfcl_file_system_docs_are_read_as_they_are_written() -> None:
    """BFCL's own GorillaFileSystem docs: the tools that take names, and ``cd``."""
    from toolshim.evaluation.bfcl import load_bfcl
    from toolshim.evaluation.bfcl_multi_turn import load_multi_turn_cases

    case = load_multi_turn_cases(["multi_turn_base"], limit=1, seed=None)[0]
    b = load_bfcl()
    functions = [dict(f) for f in case.functions]
    tools = b.convert_to_tool(functions, b.gorilla_to_openapi, b.openai_completions_style)
    specs = [spec(t) for t in tools]
    local = {s.name: local_parameters(s) for s in specs if local_parameters(s)}
    assert local["cat"] == ("file_name",)
    assert set(local["mv"]) == {"source", "destination"}
    assert set(local["cp"]) == {"source", "destination"}
    assert "find" not in local and "cd" not in local
    assert change_directory_tool(specs) == ("cd", "folder")
