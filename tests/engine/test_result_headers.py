"""Codex's session lines above a result's output are left out of a small model's prompt."""

from __future__ import annotations

from toolshim.engine.result_headers import brief_results
from toolshim.types import ChatRequest, Message

CODEX = (
    "Chunk ID: 305e38\nWall time: 0.0000 seconds\nProcess exited with code 0\n"
    "Original token count: 2\nOutput:\n 8421\n"
)


def chat(*results: str) -> ChatRequest:
    return ChatRequest(
        model="m",
        messages=(
            Message("user", "Read the port"),
            *(Message("tool", r, tool_call_id=f"c{i}") for i, r in enumerate(results)),
        ),
    )


def test_the_session_lines_above_the_output_are_left_out() -> None:
    briefed, count = brief_results(chat(CODEX, CODEX))
    assert count == 2
    assert [m.text for m in briefed.messages[1:]] == [
        "Process exited with code 0\nOutput:\n 8421\n"
    ] * 2
    assert briefed.messages[0] == Message("user", "Read the port")


def test_output_that_looks_like_session_lines_is_kept_and_other_results_are_unchanged() -> None:
    inside = "Process exited with code 0\nOutput:\nChunk ID: 1\nWall time: 2 seconds\n"
    plain = "Chunk ID: abc\nno output marker here"
    request = chat(inside, plain)
    briefed, count = brief_results(request)
    assert count == 0 and briefed is request
