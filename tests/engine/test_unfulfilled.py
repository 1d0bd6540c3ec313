"""An answer that stands in for the step asked for is opened as a call (engine.unfulfilled): on
BFCL's multi-turn file system the 1.5B promised ("Sure, I'll initiate a file creation …"),
refused a later request its tools covered, or gave its previous answer again, and called
nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolshim.capabilities.facts import Source
from toolshim.capabilities.registry import Registry
from toolshim.engine import Engine
from toolshim.testing import FunctionUpstream, prefilling
from toolshim.testing.tools import function_tool

TOOLS = [
    function_tool("touch", "Create a file in the current directory", file_name="string"),
    function_tool("post_tweet", "Post a tweet", content="string"),
]
EARLIER = [
    {"role": "user", "content": "Create notes.txt for me."},
    {"role": "assistant", "content": "The file notes.txt was created in the current directory."},
]


def engine_for(upstream: FunctionUpstream, prefill: bool = True) -> Engine:
    engine = Engine(upstream, mode="force", dialect="pythonic", registry=Registry())
    if prefill:
        engine.registry.learn(upstream.key, "small", "prefill", "yes", Source.UPSTREAM)
    return engine


def body(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"model": "small", "tools": TOOLS, "messages": list(messages)}


LATER = {"role": "user", "content": "Now create report.txt, and post 'report ready' as a tweet."}


@pytest.mark.parametrize(
    ("messages", "answer", "continued", "expected", "kind"),
    [
        (
            [{"role": "user", "content": "Please create a file labelled 'report.txt'."}],
            "Sure, I'll create a file labelled 'report.txt'.",
            "touch(file_name='report.txt')]",
            [("touch", {"file_name": "report.txt"})],
            "a promise",
        ),
        (
            [*EARLIER, LATER],
            "I'm sorry, but I can't assist with that.",
            "post_tweet(content='report ready')]",
            [("post_tweet", {"content": "report ready"})],
            "a refusal",
        ),
        (
            [*EARLIER, LATER],
            "I'm sorry, but I cannot access or create files on your computer.",
            "touch(file_name='report.txt')]",
            [("touch", {"file_name": "report.txt"})],
            "a refusal",
        ),
        (
            [*EARLIER, LATER],
            "The file notes.txt was created in the current directory. Anything else?",
            "touch(file_name='report.txt')]",
            [("touch", {"file_name": "report.txt"})],
            "the previous answer again",
        ),
        # The call the model writes there has a value nobody gave: the answer stands.
        (
            [{"role": "user", "content": "Please create a file for my notes."}],
            "Sure, I'll create it.",
            "touch(file_name='ideas.md')]",
            [],
            "a promise",
        ),
    ],
    ids=["promise", "later-refusal", "refused-access", "previous-answer", "made-up-call"],
)
async def test_an_answer_instead_of_the_step_is_opened_as_a_call(
    messages: list[dict[str, Any]],
    answer: str,
    continued: str,
    expected: list[tuple[str, Any]],
    kind: str,
) -> None:
    seen: list[dict[str, Any]] = []
    engine = engine_for(FunctionUpstream(prefilling(answer, continued, seen)))
    completion = await engine.acomplete(body(*messages))
    made = [(c.name, json.loads(c.arguments)) for c in completion.message.tool_calls]
    assert made == expected
    assert len(seen) == 2
    assert seen[1]["messages"][-1] == {"role": "assistant", "content": "["}
    assert completion.meta is not None
    if expected:
        assert any(f"answered with {kind}" in w for w in completion.meta.warnings)
    else:
        assert completion.message.text == answer


@pytest.mark.parametrize(
    ("messages", "answer"),
    [
        # A first question no tool fits is rightly declined.
        (
            [{"role": "user", "content": "What is the freezing point of water at 10 kPa?"}],
            "I'm sorry, but I can't help with that with these tools.",
        ),
        # An answer that answers.
        ([*EARLIER, LATER], "Both are done: report.txt exists and the tweet is posted."),
        # A promise inside a long answer that gives what was asked.
        (
            [*EARLIER, LATER],
            (
                "I'll explain. " + "The report is ready and says the quarter went well. " * 10
            ).strip(),
        ),
    ],
    ids=["first-question-refusal", "an-answer", "long-answer"],
)
async def test_answers_that_answer_are_returned_without_another_request(
    messages: list[dict[str, Any]], answer: str
) -> None:
    seen: list[dict[str, Any]] = []
    engine = engine_for(FunctionUpstream(prefilling(answer, "touch(file_name='x')]", seen)))
    completion = await engine.acomplete(body(*messages))
    assert completion.message.text == answer
    assert not completion.message.tool_calls
    assert len(seen) == 1


async def test_without_an_upstream_that_continues_a_reply_the_promise_stands() -> None:
    seen: list[dict[str, Any]] = []
    answer = "Sure, I'll create a file labelled 'report.txt'."
    upstream = FunctionUpstream(prefilling(answer, "touch(file_name='report.txt')]", seen))
    question = {"role": "user", "content": "Please create a file labelled 'report.txt'."}
    completion = await engine_for(upstream, prefill=False).acomplete(body(question))
    assert completion.message.text == answer
    assert len(seen) == 1
