"""The SSE decoder both HTTP adapters share."""

from __future__ import annotations

from toolshim.upstreams._sse import SSEDecoder


def decode(lines: list[str]) -> tuple[list[str], bool]:
    decoder = SSEDecoder()
    out = []
    for line in lines:
        data = decoder.line(line)
        if data is not None:
            out.append(data)
        if decoder.done:
            return out, True
    tail = decoder.end()
    return ([*out, tail] if tail is not None else out), decoder.done


def test_events_comments_multiline_data_and_done() -> None:
    lines = [": keep-alive", "", "event: chunk", "data: {\"a\":", "data: 1}", "", "id: 7",
             "data: {\"b\": 2}\r\n", "", "data: [DONE]", "", "data: {\"after\": 1}", ""]  # fmt: skip
    assert decode(lines) == (['{"a":\n1}', '{"b": 2}'], True)


def test_a_stream_that_ends_without_a_blank_line() -> None:
    assert decode(['data: {"x": 1}']) == (['{"x": 1}'], False)
    assert decode(["data: [DONE]"]) == ([], True)
    assert decode([]) == ([], False)
