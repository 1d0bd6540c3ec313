"""Core types: the canonical, immutable shapes that flow between wire, engine, dialects and upstreams."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from enum import StrEnum
from inspect import signature
from typing import Any, ClassVar, Literal, NoReturn, TypeVar

__all__ = [
    "EMPTY",
    "ChatRequest",
    "Choice",
    "Completion",
    "Message",
    "Metadata",
    "Mode",
    "Strategy",
    "StreamChunk",
    "ToolCall",
    "ToolCallDelta",
    "ToolChoice",
    "ToolSpec",
    "Usage",
]


class _Empty(dict[str, Any]):
    """An immutable, hashable empty mapping: the default of every ``extra`` field. A ``dict``
    whose every way of adding an item raises, so that reading it (``if chunk.extra:``, on every
    streamed chunk) runs in C, not in a Python ``__len__``."""

    __slots__ = ()

    def _immutable(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("EMPTY is immutable: build a dict instead")

    __setitem__ = __delitem__ = __ior__ = _immutable
    update = setdefault = pop = popitem = clear = _immutable

    def __hash__(self) -> int:  # type: ignore[override]
        return 0


EMPTY: Mapping[str, Any] = _Empty()
"""A shared empty mapping for ``extra`` fields."""

_T = TypeVar("_T")


def _quick_init(cls: type[_T]) -> type[_T]:
    """``cls`` (a frozen dataclass with slots) with an ``__init__`` that sets each slot through
    its descriptor: the one ``dataclass`` writes calls ``object.__setattr__`` per field, which
    made a 15-field StreamChunk cost about 3 µs to build, and a proxy builds one for every
    chunk it streams. Same parameters, defaults and checks (``__post_init__`` is called);
    the instances stay frozen."""
    if any(f.kw_only for f in fields(cls)):  # type: ignore[arg-type]
        return cls  # (keyword-only fields: dataclass's own __init__ stays)
    names: dict[str, Any] = {}
    params, body = [], []
    for f in fields(cls):  # type: ignore[arg-type]
        setter = f"_set_{f.name}"
        names[setter] = cls.__dict__[f.name].__set__
        if f.default_factory is not MISSING:  # made only when no value is given
            names[f"_factory_{f.name}"] = f.default_factory
            names[f"_none_{f.name}"] = MISSING
            made = f"_factory_{f.name}()"
            if f.init:
                params.append(f"{f.name}=_none_{f.name}")
                made = f"{made} if {f.name} is _none_{f.name} else {f.name}"
            body.append(f"    {setter}(self, {made})")
            continue
        default = ""
        if f.default is not MISSING:
            names[f"_default_{f.name}"] = f.default
            default = f"_default_{f.name}"
        if f.init:
            params.append(f"{f.name}={default}" if default else f.name)
            body.append(f"    {setter}(self, {f.name})")
        elif default:
            body.append(f"    {setter}(self, {default})")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    source = f"def __init__(self, {', '.join(params)}):\n" + "\n".join(body or ["    pass"])
    exec(source, names)  # (as dataclasses itself builds __init__)
    init = names["__init__"]
    if signature(init).parameters.keys() != signature(cls.__init__).parameters.keys():
        return cls  # an InitVar: dataclass's own __init__ stays
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = cls.__init__.__doc__
    init.__annotations__ = dict(cls.__init__.__annotations__)
    cls.__init__ = init  # type: ignore[method-assign]
    return cls


class Mode(StrEnum):
    """How a request that carries ``tools`` is served (DESIGN.md, "Modes")."""

    OFF = "off"
    FALLBACK = "fallback"
    FORCE = "force"
    AUTO = "auto"
    STRIP = "strip"


class Strategy(StrEnum):
    """How emulation asks the model: one combined request, or seed 001's decision request."""

    SINGLE = "single"
    DECISION = "decision"


@_quick_init
@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool the caller offers (``type`` ``function`` unless a protocol's own kind)."""

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    type: str = "function"
    extra: Mapping[str, Any] = EMPTY
    """The definition's other fields, sent on as they came: a function's (``strict`` …), or
    the settings of a tool of another type."""
    _schema_text: str | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def is_function(self) -> bool:
        return self.type == "function"

    @property
    def schema_text(self) -> str:
        """The parameters schema as JSON text with sorted keys, written once per spec (what the
        schema checks are cached by; a request's tools are inspected, then each call checked).
        Raises what :func:`json.dumps` raises for a schema that is not JSON."""
        text = self._schema_text
        if text is None:
            text = json.dumps(self.parameters, sort_keys=True)
            object.__setattr__(self, "_schema_text", text)  # (a cache: frozen for its fields)
        return text

    @property
    def required(self) -> tuple[str, ...]:
        """The parameters its schema requires, in order (none when ``required`` is not a list)."""
        names = self.parameters.get("required")
        return tuple(n for n in names if isinstance(n, str)) if isinstance(names, list) else ()

    def to_openai(self) -> dict[str, Any]:
        """The tool as an OpenAI ``tools[]`` entry, its other fields as they came."""
        if not self.is_function:
            return {"type": self.type, **self.extra}
        function: dict[str, Any] = {"name": self.name}
        if self.description:
            function["description"] = self.description
        function["parameters"] = dict(self.parameters)
        return {"type": self.type, "function": {**function, **self.extra}}


@_quick_init
@dataclass(frozen=True, slots=True)
class ToolCall:
    """A call to a tool, as OpenAI returns it: ``arguments`` is JSON text."""

    id: str
    name: str
    arguments: str = "{}"
    type: str = "function"
    extra: Mapping[str, Any] = EMPTY

    @classmethod
    def from_arguments(cls, id: str, name: str, arguments: Mapping[str, Any]) -> ToolCall:
        return cls(id=id, name=name, arguments=json.dumps(arguments, ensure_ascii=False))

    def parsed_arguments(self) -> Any:
        """The arguments decoded from JSON; raises ``ValueError`` if they are not JSON."""
        return json.loads(self.arguments) if self.arguments.strip() else {}


@_quick_init
@dataclass(frozen=True, slots=True)
class Message:
    """One chat message. ``content`` is text, a tuple of content parts, or None."""

    role: str
    content: str | tuple[Mapping[str, Any], ...] | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    extra: Mapping[str, Any] = EMPTY

    @property
    def text(self) -> str:
        """The text of the message: content parts of type ``text`` joined by newlines."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(
            str(part.get("text", "")) for part in self.content if part.get("type") == "text"
        )

    def with_text(self, text: str) -> Message:
        """A copy whose text is ``text``; non-text content parts (images) are kept after it."""
        if isinstance(self.content, tuple):
            others = tuple(p for p in self.content if p.get("type") != "text")
            if others:
                return replace(self, content=({"type": "text", "text": text}, *others))
        return replace(self, content=text)


@_quick_init
@dataclass(frozen=True, slots=True)
class ToolChoice:
    """``tool_choice`` resolved once into a canonical form."""

    kind: Literal["auto", "none", "required", "function"] = "auto"
    name: str | None = None

    AUTO: ClassVar[ToolChoice]
    NONE: ClassVar[ToolChoice]
    REQUIRED: ClassVar[ToolChoice]

    @classmethod
    def function(cls, name: str) -> ToolChoice:
        return cls("function", name)

    def describe(self) -> str:
        return f"function {self.name!r}" if self.kind == "function" else repr(self.kind)


ToolChoice.AUTO = ToolChoice("auto")
ToolChoice.NONE = ToolChoice("none")
ToolChoice.REQUIRED = ToolChoice("required")


@_quick_init
@dataclass(frozen=True, slots=True)
class ChatRequest:
    """A chat-completions request. ``params`` holds every other field, passed through untouched.

    ``tool_choice`` is None when the caller did not send one (which means ``auto``).
    """

    model: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    stream: bool = False
    params: Mapping[str, Any] = EMPTY
    legacy_functions: bool = False
    """The caller used the legacy ``functions``/``function_call`` fields (upgraded to tools);
    answers go back in that shape."""
    _function_tools: tuple[ToolSpec, ...] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    @property
    def choice(self) -> ToolChoice:
        return self.tool_choice or ToolChoice.AUTO

    @property
    def allows_parallel(self) -> bool:
        """Several calls may be returned: not with ``parallel_tool_calls: false``, nor for a
        legacy ``functions`` request (its ``function_call`` answer holds one)."""
        return self.parallel_tool_calls is not False and not self.legacy_functions

    @property
    def function_tools(self) -> tuple[ToolSpec, ...]:
        """The tools of type ``function`` (read by every step of a turn: made once)."""
        found = self._function_tools
        if found is None:
            found = tuple(t for t in self.tools if t.is_function)
            object.__setattr__(self, "_function_tools", found)  # (a cache, as schema_text)
        return found

    @property
    def wants_tools(self) -> bool:
        """True when the request offers tools the model may call (tools given, choice not none)."""
        return bool(self.tools) and self.choice.kind != "none"

    @property
    def has_tool_history(self) -> bool:
        return any(m.role == "tool" or m.tool_calls for m in self.messages)

    def without_tools(self) -> ChatRequest:
        """The request with no tool fields (tools, ``tool_choice``, ``parallel_tool_calls``),
        as sent upstream where the tools are in the prompt or left out."""
        return replace(self, tools=(), tool_choice=None, parallel_tool_calls=None)


@_quick_init
@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    extra: Mapping[str, Any] = EMPTY

    def __add__(self, other: Usage | None) -> Usage:
        if other is None:
            return self
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.total_tokens + other.total_tokens,
            self.extra or other.extra,
        )


@_quick_init
@dataclass(frozen=True, slots=True)
class Metadata:
    """The ``toolshim`` object every response carries (DESIGN.md, "Metadata")."""

    mode: str
    emulated: bool = False
    dialect: str | None = None
    llm_calls: int = 0
    reasks: int = 0
    warnings: tuple[str, ...] = ()
    strategy: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "emulated": self.emulated,
            "dialect": self.dialect,
            "strategy": self.strategy,
            "llm_calls": self.llm_calls,
            "reasks": self.reasks,
            "warnings": list(self.warnings),
        }


@_quick_init
@dataclass(frozen=True, slots=True)
class Choice:
    index: int
    message: Message
    finish_reason: str | None = "stop"
    extra: Mapping[str, Any] = EMPTY
    stop_sequence: str | None = None
    """The stop sequence that ended the reply, where the upstream says which
    (llama-server's ``matched_stop``, vLLM's ``stop_reason``)."""


@_quick_init
@dataclass(frozen=True, slots=True)
class Completion:
    """A ``chat.completion``; ``meta`` becomes the top-level ``toolshim`` object."""

    id: str
    model: str
    created: int
    choices: tuple[Choice, ...]
    usage: Usage | None = None
    extra: Mapping[str, Any] = EMPTY
    meta: Metadata | None = None
    legacy: bool = False
    """Written in the legacy ``function_call`` shape (one call) by the chat-completions codec."""

    @property
    def message(self) -> Message:
        return self.choices[0].message

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        return self.choices[0].message.tool_calls if self.choices else ()

    @property
    def text(self) -> str:
        return self.choices[0].message.text if self.choices else ""

    @property
    def finish_reason(self) -> str | None:
        return self.choices[0].finish_reason if self.choices else None


@_quick_init
@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A fragment of a streamed tool call: id, type and name come first, then arguments."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str | None = None
    extra: Mapping[str, Any] = EMPTY
    """The delta's other fields (Gemini's ``extra_content`` with its ``thought_signature``)."""


@_quick_init
@dataclass(frozen=True, slots=True)
class StreamChunk:
    """One streamed event: a delta of one choice (``choice_index``) and what came with it.

    An upstream's event is read whole: its first choice in these fields, its other choices
    (``n`` > 1) in ``other_choices``, and every field toolshim does not read in the ``extra``
    of its level (the event's, the choice's, the delta's, a call delta's), so that an event
    relayed as it came is written back as it came.
    """

    content: str | None = None
    tool_calls: tuple[ToolCallDelta, ...] = ()
    role: str | None = None
    finish_reason: str | None = None
    usage: Usage | None = None
    meta: Metadata | None = None
    choice_index: int = 0
    legacy: bool = False
    """Written in the legacy ``delta.function_call`` shape (first call only)."""
    extra: Mapping[str, Any] = EMPTY
    """The delta's other fields (``reasoning_content``, ``reasoning_details`` …)."""
    stop_sequence: str | None = None
    """The stop sequence that ended the reply, where the upstream says which (on the chunk
    that finishes it)."""
    choice_extra: Mapping[str, Any] = EMPTY
    """The choice's other fields (``logprobs``, llama-server's ``matched_stop`` …), as in
    :attr:`Choice.extra`."""
    model: str | None = None
    """The model that wrote the event, where the upstream names it."""
    event_extra: Mapping[str, Any] = EMPTY
    """The event's other fields (its id and time, ``system_fingerprint`` …), as in
    :attr:`Completion.extra`."""
    other_choices: tuple[StreamChunk, ...] = ()
    """The event's other choices, each as a chunk of its choice's fields alone."""
    choiceless: bool = False
    """The event holds no choice (only usage, the model or its other fields): the choice fields
    here are empty and not written."""
