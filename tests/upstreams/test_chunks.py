"""Whole completions as stream chunks, and chunks read and written back: the provider's
fields travel."""

from __future__ import annotations

from toolshim.types import StreamChunk, ToolCallDelta
from toolshim.upstreams._http import completion_as_chunks
from toolshim.wire.openai_chat.answers import chunk_from_dict, chunk_to_dict

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


def test_an_upstream_chunk_read_is_written_back_as_it_came() -> None:
    base = {"id": "up", "object": "chat.completion.chunk", "created": 7, "model": "m"}
    sent = [
        {**base, "choices": [], "prompt_filter_results": [{"prompt_index": 0}]},
        {
            **base,
            "system_fingerprint": "fp",
            "choices": [
                {
                    "index": 0,
                    "delta": {"role": "assistant", "content": "Hi", "reasoning_content": "r"},
                    "logprobs": {"content": [{"token": "Hi", "logprob": -0.1}]},
                    "finish_reason": None,
                },
                {"index": 1, "delta": {"content": "Yo"}, "finish_reason": "stop"},
            ],
        },
        {
            **base,
            "choices": [],
            "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
        },
    ]
    for data in sent:
        chunk = chunk_from_dict(data)
        assert chunk_to_dict(chunk, id="x", model="other", created=0) == data
    two = chunk_from_dict(sent[1])
    assert (two.content, two.choice_index, two.model) == ("Hi", 0, "m")
    assert [(c.content, c.choice_index, c.finish_reason) for c in two.other_choices] == [
        ("Yo", 1, "stop")
    ]
