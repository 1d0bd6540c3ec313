"""History rewriting for an upstream without tools: tool calls and results become plain text.

The result is a new tuple of messages (the caller's request is never mutated) in which

* every ``system``/``developer`` message is merged into one leading system message, followed by
  the tool instructions (templates such as Gemma's reject system messages elsewhere);
* an assistant message's ``tool_calls`` become text in the dialect's own call format;
* a ``role=tool`` message becomes a user message carrying the tool's name, the call id and
  the result;
* consecutive user messages are merged (several templates demand strict alternation).

Nothing is dropped: names, images and unknown fields stay on their messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from toolshim.dialects.base import Dialect
from toolshim.types import EMPTY, Message

__all__ = ["rewrite_history", "strip_note"]

_SYSTEM_ROLES = frozenset({"system", "developer"})


def strip_note() -> str:
    """The system note for ``strip`` mode (seed 004): no tools, answer in text."""
    return (
        "Note: no tools are available in this conversation. Do not attempt to use tools or "
        "make tool calls; answer in plain text."
    )


def rewrite_history(
    messages: Sequence[Message], dialect: Dialect, instructions: str | None = None
) -> tuple[Message, ...]:
    """Messages for an upstream without tools (see the module docstring)."""
    names = {c.id: c.name for m in messages for c in m.tool_calls}
    system_texts: list[str] = []
    system_extra: dict[str, object] = {}
    body: list[Message] = []
    for message in messages:
        if message.role in _SYSTEM_ROLES:
            if message.text:
                system_texts.append(message.text)
            system_extra.update(message.extra)
            continue
        if message.role == "tool":
            call_id = message.tool_call_id or "unknown"
            name = message.name or names.get(call_id, "unknown tool")
            text = dialect.render_result(name, call_id, message.text)
            _append_user(body, Message("user", text))
            continue
        if message.role == "function":  # the legacy OpenAI shape of a tool result
            text = dialect.render_result(message.name or "unknown tool", "legacy", message.text)
            _append_user(body, Message("user", text))
            continue
        if message.role == "assistant" and message.tool_calls:
            rendered = dialect.render_calls(message.tool_calls)
            text = f"{message.text.rstrip()}\n{rendered}" if message.text.strip() else rendered
            body.append(replace(message.with_text(text), tool_calls=()))
            continue
        if message.role == "user":
            _append_user(body, message)
            continue
        body.append(message)
    if instructions:
        system_texts.append(instructions)
    if not system_texts:
        return tuple(body)
    system = Message("system", "\n\n".join(system_texts), extra=system_extra or EMPTY)
    return (system, *body)


def _append_user(body: list[Message], message: Message) -> None:
    """Add a user message, merging it into a directly preceding user message."""
    if body and body[-1].role == "user" and body[-1].name == message.name:
        previous = body[-1]
        if isinstance(previous.content, tuple) or isinstance(message.content, tuple):
            parts = (*_parts(previous), *_parts(message))
            merged = replace(previous, content=parts)
        else:
            merged = replace(previous, content=f"{previous.text}\n\n{message.text}")
        extra = {**previous.extra, **message.extra}
        body[-1] = replace(merged, extra=extra or EMPTY)
        return
    body.append(message)


def _parts(message: Message) -> tuple[dict[str, object], ...]:
    if isinstance(message.content, tuple):
        return tuple(dict(p) for p in message.content)
    return ({"type": "text", "text": message.text},)
