"""Both HTTP adapters against every fault of the matrix: one defined result each, in time."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.faults.badserver import bad_server
from tests.faults.faults import CUT_ARGUMENTS, DEADLINES, FAULTS, fault_url, huge_arguments
from toolshim.errors import ToolshimError, UpstreamTimeoutError
from toolshim.upstreams import OpenAIUpstream
from toolshim.upstreams._policy import RetryPolicy
from toolshim.upstreams.aiohttp_upstream import AiohttpUpstream

ADAPTERS = {"httpx": OpenAIUpstream, "aiohttp": AiohttpUpstream}
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


async def no_wait(seconds: float) -> None:
    return None


def adapter(kind: str, url: str, **options: Any) -> OpenAIUpstream | AiohttpUpstream:
    options = {**DEADLINES, "retries": RetryPolicy(retries=2, sleep=no_wait), **options}
    return ADAPTERS[kind](url, **options)  # type: ignore[no-any-return]


serving = fault_url


async def call(client: OpenAIUpstream | AiohttpUpstream, streamed: bool) -> Any:
    try:
        if streamed:
            return [chunk async for chunk in client.stream_body(BODY)]
        return await client.complete_body(BODY)
    finally:
        await client.aclose()


def label(exc: ToolshimError) -> tuple[int, str]:
    return exc.status, exc.code or exc.error_type


@pytest.mark.parametrize("kind", ADAPTERS)
@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("name", [n for n, f in FAULTS.items() if f.plain_outcome])
async def test_each_fault_has_one_defined_error(name: str, streamed: bool, kind: str) -> None:
    fault = FAULTS[name]
    expected = fault.streamed_outcome if streamed else fault.plain_outcome
    async with serving(fault, streamed) as (url, requests):
        with pytest.raises(ToolshimError) as caught:
            await call(adapter(kind, url), streamed)
    assert label(caught.value) == expected, caught.value.message
    assert "Traceback" not in caught.value.message
    if requests:
        resent = fault.resent and kind == "aiohttp"
        assert len(requests) == (3 if fault.retried else 2 if resent else 1)


@pytest.mark.parametrize("kind", ADAPTERS)
@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize(
    ("name", "deadline"),
    [("connect hangs", "connect"), ("no answer before headers", "read"), ("drip", "total")],
)
async def test_a_timeout_names_the_deadline_that_passed(
    name: str, deadline: str, streamed: bool, kind: str
) -> None:
    async with serving(FAULTS[name], streamed) as (url, _):
        with pytest.raises(UpstreamTimeoutError) as caught:
            await call(adapter(kind, url, retries=0), streamed)
    assert caught.value.deadline == deadline
    option = {"connect": "connect_timeout", "read": "timeout", "total": "total_timeout"}[deadline]
    seconds = DEADLINES[option]
    assert f"the {deadline} timeout" in caught.value.message
    assert f"{seconds:g}s" in caught.value.message


@pytest.mark.parametrize("kind", ADAPTERS)
@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
async def test_a_huge_event_passes_whole(streamed: bool, kind: str) -> None:
    async with serving(FAULTS["huge event"], streamed) as (url, _):
        answer = await call(adapter(kind, url), streamed)
    if streamed:
        calls = answer[0]["choices"][0]["delta"]["tool_calls"]
        assert answer[-1]["choices"][0]["finish_reason"] == "tool_calls"
    else:
        calls = answer["choices"][0]["message"]["tool_calls"]
    assert calls[0]["function"]["arguments"] == huge_arguments()


@pytest.mark.parametrize("kind", ADAPTERS)
async def test_an_event_over_the_limit_is_a_502_naming_it(kind: str) -> None:
    async with serving(FAULTS["huge event"], True) as (url, _):
        with pytest.raises(ToolshimError) as caught:
            await call(adapter(kind, url, max_event_bytes=1_000_000), True)
    assert label(caught.value) == (502, "upstream_bad_response")
    assert "1000000 bytes (max_event_bytes)" in caught.value.message


@pytest.mark.parametrize("kind", ADAPTERS)
@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
async def test_max_tokens_inside_a_call_keeps_length_and_the_cut_arguments(
    streamed: bool, kind: str
) -> None:
    async with serving(FAULTS["max_tokens inside a tool call"], streamed) as (url, _):
        answer = await call(adapter(kind, url), streamed)
    if streamed:
        assert answer[0]["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"] == (
            CUT_ARGUMENTS
        )
        assert answer[-1]["choices"][0]["finish_reason"] == "length"
    else:
        assert answer["choices"][0]["finish_reason"] == "length"


@pytest.mark.parametrize("kind", ADAPTERS)
async def test_a_stream_with_a_finish_but_no_done_is_complete(kind: str) -> None:
    from tests.faults.badserver import completion  # noqa: F401  (shape reference)

    async def finished_then_closed(reader: Any, writer: Any, request: Any) -> None:
        from tests.faults.badserver import delta, event, head

        writer.write(head(200, {"Content-Type": "text/event-stream", "Connection": "close"}))
        writer.write(event(delta("Hi")) + event(delta(finish="stop")))
        await writer.drain()
        writer.close()

    async with bad_server(finished_then_closed) as server:
        chunks = await call(adapter(kind, server.base_url), True)
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None, "stop"]


@pytest.mark.parametrize("kind", ADAPTERS)
async def test_html_with_200_to_a_stream_names_the_content_type(kind: str) -> None:
    async with serving(FAULTS["HTML with 200"], True) as (url, _):
        with pytest.raises(ToolshimError) as caught:
            await call(adapter(kind, url), True)
    assert "'text/html'" in caught.value.message
    assert "<html>" in caught.value.message


def test_the_matrix_is_json_serialisable_for_the_docs() -> None:
    json.dumps({name: [f.plain_outcome, f.streamed_outcome] for name, f in FAULTS.items()})


@pytest.mark.parametrize("kind", ADAPTERS)
async def test_an_html_error_page_is_named_by_its_title_not_pasted(kind: str) -> None:
    async with serving(FAULTS["502 HTML"], False) as (url, _):
        with pytest.raises(ToolshimError) as caught:
            await call(adapter(kind, url, retries=0), False)
    assert caught.value.message == (
        "the upstream answered HTTP 502 with an HTML page ('502 Bad Gateway')"
    )


@pytest.mark.parametrize("kind", ADAPTERS)
@pytest.mark.parametrize("name", ["closed before answering", "reset before answering"])
async def test_a_connection_broken_before_the_answer_says_so(name: str, kind: str) -> None:
    async with serving(FAULTS[name], False) as (url, _):
        with pytest.raises(ToolshimError) as caught:
            await call(adapter(kind, url), False)
    message = caught.value.message
    assert "before answering" in message, message
    assert not message.rstrip().endswith(":"), message  # a reason, not an empty one
