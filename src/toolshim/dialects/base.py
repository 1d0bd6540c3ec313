"""What a dialect is: one prompt format for describing tools, writing calls and reading them back."""

from __future__ import annotations

import json
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, ClassVar

import orjson

from toolshim.dialects._prompt import PromptOptions, choice_rules, example_arguments, schema_json
from toolshim.dialects.extract import ParsedReply, ReplyParser, parse_reply
from toolshim.types import ToolCall, ToolSpec

__all__ = [
    "OPEN_HERE",
    "Dialect",
    "PromptOptions",
    "example_arguments",
    "rendered_tools",
    "schema_json",
]

OPEN_HERE = "\u2063TOOLSHIM\u2063"
"""Where :meth:`Dialect.opening_at` cuts a call: put it in the one argument value to open."""


class Dialect(ABC):
    """A prompt format. Dialects never do I/O; the engine drives them.

    Subclasses render the tool instructions (:meth:`render_tools`), an assistant's calls for
    the history (:meth:`render_calls`), a tool result (:meth:`render_result`), and say how to
    fix a broken reply (:meth:`format_reminder`). Parsing is shared: every dialect reads every
    other dialect's shapes through the tolerant extraction layer (:mod:`.extract`), tuned by
    the class attributes below. ``parse(render_calls(calls))`` gives the calls back.
    """

    name: ClassVar[str]
    max_calls: ClassVar[int | None] = None
    """The most calls the format allows in one reply (None: no limit)."""
    python_unknown: ClassVar[bool] = False
    """Report ``[f(x=1)]`` with an unknown ``f`` as a wrong call rather than prose."""
    empty_list_declines: ClassVar[bool] = False
    """A reply that starts with ``[]`` says that no tool is needed."""
    stop_sequences: ClassVar[tuple[str, ...]] = ("Tool result for ", "Tool result:")
    """Where a reply must end: the start of a tool result as :meth:`render_result` writes it
    (a model that goes on past its call writes the result it imagines), or as the model
    abbreviates it (Qwen2.5-Coder-1.5B under pythonic answered a dependent question with three
    made-up ``Tool result: {…}`` lines)."""

    many_calls: ClassVar[str] = "If several calls are needed, put them all in the one list."
    """How to make several calls in one reply, as the tool instructions say it."""
    results_note: ClassVar[str] = (
        "The results of your calls are in the messages that start with 'Tool result'; "
        "use them to answer the user."
    )
    """Where the results of the calls are, said where the conversation has some."""

    @abstractmethod
    def render_tools(self, tools: Sequence[ToolSpec], options: PromptOptions) -> str:
        """The system-prompt text that describes the tools and how to call them (or not)."""

    @abstractmethod
    def render_calls(self, calls: Sequence[ToolCall]) -> str:
        """An assistant's tool calls written in this dialect, for the rewritten history."""

    @abstractmethod
    def format_reminder(self, tools: Sequence[ToolSpec], options: PromptOptions) -> str:
        """One or two sentences that restate the call format, for re-asks."""

    def finish_tools(
        self, lines: list[str], options: PromptOptions, decline: str, *more: str
    ) -> str:
        """The tool instructions: ``lines``, the rules of the tool choice (``decline``: how to
        answer without a tool), ``more`` lines, then where the results are."""
        lines = [
            *lines,
            *choice_rules(options, decline=decline, many=self.many_calls, max_calls=self.max_calls),
            *more,
        ]
        if options.results:
            lines.append(self.results_note)
        return "\n".join(lines).strip()

    def continuation(self, calls: Sequence[ToolCall]) -> tuple[str, str] | None:
        """How to ask for one more call after ``calls`` by continuing the reply: the assistant
        text to send (``calls`` written as this dialect writes them, then the opening of the
        next call) and that opening (put back in front of what the model writes, to parse).
        None: the format cannot be continued that way (see :mod:`toolshim.engine.more_calls`)."""
        return None

    def call_opening(self, name: str | None = None) -> str | None:
        """The text a reply that makes a call opens with, to hand a model its reply opened as
        a call (:mod:`toolshim.engine.next_step`); with ``name``, opened as a call of that tool
        up to its arguments. None when the format has no such opening."""
        opening = self.continuation(())
        if opening is None:
            return None
        return opening[0] + (f'{name}"' if name is not None else "")

    def opening_at(self, name: str, arguments: Mapping[str, Any]) -> str | None:
        """The call of ``name`` with ``arguments`` written up to where one of their string
        values holds :data:`OPEN_HERE` (what the model is handed to go on from there), or
        None when the format does not write it in one piece."""
        rendered = self.render_calls(
            [ToolCall("opening", name, json.dumps(dict(arguments), ensure_ascii=False))]
        )
        at = rendered.find(OPEN_HERE)
        return rendered[:at] if at > 0 else None

    def render_result(self, name: str, call_id: str, content: str) -> str:
        """A tool's result, as the text of a user message."""
        return f"Tool result for {name} (call id {call_id}):\n{content}"

    def parser(self, tools: Sequence[ToolSpec], *, markup: str | None = None) -> ReplyParser:
        """A fresh incremental parser for one reply (``markup``: the model family's own call
        markup, read first where a text could be read two ways; see :data:`.extract.MARKUPS`)."""
        return ReplyParser(
            tools,
            python_unknown=self.python_unknown,
            empty_list_declines=self.empty_list_declines,
            markup=markup,
        )

    def parse(
        self, text: str, tools: Sequence[ToolSpec], *, markup: str | None = None
    ) -> ParsedReply:
        """Parse a whole reply (the same result as feeding :meth:`parser` and finishing)."""
        return parse_reply(
            text,
            tools,
            python_unknown=self.python_unknown,
            empty_list_declines=self.empty_list_declines,
            markup=markup,
        )

    def response_format(
        self, tools: Sequence[ToolSpec], options: PromptOptions
    ) -> Mapping[str, Any] | None:
        """A JSON-Schema ``response_format`` that admits exactly the valid replies, if any."""
        return None

    def holds_to_schema(self, tools: Sequence[ToolSpec], options: PromptOptions) -> bool:
        """Whether asking to constrain takes effect: this dialect has a JSON Schema to hold
        its replies to for ``tools`` under ``options`` (hermes and pythonic never do; compact
        only in the decision strategy). Asked of a request by the engine, and of a pick by
        the eval, so that both say ``constrain`` as it took effect."""
        held = PromptOptions(
            options.choice,
            parallel=options.parallel,
            decision=options.decision,
            constrained=True,
            results=options.results,
        )
        return self.response_format(tools, held) is not None

    def __repr__(self) -> str:
        return f"<dialect {self.name}>"


_RENDERED: dict[tuple[Any, ...], str] = {}
_RENDERED_MAX = 256
_RENDERED_LOCK = threading.Lock()


def rendered_tools(
    dialect: Dialect,
    tools: Sequence[ToolSpec],
    options: PromptOptions,
    *,
    prepare: Callable[[Sequence[ToolSpec]], Sequence[ToolSpec]] | None = None,
    variant: Hashable = None,
) -> str:
    """``dialect.render_tools(prepare(tools), options)``, remembered: a client sends the same
    tools with every request, and rendering them is a good part of an emulated request's CPU.
    ``prepare`` (condensing, defusing: a pure function of the tools, told apart by ``variant``)
    runs only when the text is not remembered.

    Only toolshim's own dialects are remembered (their text depends on nothing but the tools'
    names, descriptions, types and schemas, in their order, and the options); tools whose
    schema is not plain JSON are rendered each time.
    """
    if type(dialect) not in _PURE_RENDERERS:
        return dialect.render_tools(prepare(tools) if prepare else tools, options)
    described = [(t.name, t.type, t.description, t.parameters) for t in tools]
    try:
        shown = orjson.dumps(described)
        if b"null" in shown:  # orjson writes NaN and Infinity as null too: tell them apart
            shown = json.dumps(described, allow_nan=True).encode()
    except (TypeError, ValueError):
        return dialect.render_tools(prepare(tools) if prepare else tools, options)
    choice = options.choice
    key = (
        type(dialect),
        shown,
        choice.kind,
        choice.name,
        options.parallel,
        options.decision,
        options.constrained,
        options.results,
        variant,
    )
    text = _RENDERED.get(key)
    if text is None:
        text = dialect.render_tools(prepare(tools) if prepare else tools, options)
        with _RENDERED_LOCK:  # sync engines run their loops in threads of their own
            while len(_RENDERED) >= _RENDERED_MAX:
                _RENDERED.pop(next(iter(_RENDERED)))  # the oldest
            _RENDERED[key] = text
    return text


_PURE_RENDERERS: set[type[Dialect]] = set()
"""Dialect classes whose ``render_tools`` is a pure function of what :func:`rendered_tools`
keys on (filled in by :mod:`toolshim.dialects` with the built-in ones)."""
