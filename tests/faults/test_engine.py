"""The fault matrix through the engine (a real OpenAIUpstream at the bad server), streamed and not.

Each fault ends with its one defined error, never with a made-up finish: a stream that was
cut is an error, even when tools were offered and the engine judges the reply at its end.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.faults.badserver import bad_server
from tests.faults.faults import CUT_ARGUMENTS, DEADLINES, FAULTS, fault_url, huge_arguments
from tests.server.helpers import WEATHER
from toolshim.capabilities.registry import Registry
from toolshim.engine import Engine
from toolshim.errors import ToolshimError
from toolshim.types import StreamChunk
from toolshim.upstreams import OpenAIUpstream
from toolshim.upstreams._policy import RetryPolicy
from toolshim.wire.openai_chat import error_body


async def no_wait(seconds: float) -> None:
    return None


def request(*, tools: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "m",
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
    }
    if tools:
        body["tools"] = [WEATHER]
    return body


def engine(url: str, mode: str) -> Engine:
    upstream = OpenAIUpstream(url, retries=RetryPolicy(sleep=no_wait), **DEADLINES)
    return Engine(upstream, mode=mode, registry=Registry())


async def served(url: str, mode: str, streamed: bool, *, tools: bool = True) -> list[StreamChunk]:
    """The chunks (or the one completion, as a list) the engine answered; raises its error."""
    shim = engine(url, mode)
    chunks: list[StreamChunk] = []
    try:
        if streamed:
            async for chunk in shim.astream(request(tools=tools)):
                chunks.append(chunk)
        else:
            await shim.acomplete(request(tools=tools))
    except ToolshimError as exc:
        exc.add_note(json.dumps([c.finish_reason for c in chunks]))
        exc.chunks = chunks  # type: ignore[attr-defined]
        raise
    finally:
        await shim.aclose()
        await shim.upstream.aclose()
    return chunks


def outcome(exc: BaseException) -> tuple[int, str]:
    status, body = error_body(exc)
    return status, body["error"]["code"] or body["error"]["type"]


CASES = [n for n, f in FAULTS.items() if f.plain_outcome]


@pytest.mark.parametrize("mode", ["auto", "force"])
@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("name", CASES)
async def test_each_fault_ends_in_its_error_never_a_made_up_finish(
    name: str, streamed: bool, mode: str
) -> None:
    fault = FAULTS[name]
    expected = fault.streamed_outcome if streamed else fault.plain_outcome
    async with fault_url(fault, streamed) as (url, _):
        with pytest.raises(ToolshimError) as caught:
            await served(url, mode, streamed)
    assert outcome(caught.value) == expected, caught.value.message
    chunks: list[StreamChunk] = caught.value.chunks  # type: ignore[attr-defined]
    assert not any(c.finish_reason for c in chunks), "a finish was made up before the error"


@pytest.mark.parametrize("tools", [True, False], ids=["tools", "no-tools"])
async def test_a_close_delimited_stream_cut_midway_is_an_error_not_a_stop(tools: bool) -> None:
    async with bad_server(FAULTS["cut, close-delimited"].behaviour(True)) as server:
        with pytest.raises(ToolshimError) as caught:
            await served(server.base_url, "auto", True, tools=tools)
    assert outcome(caught.value) == (502, "upstream_incomplete")


async def test_an_html_page_with_200_to_a_stream_is_an_error_not_an_empty_answer() -> None:
    async with bad_server(FAULTS["HTML with 200"].behaviour(True)) as server:
        with pytest.raises(ToolshimError) as caught:
            await served(server.base_url, "auto", True, tools=False)
    assert outcome(caught.value) == (502, "upstream_bad_response")
    assert "text/html" in caught.value.message


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
async def test_a_huge_native_call_reaches_the_caller_whole(streamed: bool) -> None:
    fault = FAULTS["huge event"]
    async with bad_server(fault.behaviour(streamed)) as server:
        shim = engine(server.base_url, "auto")
        try:
            if streamed:
                arguments = ""
                async for chunk in shim.astream(request()):
                    for call in chunk.tool_calls:
                        arguments += call.arguments or ""
            else:
                completion = await shim.acomplete(request())
                arguments = completion.tool_calls[0].arguments
        finally:
            await shim.aclose()
            await shim.upstream.aclose()
    assert json.loads(arguments) == json.loads(huge_arguments())


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
async def test_max_tokens_inside_a_native_call(streamed: bool) -> None:
    """A call cut by max_tokens is never handed back as a whole call with a made-up finish."""
    fault = FAULTS["max_tokens inside a tool call"]
    async with bad_server(fault.behaviour(streamed)) as server:
        shim = engine(server.base_url, "off")
        try:
            if streamed:
                chunks = [c async for c in shim.astream(request())]
                finishes = [c.finish_reason for c in chunks if c.finish_reason]
                arguments = "".join(a.arguments or "" for c in chunks for a in c.tool_calls)
            else:
                completion = await shim.acomplete(request())
                finishes = [completion.finish_reason]
                arguments = "".join(c.arguments for c in completion.tool_calls)
        finally:
            await shim.aclose()
            await shim.upstream.aclose()
    assert finishes == ["length"]
    assert arguments in ("", CUT_ARGUMENTS)
