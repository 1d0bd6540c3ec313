"""A native stream passed through with calls to tools that were not offered: each choice's call
deltas are dropped, a choice left without calls finishes with ``stop``, one warning names them."""

from __future__ import annotations

from typing import Any

from toolshim.engine import Engine
from toolshim.testing import FakeUpstream
from toolshim.wire.openai_chat import chunk_to_dict


def _call(index: int, name: str | None, arguments: str) -> dict[str, Any]:
    function = {"arguments": arguments} if name is None else {"name": name, "arguments": arguments}
    return {
        "index": index,
        **({"id": f"c{index}", "type": "function"} if name else {}),
        "function": function,
    }


class TwoChoices(FakeUpstream):
    async def stream_body(self, body: Any, *, headers: Any = None) -> Any:
        self.history.append(dict(body))
        base = {"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m"}
        yield {
            **base,
            "choices": [
                {"index": 0, "delta": {"role": "assistant", "tool_calls": [_call(0, "rm", "")]}},
                {"index": 1, "delta": {"role": "assistant", "content": "Sure."}},
            ],
        }
        yield {
            **base,
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [_call(0, None, "{}")]},
                    "finish_reason": "tool_calls",
                },
                {"index": 1, "delta": {}, "finish_reason": "stop"},
            ],
        }


async def test_calls_to_tools_not_offered_are_dropped_from_every_choice() -> None:
    engine = Engine(TwoChoices(), mode="auto", registry=":memory:")
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    chunks = [c async for c in engine.astream(body)]
    written = [chunk_to_dict(c, id="x", model="m", created=0) for c in chunks]
    choices = [c for w in written for c in w["choices"]]
    assert not any(c["delta"].get("tool_calls") for c in choices)
    assert [(c["index"], c.get("finish_reason")) for c in choices if c.get("finish_reason")] == [
        (0, "stop"),
        (1, "stop"),
    ]
    assert "".join(c["delta"].get("content") or "" for c in choices if c["index"] == 1) == "Sure."
    meta = chunks[-1].meta
    assert meta is not None
    assert [w for w in meta.warnings if "not offered" in w] == [
        "dropped a native call to a tool that was not offered: 'rm'"
    ]
