"""Chat-completion answers on the wire: completions and stream chunks, read leniently, written
exactly (every field toolshim does not interpret is kept in ``extra`` and written back)."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Mapping
from typing import Any

from toolshim.accumulate import merge_delta_fields
from toolshim.errors import UpstreamProtocolError
from toolshim.types import EMPTY, Choice, Completion, StreamChunk, ToolCallDelta, Usage
from toolshim.wire.openai_chat.legacy import downgrade_chunk, downgrade_completion
from toolshim.wire.openai_chat.messages import message_from_dict, message_to_dict

__all__ = [
    "chunk_from_dict",
    "chunk_to_dict",
    "completion_from_dict",
    "completion_to_dict",
    "merge_delta_fields",
    "new_completion_id",
    "usage_from_dict",
    "usage_to_dict",
]


def new_completion_id() -> str:
    """``chatcmpl-`` and 24 hex digits from :mod:`secrets`: an id must not be guessable from
    the ids a caller has seen (a Mersenne Twister is rebuilt from 624 outputs)."""
    return f"chatcmpl-{secrets.token_hex(12)}"


def usage_from_dict(data: Any) -> Usage | None:
    if data is None or not isinstance(data, Mapping):  # (None, the common case, skips the ABC)
        return None
    known = ("prompt_tokens", "completion_tokens", "total_tokens")
    extra = {k: v for k, v in data.items() if k not in known}
    return Usage(
        int(data.get("prompt_tokens") or 0),
        int(data.get("completion_tokens") or 0),
        int(data.get("total_tokens") or 0),
        extra=extra or EMPTY,
    )


def usage_to_dict(usage: Usage) -> dict[str, Any]:
    out = {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    }
    if usage.extra:  # (EMPTY is a Mapping, not a dict: updating with it costs a walk)
        out.update(usage.extra)
    return out


def _stop_sequence(choice: Mapping[str, Any]) -> str | None:
    """The stop sequence an upstream says ended a choice (vLLM's ``stop_reason``, else
    llama-server's ``matched_stop``; a token id is not one)."""
    value = choice.get("stop_reason", choice.get("matched_stop"))
    return value if isinstance(value, str) else None


def completion_from_dict(data: Any) -> Completion:
    """Read an upstream's ``chat.completion`` leniently (missing ids and times are filled in)."""
    if not isinstance(data, Mapping):
        raise UpstreamProtocolError(
            f"the upstream answered with {type(data).__name__}, not a chat.completion object"
        )
    raw_choices = data.get("choices")
    if not isinstance(raw_choices, list):
        raise UpstreamProtocolError("the upstream's chat.completion has no 'choices' list")
    choices = []
    for i, c in enumerate(raw_choices):
        if not isinstance(c, Mapping):
            raise UpstreamProtocolError(f"choices[{i}] is not an object")
        message = message_from_dict(c.get("message") or {"role": "assistant", "content": ""})
        extra = {k: v for k, v in c.items() if k not in ("index", "message", "finish_reason")}
        choices.append(
            Choice(
                index=int(c.get("index", i) or 0),
                message=message,
                finish_reason=c.get("finish_reason"),
                extra=extra or EMPTY,
                stop_sequence=_stop_sequence(c) if extra else None,
            )
        )
    top = ("id", "object", "created", "model", "choices", "usage", "toolshim")
    extra = {k: v for k, v in data.items() if k not in top}
    return Completion(
        id=str(data.get("id") or new_completion_id()),
        model=str(data.get("model") or ""),
        created=int(data.get("created") or time.time()),
        choices=tuple(choices),
        usage=usage_from_dict(data.get("usage")),
        extra=extra or EMPTY,
    )


def completion_to_dict(completion: Completion) -> dict[str, Any]:
    """Write a completion as a ``chat.completion`` (``legacy``: in the function_call shape)."""
    out: dict[str, Any] = {
        "id": completion.id,
        "object": "chat.completion",
        "created": completion.created,
        "model": completion.model,
        "choices": [_whole_choice_to_dict(c) for c in completion.choices],
    }
    if completion.usage is not None:
        out["usage"] = usage_to_dict(completion.usage)
    if completion.extra:
        out.update(completion.extra)
    if completion.meta is not None:
        out["toolshim"] = completion.meta.to_dict()
    return downgrade_completion(out) if completion.legacy else out


def _whole_choice_to_dict(choice: Choice) -> dict[str, Any]:
    out = {
        "index": choice.index,
        "message": message_to_dict(choice.message),
        "finish_reason": choice.finish_reason,
    }
    if choice.extra:
        out.update(choice.extra)
    return out


_DELTA_FIELDS = frozenset({"role", "content", "tool_calls"})
_CALL_DELTA_FIELDS = frozenset({"index", "id", "type", "function"})
_CHOICE_FIELDS = frozenset({"index", "delta", "finish_reason"})


def chunk_from_dict(data: Mapping[str, Any]) -> StreamChunk:
    """Read one upstream ``chat.completion.chunk`` whole: its first choice in the chunk's
    fields, the others in ``other_choices``; every field not read (the chunk's, a choice's, a
    delta's, a tool-call delta's) in the ``extra`` of its level, written back by
    :func:`chunk_to_dict`."""
    others = dict(data)
    choices = others.pop("choices", None)
    usage = others.pop("usage", None)
    usage = None if usage is None else usage_from_dict(usage)
    model = others.pop("model", None)
    if type(model) is not str:
        model = None
    if not choices:
        return StreamChunk(usage=usage, model=model, event_extra=others or EMPTY, choiceless=True)
    rest = tuple(_choice_from_dict(c) for c in choices[1:]) if len(choices) > 1 else ()
    return _choice_from_dict(choices[0], usage, model, others or EMPTY, rest)


def _choice_from_dict(
    c: Any,
    usage: Usage | None = None,
    model: str | None = None,
    event_extra: Mapping[str, Any] = EMPTY,
    other_choices: tuple[StreamChunk, ...] = (),
) -> StreamChunk:
    """One choice of a ``chat.completion.chunk`` (the other arguments: the chunk's own
    fields, for its first choice)."""
    if type(c) is not dict and not isinstance(c, Mapping):  # (dict first: the ABC is slow)
        raise UpstreamProtocolError("a stream chunk's choice is not an object")
    delta = c.get("delta") or EMPTY
    calls = delta.get("tool_calls")
    content = delta.get("content")
    extra = (
        EMPTY
        if delta.keys() <= _DELTA_FIELDS
        else {k: v for k, v in delta.items() if k not in _DELTA_FIELDS}
    )
    if c.keys() <= _CHOICE_FIELDS:
        choice_extra, stop = EMPTY, None
    else:
        choice_extra = {k: v for k, v in c.items() if k not in _CHOICE_FIELDS}
        stop = _stop_sequence(c)
    return StreamChunk(
        content=content if type(content) is str else None,
        tool_calls=_call_deltas(calls) if calls else (),
        role=delta.get("role"),
        finish_reason=c.get("finish_reason"),
        usage=usage,
        choice_index=int(c.get("index") or 0),
        extra=extra,
        stop_sequence=stop,
        choice_extra=choice_extra,
        model=model,
        event_extra=event_extra,
        other_choices=other_choices,
    )


def _call_deltas(calls: Any) -> tuple[ToolCallDelta, ...]:
    deltas = []
    for j, tc in enumerate(calls):
        function = tc.get("function") or {}
        arguments = function.get("arguments")
        if arguments is not None and not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        call_extra = {k: v for k, v in tc.items() if k not in _CALL_DELTA_FIELDS}
        deltas.append(
            ToolCallDelta(
                index=int(tc.get("index", j) or 0),
                id=tc.get("id"),
                name=function.get("name"),
                arguments=arguments,
                extra=call_extra or EMPTY,
            )
        )
    return tuple(deltas)


def chunk_to_dict(chunk: StreamChunk, *, id: str, model: str, created: int) -> dict[str, Any]:
    """Write a StreamChunk as a ``chat.completion.chunk`` (the fields an upstream sent that
    toolshim does not read, as they came; ``legacy`` chunks in the ``function_call`` shape)."""
    delta = _delta_to_dict(chunk)
    empty = chunk.choiceless or (
        chunk.usage is not None
        and not delta
        and chunk.finish_reason is None
        and not chunk.choice_extra
    )
    choices = [] if empty else [_choice_to_dict(chunk, delta)]
    if chunk.other_choices:
        choices += [_choice_to_dict(c, _delta_to_dict(c)) for c in chunk.other_choices]
    out: dict[str, Any] = {
        "id": id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model if chunk.model is None else chunk.model,
        "choices": choices,
    }
    if chunk.event_extra:
        out.update(chunk.event_extra)
    if chunk.usage is not None:
        out["usage"] = usage_to_dict(chunk.usage)
    if chunk.meta is not None:
        out["toolshim"] = chunk.meta.to_dict()
    return downgrade_chunk(out) if chunk.legacy else out


def _choice_to_dict(chunk: StreamChunk, delta: dict[str, Any]) -> dict[str, Any]:
    choice = {"index": chunk.choice_index, "delta": delta, "finish_reason": chunk.finish_reason}
    if chunk.choice_extra:
        choice.update(chunk.choice_extra)
    return choice


def _delta_to_dict(chunk: StreamChunk) -> dict[str, Any]:
    delta: dict[str, Any] = {}
    if chunk.role is not None:
        delta["role"] = chunk.role
    if chunk.content is not None:
        delta["content"] = chunk.content
    if chunk.tool_calls:
        calls = []
        for d in chunk.tool_calls:
            entry: dict[str, Any] = {"index": d.index}
            if d.extra:
                entry.update(d.extra)
            function: dict[str, Any] = {}
            if d.id is not None:
                entry["id"] = d.id
                entry["type"] = "function"
            if d.name is not None:
                function["name"] = d.name
            if d.arguments is not None:
                function["arguments"] = d.arguments
            entry["function"] = function
            calls.append(entry)
        delta["tool_calls"] = calls
    if chunk.extra:
        delta.update(chunk.extra)
    return delta
