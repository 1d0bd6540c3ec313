"""History rewriting for an upstream without tools: tool calls and results become plain text.

The result is a new tuple of messages (the caller's request is never mutated) in which

* every ``system``/``developer`` message is merged into one leading system message, followed by
  the tool instructions (templates such as Gemma's reject system messages elsewhere);
* an assistant message's ``tool_calls`` become text in the dialect's own call format;
* a ``role=tool`` message becomes a user message carrying the tool's name, the call id and
  the result;
* consecutive user messages are merged (several templates demand strict alternation);
* when the conversation ends with tool results, the calls made since the last question and
  their results are folded into that question's turn (:func:`fold_results`): the question,
  "You called get_weather(city="Paris"); it returned: …" for each call, then what to do now —
  answer with these results, or call a tool for what they do not give, never the same call
  again (with tools offered); answer using these results (without). Given the dialect's own
  result turns instead (``<tool_response>`` for hermes), Qwen2.5-Coder-0.5B writes the call
  it just made again and again until ``max_tokens``; folded, it answers (see the agent suite
  in docs/results.md).

Nothing is dropped: names, images and unknown fields stay on their messages.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace

from toolshim.dialects.base import Dialect
from toolshim.engine.files_named import untouched_since_request
from toolshim.types import EMPTY, Message, ToolCall

__all__ = [
    "elided",
    "fold_results",
    "results_note",
    "rewrite_history",
    "shown_arguments",
    "strip_note",
]

_SYSTEM_ROLES = frozenset({"system", "developer"})
_RESULT_ROLES = frozenset({"tool", "function"})


def strip_note() -> str:
    """The system note for ``strip`` mode (seed 004): no tools, answer in text."""
    return (
        "Note: no tools are available in this conversation. Do not attempt to use tools or "
        "make tool calls; answer in plain text."
    )


def rewrite_history(
    messages: Sequence[Message],
    dialect: Dialect,
    instructions: str | None = None,
    *,
    agent: bool = False,
) -> tuple[Message, ...]:
    """Messages for an upstream without tools (see the module docstring); ``agent``: a coding
    agent's turn, told after results to take the next step (:func:`results_note`)."""
    if instructions and _ends_with_results(messages):
        return fold_results(messages, dialect, instructions, agent=agent)
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


def _ends_with_results(messages: Sequence[Message]) -> bool:
    return bool(messages) and messages[-1].role in _RESULT_ROLES


def _question(messages: Sequence[Message]) -> tuple[int, str]:
    """The last user message that is not a tool result: its index and text (-1 if none)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role == "user":
            return index, message.text
    return -1, ""


def elided(text: str, limit: int) -> str:
    """``text`` on one line (white space collapsed), cut to ``limit`` characters with "..."."""
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text


def results_note(
    asked: bool, errors: int = 0, *, agent: bool = False, untouched: Sequence[str] = ()
) -> str:
    """What to do once results are in, with tools still offered. A coding ``agent`` is told to
    take the next step if one is still to be done (asked to read a value and write it
    somewhere, it must write it, not say it; the brief says how), and after a failed call not
    to make it again as it was (the 0.5B repeated Claude Code's ``Edit`` of a file that did
    not exist), and which files the request names that no call has touched yet
    (:mod:`~toolshim.engine.files_named`)."""
    target = "the question" if asked else "the user"
    if not agent:
        return (
            f"Use these results to answer {target}. If they give what is needed, answer now in "
            "plain words, without a tool call. Call a tool only to get information these "
            "results do not give, and never repeat a call whose result you already have."
        )
    failed = (
        "A call failed: do not make it again as it was; change its arguments or use another tool. "
        if errors
        else ""
    )
    missing = (
        f"Named in the request and not used by any call yet: {', '.join(untouched)}. "
        if untouched
        else ""
    )
    # What to do after results is in the brief (the system prompt, which the upstream's cache
    # serves): here only what changes, so each turn adds little more than its results.
    # Full sentences: a short line ("Next: the call for a step still left, or the answer if
    # all is done.") the 1.5B gave back as its answer, in 4 of 12 tasks.
    return (
        f"Use these results. {failed}{missing}If a step of the request is still not done, make "
        "its call now with the values they hold; if everything asked is done, answer in plain "
        "words. Never repeat a call whose result you have."
    )


def _closing_without_tools(asked: bool, errors: int, results: int) -> str:
    """What to do with the results when no tool may be called: give their values (the 0.5B
    otherwise answers "cloudy" for ``{"temperature_c": 24, "conditions": "cloudy"}``); when a
    result is an error, say what failed (asked for values, it made one up: "ZZZZ is 100")."""
    target = "the question" if asked else "the user"
    if errors and errors == results:
        return (
            "The tool reported an error. Tell the user, in plain words, what failed and why. "
            "Do not call a tool."
        )
    failed = " If a result is an error, say what failed." if errors else ""
    return (
        f"Answer {target} using these results, in plain words, giving the values they hold "
        f"(numbers with their units, names, statuses).{failed} Do not call a tool."
    )


def is_error_result(text: str) -> bool:
    """A tool result that reports a failure: text opening with ``error`` (the Anthropic codec
    writes ``Error: `` for ``is_error``; agents commonly send ``Error: …``), or a JSON object
    whose only key is ``error``."""
    stripped = text.lstrip()
    if stripped[:5].lower() == "error":
        return True
    if stripped.startswith("{"):
        try:
            value = json.loads(stripped)
        except ValueError:
            return False
        return isinstance(value, dict) and list(value) == ["error"]
    return False


def fold_results(
    messages: Sequence[Message],
    dialect: Dialect,
    instructions: str | None = None,
    *,
    agent: bool = False,
    answer: bool = False,
) -> tuple[Message, ...]:
    """The history with the calls made since the last question and their results folded into
    that question's turn, closed by what to do now: answer with them, or (with tool
    ``instructions``) call something else (see the module docstring). ``answer``: the
    ``instructions`` stay in the system prompt but the note asks for the answer without a
    call (the prompt then starts as the turn's earlier requests did, so the upstream's
    cache serves all but the note). A history without such results is
    :func:`rewrite_history`'s."""
    index, question = _question(messages)
    after = messages[index + 1 :] if index >= 0 else messages
    if not any(m.role in _RESULT_ROLES for m in after):
        return rewrite_history(messages, dialect, instructions, agent=agent)
    calls = {c.id: c for m in after for c in m.tool_calls}
    lines: list[str] = [question.strip()] if question.strip() else []
    superseded = _superseded(after, calls) if answer and not agent else set()
    for message in after:
        if message.role == "assistant" and message.text.strip():
            lines.append(f"You said: {message.text.strip()}")
        elif id(message) in superseded:
            continue
        elif message.role in _RESULT_ROLES:
            call = calls.get(message.tool_call_id or "")
            name = call.name if call else (message.name or "a tool")
            shown = f"{name}({shown_arguments(call.arguments)})" if call else name
            lines.append(f"You called {shown}; it returned:\n{message.text.strip()}")
        elif message.role != "assistant" and message.text.strip():
            lines.append(message.text.strip())
    asked = bool(question.strip())
    results = [m for m in after if m.role in _RESULT_ROLES and id(m) not in superseded]
    errors = sum(is_error_result(m.text) for m in results)
    untouched = untouched_since_request(messages) if agent else []
    lines.append(
        results_note(asked, errors, agent=agent, untouched=untouched)
        if instructions and not answer
        else _closing_without_tools(asked, errors, len(results))
    )
    before = messages[:index] if index > 0 else ()
    earlier = (
        rewrite_history(before, dialect, instructions, agent=agent)
        if before or instructions
        else ()
    )
    folded = Message("user", "\n\n".join(lines))
    if index >= 0:
        original = messages[index]
        if isinstance(original.content, tuple):  # keep images and other parts of the question
            parts = tuple(p for p in original.content if p.get("type") != "text")
            folded = replace(original, content=(*parts, {"type": "text", "text": folded.text}))
        else:
            folded = replace(original, content=folded.text)
    body = list(earlier)
    _append_user(body, folded)
    return tuple(body)


def _superseded(after: Sequence[Message], calls: Mapping[str, ToolCall]) -> set[int]:
    """The results of failed calls whose tool a later call made work: left out of the
    request for the answer. Given ``list_orders("alice")``'s error, then alice's user id, then
    her orders, the 0.5B answered "alice has user id u-17" (both such tasks of the agent
    suite); the error is not what the user asked about, and its note ("if a result is an
    error, say what failed") pulled the answer back to the first steps. (The ``id`` of each
    such message.)"""
    results = [
        (m, calls[m.tool_call_id].name)
        for m in after
        if m.role in _RESULT_ROLES and m.tool_call_id is not None and m.tool_call_id in calls
    ]
    return {
        id(m)
        for i, (m, name) in enumerate(results)
        if is_error_result(m.text)
        and any(n == name and not is_error_result(r.text) for r, n in results[i + 1 :])
    }


def shown_arguments(arguments: str) -> str:
    """A call's JSON arguments as ``key=value`` pairs (the raw text when not an object)."""
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return arguments
    if not isinstance(value, dict):
        return arguments
    return ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in value.items())
