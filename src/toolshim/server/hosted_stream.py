"""A finished answer replayed as its protocol's server-sent events (for hosted MCP tools).

With hosted MCP tools the proxy runs several model turns and tool calls before the answer is
whole, so a streamed request gets the finished answer as a stream: the same events a streamed
answer has, in order, each item or block whole in one delta. Responses: ``response.created``,
``response.in_progress``, then per output item ``output_item.added`` (its text or arguments as
one delta) and ``output_item.done``, then ``response.completed`` with the whole response.
Messages: ``message_start``, per content block ``content_block_start``, one delta (text, or
the input as JSON) and ``content_block_stop``, then ``message_delta`` and ``message_stop``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping
from typing import Any

from toolshim.wire.sse import sse_event

__all__ = ["replay_messages", "replay_responses"]


def replay_responses(response: Mapping[str, Any]) -> Iterator[bytes]:
    """A whole ``response`` object as Responses stream events."""
    sequence = 0

    def event(data: dict[str, Any]) -> bytes:
        nonlocal sequence
        data["sequence_number"] = sequence
        sequence += 1
        return sse_event(data, data["type"])

    started = {**copy.deepcopy(dict(response)), "status": "in_progress", "output": []}
    started.pop("toolshim", None)
    yield event({"type": "response.created", "response": started})
    yield event({"type": "response.in_progress", "response": started})
    for index, item in enumerate(response.get("output") or ()):
        kind = item.get("type")
        where = {"item_id": item.get("id"), "output_index": index}
        added = dict(item)
        if kind == "message":
            added["content"] = []
            added["status"] = "in_progress"
        elif kind == "function_call":
            added["arguments"] = ""
            added["status"] = "in_progress"
        yield event({"type": "response.output_item.added", "output_index": index, "item": added})
        if kind == "message":
            for number, part in enumerate(item.get("content") or ()):
                at = {**where, "content_index": number}
                empty = {**part, "text": ""} if part.get("type") == "output_text" else part
                yield event({"type": "response.content_part.added", **at, "part": empty})
                if part.get("type") == "output_text":
                    text = part.get("text", "")
                    delta = {"type": "response.output_text.delta", **at, "delta": text}
                    yield event({**delta, "logprobs": []})
                    done = {"type": "response.output_text.done", **at, "text": text}
                    yield event({**done, "logprobs": []})
                yield event({"type": "response.content_part.done", **at, "part": part})
        elif kind == "function_call":
            arguments = item.get("arguments", "")
            delta = {"type": "response.function_call_arguments.delta", **where}
            yield event({**delta, "delta": arguments})
            done = {"type": "response.function_call_arguments.done", **where}
            yield event({**done, "arguments": arguments, "name": item.get("name")})
        yield event({"type": "response.output_item.done", "output_index": index, "item": item})
    yield event({"type": "response.completed", "response": dict(response)})


def replay_messages(message: Mapping[str, Any]) -> Iterator[bytes]:
    """A whole Messages answer as Messages stream events."""
    usage = dict(message.get("usage") or {})
    start = {
        **{k: v for k, v in message.items() if k != "toolshim"},
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**usage, "output_tokens": 0},
    }
    yield sse_event({"type": "message_start", "message": start}, "message_start")
    for index, block in enumerate(message.get("content") or ()):
        kind = block.get("type")
        opened = dict(block)
        delta: dict[str, Any] | None = None
        if kind == "text":
            opened["text"] = ""
            delta = {"type": "text_delta", "text": block.get("text", "")}
        elif kind in ("tool_use", "mcp_tool_use", "server_tool_use"):
            opened["input"] = {}
            text = json.dumps(block.get("input") or {}, ensure_ascii=False)
            delta = {"type": "input_json_delta", "partial_json": text}
        start_block = {"type": "content_block_start", "index": index, "content_block": opened}
        yield sse_event(start_block, "content_block_start")
        if delta is not None:
            data = {"type": "content_block_delta", "index": index, "delta": delta}
            yield sse_event(data, "content_block_delta")
        yield sse_event({"type": "content_block_stop", "index": index}, "content_block_stop")
    end = {
        "type": "message_delta",
        "delta": {
            "stop_reason": message.get("stop_reason"),
            "stop_sequence": message.get("stop_sequence"),
        },
        "usage": {"output_tokens": usage.get("output_tokens", 0)},
    }
    if "toolshim" in message:
        end["toolshim"] = message["toolshim"]
    yield sse_event(end, "message_delta")
    yield sse_event({"type": "message_stop"}, "message_stop")
