"""What a provider puts on its reply goes back in the history (seed 002: Gemini's thought
signatures, OpenRouter's reasoning details), streamed or not, and in the chat too."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest

from toolshim.agent import Agent, Tool
from toolshim.agent.events import RunFinished
from toolshim.engine import Engine
from toolshim.errors import UpstreamStatusError
from toolshim.testing import FunctionUpstream
from toolshim.types import ToolCallDelta
from toolshim.wire.openai_chat import chunk_from_dict, chunk_to_dict
from toolshim.wire.openai_chat.answers import merge_delta_fields

from ..chat.test_session import ScriptedTerminal, session_for

MODEL = "google/gemini-3-pro-preview"
GEMINI_400 = (
    "Function call is missing a thought_signature in functionCall parts. This is required for "
    "tools to work correctly, and missing thought_signature may lead to degraded model "
    "performance. Additional data, function call `default_api:run_code` , position 2. Please "
    "refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
)
SIGNATURE = {"google": {"thought_signature": "SIG-CALL-1"}}
DETAILS = [
    {"type": "reasoning.text", "text": "The user wants code run.", "index": 0},
    {"type": "reasoning.encrypted", "data": "SIG-MSG", "index": 1},
]
REASONING = "I should run the code in the sandbox first."
ANSWER_DETAILS = [{"type": "reasoning.encrypted", "data": "SIG-ANSWER", "index": 0}]
ARGUMENTS = json.dumps({"code": "print('hello')"})


def run_code(code: str) -> str:
    """Executes code in a sandbox."""
    return "hello"


def _rejected(message: str) -> UpstreamStatusError:
    return UpstreamStatusError(message, status=400, body={"error": {"message": message}})


def gemini(body: dict[str, Any]) -> dict[str, Any]:
    """A Gemini 3 behind OpenRouter: a call with a thought signature, then the answer; a 400
    when a call in the history comes back without its signature or reasoning details."""
    for sent in body["messages"]:
        if sent["role"] != "assistant" or not sent.get("tool_calls"):
            continue
        if any(c.get("extra_content") != SIGNATURE for c in sent["tool_calls"]):
            raise _rejected(GEMINI_400)
        if sent.get("reasoning_details") != DETAILS:
            raise _rejected("Gemini models require reasoning_details to be passed back")
    asked = sum(1 for m in body["messages"] if m["role"] == "user")
    if any(m["role"] == "tool" for m in body["messages"][-2:]):
        message: dict[str, Any] = {
            "role": "assistant",
            "content": f"The output is hello ({asked}).",
            "refusal": None,
            "reasoning_details": ANSWER_DETAILS,
        }
        finish = "stop"
    else:
        message = {
            "role": "assistant",
            "content": None,
            "refusal": None,
            "reasoning": None,
            "reasoning_content": REASONING,
            "reasoning_details": DETAILS,
            "tool_calls": [
                {
                    "id": f"call-{asked}",
                    "type": "function",
                    "function": {"name": "run_code", "arguments": ARGUMENTS},
                    "extra_content": SIGNATURE,
                }
            ],
        }
        finish = "tool_calls"
    return {
        "id": "gen-1",
        "object": "chat.completion",
        "created": 1,
        "model": MODEL,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def gemini_chunks(completion: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A completion streamed the way OpenRouter streams Gemini: the message's other fields in
    pieces over several chunks (lists an item at a time, text five characters at a time), a
    call's ``extra_content`` only in its first delta, its arguments over two."""
    base = {"id": "gen-1", "object": "chat.completion.chunk", "created": 1, "model": MODEL}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    choice = completion["choices"][0]
    message = choice["message"]
    out = [chunk({"role": "assistant", "content": "", "refusal": None})]
    for key, value in message.items():
        if key in ("role", "content", "tool_calls"):
            continue
        if isinstance(value, list):
            out += [chunk({key: [item], "content": ""}) for item in value]
        elif isinstance(value, str):
            out += [chunk({key: value[i : i + 5]}) for i in range(0, len(value), 5)]
        else:
            out.append(chunk({key: value}))
    text = message.get("content") or ""
    out += [chunk({"content": text[i : i + 5]}) for i in range(0, len(text), 5)]
    for index, call in enumerate(message.get("tool_calls") or ()):
        arguments = call["function"]["arguments"]
        half = len(arguments) // 2
        head = {k: v for k, v in call.items() if k != "function"}
        function = {"name": call["function"]["name"], "arguments": arguments[:half]}
        out.append(chunk({"tool_calls": [{"index": index, **head, "function": function}]}))
        rest = {"index": index, "function": {"arguments": arguments[half:]}}
        out.append(chunk({"tool_calls": [rest]}))
    out.append(chunk({}, choice["finish_reason"]))
    out.append({**base, "choices": [], "usage": completion["usage"]})
    return out


class GeminiUpstream(FunctionUpstream):
    """:func:`gemini` as an upstream, streaming like :func:`gemini_chunks`."""

    def __init__(self) -> None:
        super().__init__(gemini, models=[MODEL])

    async def stream_body(
        self, body: Mapping[str, Any], *, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        completion = await self._produce(body, headers)
        for chunk in gemini_chunks(completion):
            yield chunk


SENT_BACK = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "call-1",
            "type": "function",
            "function": {"name": "run_code", "arguments": ARGUMENTS},
            "extra_content": SIGNATURE,
        }
    ],
    "reasoning_content": REASONING,
    "reasoning_details": DETAILS,
}
"""The assistant message of the second request: exactly what the provider sent (no nulls)."""


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
@pytest.mark.parametrize(
    ("mode", "rescue"),
    [("auto", True), ("off", True), ("off", False)],
    ids=["auto", "off", "off-passthrough"],  # relayed and judged, or passed through as it came
)
async def test_signatures_and_reasoning_details_go_back(
    stream: bool, mode: str, rescue: bool
) -> None:
    upstream = GeminiUpstream()
    engine = Engine(upstream, mode=mode, rescue=rescue, registry=":memory:")
    agent = Agent([run_code], upstream=engine, model=MODEL)
    if stream:
        events = [event async for event in agent.astream("Run print('hello')")]
        assert isinstance(events[-1], RunFinished)
        result = events[-1].result
    else:
        result = await agent.arun("Run print('hello')")
    await engine.aclose()

    assert result.output == "The output is hello (1)."
    assert [r.result for r in result.tool_runs] == ["hello"]
    assert len(upstream.history) == 2
    second = upstream.history[1]["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "tool"]
    assert second[1] == SENT_BACK
    assert result.messages[1] == SENT_BACK
    assert result.messages[-1] == {
        "role": "assistant",
        "content": "The output is hello (1).",
        "reasoning_details": ANSWER_DETAILS,
    }


async def test_the_chat_sends_them_back_on_the_next_question_too() -> None:
    upstream = GeminiUpstream()
    terminal = ScriptedTerminal(["run it", "and again"])
    session = session_for(upstream, terminal, tools=[Tool.from_function(run_code)])
    assert await session.run(MODEL) == 0
    assert "The output is hello (2)." in terminal.output
    assert len(upstream.history) == 4
    last = upstream.history[-1]["messages"]
    assert last[1] == SENT_BACK
    assert last[3] == {
        "role": "assistant",
        "content": "The output is hello (1).",
        "reasoning_details": ANSWER_DETAILS,
    }


def test_the_wire_reads_the_other_fields_of_deltas() -> None:
    chunk = {
        "choices": [
            {
                "index": 0,
                "delta": {
                    "role": "assistant",
                    "content": "",
                    "reasoning_details": [DETAILS[0]],
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "c",
                            "type": "function",
                            "function": {"name": "f", "arguments": ""},
                            "extra_content": SIGNATURE,
                        }
                    ],
                },
                "finish_reason": None,
            }
        ]
    }
    read = chunk_from_dict(chunk)
    assert read.extra == {"reasoning_details": [DETAILS[0]]}
    assert read.tool_calls == (ToolCallDelta(0, "c", "f", "", extra={"extra_content": SIGNATURE}),)
    written = chunk_to_dict(read, id="x", model="m", created=0)
    assert written["choices"] == chunk["choices"]  # relayed as it came
    plain = chunk_from_dict({"choices": [{"index": 0, "delta": {"content": "hi"}}]})
    assert plain.extra == {} and plain.tool_calls == ()


def test_delta_fields_add_up() -> None:
    gathered: dict[str, Any] = {}
    pieces: list[dict[str, Any]] = [
        {"reasoning_content": "Let ", "reasoning_details": [DETAILS[0]], "refusal": None},
        {"reasoning_content": "me think.", "reasoning_details": [DETAILS[1]]},
        {"extra_content": {"google": {"thought_signature": "S"}}, "reasoning": None},
        {"extra_content": {"other": 1}, "n": 1},
        {"n": 2},
    ]
    for fields in pieces:
        merge_delta_fields(gathered, fields, join_text=True)
    assert gathered == {
        "reasoning_content": "Let me think.",
        "reasoning_details": DETAILS,
        "extra_content": {"google": {"thought_signature": "S"}, "other": 1},
        "n": 2,
    }
    assert pieces[0]["reasoning_details"] == [DETAILS[0]]  # the chunks are not changed
    signature: dict[str, Any] = {}
    merge_delta_fields(signature, {"id_hint": "ab"})
    merge_delta_fields(signature, {"id_hint": "ab"})
    assert signature == {"id_hint": "ab"}  # text is joined only when asked
