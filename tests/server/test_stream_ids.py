"""One stream, one id: upstream chunks relayed as they came share the id of the chunks made here."""

from __future__ import annotations

from tests.server.helpers import FENCED_CALL, chat, proxy, sse_events
from toolshim.testing import FakeUpstream, Reply


async def test_relayed_and_generated_chunks_share_one_id_and_time() -> None:
    upstream = FakeUpstream([Reply("Let me check. " + FENCED_CALL)], tools="ignore", piece=5)
    async with proxy(upstream, mode="auto") as p:
        response = await p.client.post("/v1/chat/completions", json=chat(stream=True))
    chunks = [e for e in sse_events(response.text) if e != "[DONE]"]
    assert len({c["id"] for c in chunks}) == 1
    assert len({c["created"] for c in chunks}) == 1
    assert any(c["choices"] and c["choices"][0]["delta"].get("tool_calls") for c in chunks)
    assert chunks[0]["choices"][0]["delta"].get("role") == "assistant"
