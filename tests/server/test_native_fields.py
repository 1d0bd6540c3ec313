"""A native reply the proxy changed (calls trimmed or rescued), streamed: what the upstream
sent besides the first choice's text and calls still reaches the caller."""

from __future__ import annotations

from typing import Any

import pytest

from tests.server.helpers import chat, proxy, sse_events
from toolshim.testing import FakeUpstream


@pytest.mark.parametrize("mode", ["auto", "fallback"])
async def test_a_changed_native_stream_keeps_the_reasoning_and_signatures(mode: str) -> None:
    """Two native calls, parallel_tool_calls false: the reply is trimmed to one call; streamed
    (held in fallback, relayed in auto) it keeps what the non-streamed answer keeps."""
    signature = {"google": {"thought_signature": "SIG123"}}
    calls = [
        {
            "id": "c1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            "extra_content": signature,
        },
        {
            "id": "c2",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'},
        },
    ]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "x",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    class Thinks(FakeUpstream):
        async def stream_body(self, body: Any, *, headers: Any = None) -> Any:
            self.history.append(dict(body))
            yield chunk({"role": "assistant"})
            yield chunk({"reasoning_content": "I think "})
            yield chunk({"reasoning_content": "hard."})
            for i, call in enumerate(calls):
                yield chunk({"tool_calls": [{"index": i, **call}]})
            yield chunk({}, "tool_calls")

    body = chat(stream=True, parallel_tool_calls=False, toolshim={"mode": mode})
    async with proxy(Thinks([], tools="native")) as p:
        response = await p.client.post("/v1/chat/completions", json=body)
    deltas = [
        choice.get("delta") or {}
        for event in sse_events(response.text)
        if isinstance(event, dict)
        for choice in event.get("choices") or []
    ]
    assert "".join(d.get("reasoning_content") or "" for d in deltas) == "I think hard."
    sent = [call for d in deltas for call in d.get("tool_calls") or []]
    assert {call["index"] for call in sent} == {0}
    assert [c["extra_content"] for c in sent if "extra_content" in c] == [signature]
