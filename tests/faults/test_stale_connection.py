"""A server that closes a kept-alive connection after a stream without saying so (llama-server
does): the next request, written to that dead connection, is sent again on a new one."""

from __future__ import annotations

import asyncio

from tests.faults.badserver import Request, bad_server, chunk, delta, event, head
from toolshim.upstreams.aiohttp_upstream import AiohttpUpstream


async def stream_then_close(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: Request
) -> None:
    writer.write(head(200, {"Content-Type": "text/event-stream", "Transfer-Encoding": "chunked"}))
    writer.write(chunk(event(delta("hi", finish="stop"))) + chunk(event("[DONE]")) + b"0\r\n\r\n")
    await writer.drain()
    await asyncio.sleep(0.02)  # the client has its events and pools the connection meanwhile
    writer.close()  # no "Connection: close": the client pools a connection that is gone


async def test_a_request_on_a_connection_the_server_closed_is_sent_again() -> None:
    async with bad_server(stream_then_close) as server:
        upstream = AiohttpUpstream(server.base_url)
        try:
            for _ in range(3):
                chunks = [c async for c in upstream.stream_body({"model": "m", "messages": []})]
                assert chunks[0]["choices"][0]["delta"]["content"] == "hi"
        finally:
            await upstream.aclose()
    assert len(server.requests) == 3
