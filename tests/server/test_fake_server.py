"""The scripted upstream (toolshim.testing.server): scripts, replies, control endpoints."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from tests.server.helpers import WEATHER, chat
from toolshim.errors import UpstreamStatusError
from toolshim.testing import FakeUpstream
from toolshim.testing.server import Script, ScriptedUpstream, serve_fake


@pytest.mark.parametrize(
    ("script", "fragment"),
    [
        ({"tools": "maybe"}, "tools must be one of"),
        ({"replis": []}, "unknown script field"),
        ({"rejection": "nobody"}, "unknown rejection"),
        ({"replies": [3]}, "replies[0]"),
    ],
)
def test_bad_scripts_are_refused(script: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ValueError, match=re.escape(fragment)):
        Script.from_dict(script)


async def test_replies_in_order_then_an_error() -> None:
    upstream = ScriptedUpstream({"replies": ["one", {"content": "two"}]})
    first = await upstream.complete_body(chat(tools=False))
    second = await upstream.complete_body(chat(tools=False))
    assert [
        first["choices"][0]["message"]["content"],
        second["choices"][0]["message"]["content"],
    ] == [
        "one",
        "two",
    ]
    with pytest.raises(UpstreamStatusError, match="no reply left for request #3"):
        await upstream.complete_body(chat(tools=False))


async def test_repeat_cycles_and_record_false_keeps_nothing() -> None:
    upstream = ScriptedUpstream({"replies": ["a", "b"], "repeat": True, "record": False})
    texts = [
        (await upstream.complete_body(chat(tools=False)))["choices"][0]["message"]["content"]
        for _ in range(5)
    ]
    assert texts == ["a", "b", "a", "b", "a"]
    assert upstream.history == []


async def test_native_calls_need_tools_in_the_request() -> None:
    call = {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}
    upstream = ScriptedUpstream({"replies": [call, call]})
    answer = await upstream.complete_body(chat())
    assert answer["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_weather"
    with pytest.raises(UpstreamStatusError, match="without tools"):
        await upstream.complete_body(chat(tools=False))


async def test_scripted_errors_and_rejections() -> None:
    upstream = ScriptedUpstream(
        {"replies": [{"error": {"status": 429, "message": "slow down"}}], "tools": "reject"}
    )
    with pytest.raises(UpstreamStatusError, match="does not support tools") as rejected:
        await upstream.complete_body(chat())
    assert rejected.value.status == 400
    with pytest.raises(UpstreamStatusError, match="slow down") as limited:
        await upstream.complete_body(chat(tools=False))
    assert limited.value.status == 429


def test_control_endpoints_replace_the_script_and_show_the_history() -> None:
    with serve_fake(FakeUpstream(["from the fake"])) as server:
        base = server.base_url.removesuffix("/v1")
        with httpx.Client(base_url=base) as client:
            answer = client.post("/v1/chat/completions", json=chat()).json()
            assert answer["choices"][0]["message"]["content"] == "from the fake"
            assert client.get("/_toolshim/history").json()["requests"][0]["tools"] == [WEATHER]

            bad = client.post("/_toolshim/script", json={"tools": "sometimes"})
            assert (
                bad.status_code == 400 and "tools must be one of" in bad.json()["error"]["message"]
            )
            ok = client.post("/_toolshim/script", json={"replies": ["scripted"], "tools": "reject"})
            assert ok.json() == {"ok": True}
            rejected = client.post("/v1/chat/completions", json=chat())
            assert rejected.status_code == 400
            assert "does not support tools" in rejected.json()["error"]["message"]
            answer = client.post("/chat/completions", json=chat(tools=False)).json()
            assert answer["choices"][0]["message"]["content"] == "scripted"
            history = client.get("/_toolshim/history").json()
            assert len(history["requests"]) == 2 and history["cancelled"] == 0
            invalid = client.post("/v1/chat/completions", content=b"{")
            assert invalid.status_code == 400
