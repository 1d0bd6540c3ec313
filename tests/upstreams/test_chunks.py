"""Whole completions as stream chunks, and chunks written back: the provider's fields travel."""

from __future__ import annotations

from toolshim.types import StreamChunk, ToolCallDelta
from toolshim.upstreams._http import completion_as_chunks
from toolshim.wire.openai_chat.answers import chunk_to_dict

SIGNATURE = {"google": {"thought_signature": "sig-1"}}


def test_a_whole_completion_keeps_reasoning_and_call_extras_as_chunks() -> None:
    completion = {
        "id": "c1",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "reasoning_content": "Think first.",
                    "reasoning_details": [{"type": "reasoning.text", "text": "Think first."}],
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                            "extra_content": SIGNATURE,
                        }
                    ],
                },
            }
        ],
    }
    (chunk,) = completion_as_chunks(completion)
    delta = chunk["choices"][0]["delta"]
    assert delta["reasoning_content"] == "Think first."
    assert delta["reasoning_details"] == [{"type": "reasoning.text", "text": "Think first."}]
    assert delta["tool_calls"][0]["extra_content"] == SIGNATURE
    assert "content" not in delta  # a null is not sent as a field


def test_a_written_tool_call_delta_carries_its_extras() -> None:
    chunk = StreamChunk(
        tool_calls=(ToolCallDelta(0, id="call_1", name="f", extra={"extra_content": SIGNATURE}),)
    )
    written = chunk_to_dict(chunk, id="x", model="m", created=0)
    (entry,) = written["choices"][0]["delta"]["tool_calls"]
    assert entry["extra_content"] == SIGNATURE
    assert entry["id"] == "call_1" and entry["function"] == {"name": "f"}
