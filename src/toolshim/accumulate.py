"""The one place streamed deltas are put back together: one choice's reply from its chunks.

:class:`ChoiceAccumulator` is sans-IO (``add(chunk)`` per :class:`~toolshim.types.StreamChunk`,
then read the whole): the engine (native streams it judges or holds), the agent (the reply it
acts on) and the agent's trace all put a streamed reply together with it, so they agree on
every rule:

* text is joined; the finish reason, usage and metadata are the last ones sent;
* a tool call's deltas are grouped by their ``index``; its ``id`` is the first one sent; its
  name is joined from fragments, except that a fragment equal to the end of the name so far
  is not added again (servers that repeat the whole name in every delta would otherwise
  double it: ``get_weatherget_weather``); arguments are joined;
* other delta fields (``reasoning_content``, ``reasoning_details``, Gemini's
  ``extra_content`` on a call) are merged by :func:`merge_delta_fields`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from toolshim.types import EMPTY, Message, Metadata, StreamChunk, ToolCall, ToolCallDelta, Usage

__all__ = ["ChoiceAccumulator", "merge_delta_fields"]


def merge_delta_fields(
    into: dict[str, Any], fields: Mapping[str, Any], *, join_text: bool = False
) -> None:
    """Add one streamed delta's ``extra`` fields to those gathered so far: objects are merged,
    lists joined (``reasoning_details`` sent in pieces), text joined when ``join_text``
    (``reasoning_content``), other values replaced; nulls are skipped. ``into`` owns its
    nested objects and lists (they are copies)."""
    for key, value in fields.items():
        if value is None:
            continue
        old = into.get(key)
        if isinstance(value, Mapping):
            target = old if isinstance(old, dict) else {}
            merge_delta_fields(target, value, join_text=join_text)
            into[key] = target
        elif isinstance(value, list):
            if isinstance(old, list):
                old.extend(value)
            else:
                into[key] = list(value)
        elif join_text and isinstance(value, str) and isinstance(old, str):
            into[key] = old + value
        else:
            into[key] = value


class _Call:
    __slots__ = ("arguments", "extra", "id", "name")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.arguments = ""
        self.extra: dict[str, Any] = {}


class ChoiceAccumulator:
    """One choice (``choice_index``, 0 by default) of a stream, put together chunk by chunk
    (see the module docstring for the rules)."""

    __slots__ = ("_calls", "choice_index", "extra", "finish_reason", "meta", "parts", "usage")

    def __init__(self, choice_index: int = 0) -> None:
        self.choice_index = choice_index
        self.parts: list[str] = []
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.meta: Metadata | None = None
        self.extra: dict[str, Any] = {}
        """The message's other fields, merged (text fields joined)."""
        self._calls: dict[int, _Call] = {}

    def add(self, chunk: StreamChunk) -> str | None:
        """Take one chunk (another choice's is read for its usage and metadata only); return
        its new text, if any."""
        if chunk.usage is not None:
            self.usage = chunk.usage
        if chunk.meta is not None:
            self.meta = chunk.meta
        if chunk.choice_index != self.choice_index:
            return None
        self.finish_reason = chunk.finish_reason or self.finish_reason
        if chunk.extra:
            merge_delta_fields(self.extra, chunk.extra, join_text=True)
        if chunk.tool_calls:
            self.add_calls(chunk.tool_calls)
        if chunk.content:
            self.parts.append(chunk.content)
            return chunk.content
        return None

    def add_calls(self, deltas: Iterable[ToolCallDelta]) -> None:
        """Take this choice's tool-call deltas (of one chunk)."""
        for delta in deltas:
            call = self._calls.get(delta.index)
            if call is None:
                call = self._calls[delta.index] = _Call()
            if delta.id and not call.id:
                call.id = delta.id
            if delta.name and not call.name.endswith(delta.name):
                call.name += delta.name
            if delta.arguments:
                call.arguments += delta.arguments
            if delta.extra:
                merge_delta_fields(call.extra, delta.extra)

    @property
    def text(self) -> str:
        return "".join(self.parts)

    @property
    def has_calls(self) -> bool:
        return bool(self._calls)

    def tool_calls(self, default_id: Callable[[int], str] | None = None) -> tuple[ToolCall, ...]:
        """The calls in index order; a call sent without an id gets ``default_id(index)`` (an
        empty id without one); empty arguments stay empty."""
        return tuple(
            ToolCall(
                call.id or (default_id(index) if default_id is not None else ""),
                call.name,
                call.arguments,
                extra=call.extra or EMPTY,
            )
            for index, call in sorted(self._calls.items())
        )

    def message(self, default_id: Callable[[int], str] | None = None) -> Message:
        """The reply as an assistant message (no text: ``content`` None)."""
        return Message(
            "assistant",
            self.text or None,
            tool_calls=self.tool_calls(default_id),
            extra=self.extra or EMPTY,
        )
