"""The core types are built by a quicker ``__init__`` than dataclass's own (toolshim.types's
``_quick_init``) and ``EMPTY`` is a ``dict`` no one can fill: neither may change what the
types do. Every dataclass of toolshim.types is compared with the one ``dataclass`` would have
built from the same definition."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import toolshim.types as core
from toolshim.types import EMPTY, ChatRequest, Message, StreamChunk, ToolCallDelta, ToolSpec

CLASSES = [
    value
    for value in vars(core).values()
    if isinstance(value, type)
    and dataclasses.is_dataclass(value)
    and value.__module__ == core.__name__
]


def _plain_twin(cls: type) -> type:
    """``cls`` rebuilt by ``dataclass`` alone (frozen, slots), with dataclass's own
    ``__init__``."""
    namespace = {
        name: value
        for name, value in vars(cls).items()
        if name not in cls.__slots__
        and (not name.startswith("__") or name in ("__doc__", "__module__", "__qualname__"))
    }  # (dataclass writes the other dunders again)
    for f in dataclasses.fields(cls):
        namespace[f.name] = dataclasses.field(
            default=f.default,
            default_factory=f.default_factory,
            init=f.init,
            repr=f.repr,
            compare=f.compare,
        )
    namespace["__annotations__"] = dict(cls.__annotations__)
    twin = type(cls.__name__, (), namespace)
    return dataclasses.dataclass(frozen=True, slots=True)(twin)


def test_every_core_dataclass_is_covered() -> None:
    names = {cls.__name__ for cls in CLASSES}
    assert {"StreamChunk", "ChatRequest", "ToolSpec", "Message", "Completion"} <= names
    for cls in CLASSES:
        assert "_set_" in " ".join(cls.__init__.__code__.co_names), cls  # the quick __init__


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_quick_init_takes_what_dataclass_would(cls: type) -> None:
    twin = _plain_twin(cls)
    ours, theirs = inspect.signature(cls), inspect.signature(twin)
    assert list(ours.parameters) == list(theirs.parameters)
    for name, parameter in ours.parameters.items():
        other = theirs.parameters[name]
        assert parameter.kind == other.kind
        assert (parameter.default is inspect.Parameter.empty) == (
            other.default is inspect.Parameter.empty
        )
        field = next(f for f in dataclasses.fields(cls) if f.name == name)
        if field.default is not dataclasses.MISSING:
            assert parameter.default is other.default is field.default


def test_defaults_and_factories_are_those_of_the_fields() -> None:
    spec = ToolSpec("lookup")
    assert spec.parameters == {"type": "object", "properties": {}}
    assert ToolSpec("other").parameters is not spec.parameters  # a factory: one each
    given_schema = {"type": "object"}
    assert ToolSpec("x", parameters=given_schema).parameters is given_schema
    chunk = StreamChunk()
    for f in dataclasses.fields(StreamChunk):
        assert getattr(chunk, f.name) == f.default
    request = ChatRequest(model="m", messages=(Message("user", "hi"),))
    assert request.function_tools == ()  # the cached field (init=False) starts unset, read lazily


def test_quick_init_keeps_positional_order_and_refuses_unknown() -> None:
    delta = ToolCallDelta(0, "call_1", "lookup", "{}")
    assert (delta.index, delta.id, delta.name, delta.arguments) == (0, "call_1", "lookup", "{}")
    with pytest.raises(TypeError):
        StreamChunk(contents="typo")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        ToolCallDelta()  # type: ignore[call-arg]


def test_instances_stay_frozen_hashable_and_equal_by_value() -> None:
    chunk = StreamChunk(content="hi", choice_index=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        chunk.content = "changed"  # type: ignore[misc]
    assert chunk == StreamChunk(content="hi", choice_index=1)
    assert hash(chunk) == hash(StreamChunk(content="hi", choice_index=1))
    assert dataclasses.replace(chunk, content="other").content == "other"
    assert pickle.loads(pickle.dumps(chunk)) == chunk
    assert copy.deepcopy(chunk) == chunk


@given(
    content=st.none() | st.text(max_size=5),
    index=st.integers(0, 3),
    finish=st.none() | st.sampled_from(["stop", "tool_calls"]),
    role=st.none() | st.just("assistant"),
)
def test_quick_init_builds_what_dataclass_builds(
    content: str | None, index: int, finish: str | None, role: str | None
) -> None:
    twin = _plain_twin(StreamChunk)
    kwargs: dict[str, Any] = {
        "content": content,
        "choice_index": index,
        "finish_reason": finish,
        "role": role,
    }
    ours, theirs = StreamChunk(**kwargs), twin(**kwargs)
    assert dataclasses.astuple(ours) == dataclasses.astuple(theirs)


def test_empty_reads_as_an_empty_dict_and_cannot_be_filled() -> None:
    assert not EMPTY and len(EMPTY) == 0 and dict(EMPTY) == {} and EMPTY == {}
    assert EMPTY.get("a", 1) == 1 and "a" not in EMPTY and list(EMPTY) == []
    assert {**EMPTY, "a": 1} == {"a": 1} and (EMPTY | {"a": 1}) == {"a": 1}
    assert hash(EMPTY) == hash(core.EMPTY)
    assert repr(EMPTY) == "{}"
    filled: Any = EMPTY
    for fill in (
        lambda: filled.__setitem__("a", 1),
        lambda: filled.update(a=1),
        lambda: filled.setdefault("a", 1),
        lambda: filled.pop("a"),
        lambda: filled.popitem(),
        lambda: filled.clear(),
        lambda: filled.__delitem__("a"),
    ):
        with pytest.raises(TypeError, match="immutable"):
            fill()
    with pytest.raises(TypeError):
        filled |= {"a": 1}
    assert EMPTY == {}
    assert StreamChunk().extra is EMPTY
