"""Shared pieces for the agent tests: two plain tools, and scripting a model natively or as text."""

from __future__ import annotations

import json
from typing import Any, Literal

import pytest

from toolshim.testing import FakeUpstream, Reply, call

Kind = Literal["native", "emulated"]

WEATHER = {"paris": 18.0, "london": 14.0}


def get_weather(city: str, units: Literal["celsius", "fahrenheit"] = "celsius") -> str:
    """Get the current temperature in a city.

    Args:
        city: The city name.
        units: The unit of the answer.
    """
    key = city.strip().lower()
    if key not in WEATHER:
        raise ValueError(f"no weather station for {city!r}")
    celsius = WEATHER[key]
    value = celsius if units == "celsius" else round(celsius * 9 / 5 + 32, 1)
    return f"{value} degrees {units} in {city}"


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def calls_reply(kind: Kind, *calls: tuple[str, dict[str, Any]], text: str = "") -> Any:
    """A model reply making ``calls``: native tool calls, or the json dialect's text."""
    if kind == "native":
        return Reply(text or None, tool_calls=[call(name, args) for name, args in calls])
    payload = json.dumps({"tool_calls": [{"name": n, "arguments": a} for n, a in calls]})
    return f"{text}\n{payload}" if text else payload


def new_call_after_results(kind: Kind, reply: Any) -> list[Any]:
    """The replies of a model that makes a new call after results: emulated, its answer is
    asked for first without tools (toolshim.engine.answer_first), it writes the call there,
    and again once the tools are offered for it."""
    return [reply, reply] if kind == "emulated" else [reply]


def fake_for(kind: Kind, *replies: Any) -> FakeUpstream:
    """A model with tool support (native) or one that rejects ``tools`` (the engine emulates)."""
    return FakeUpstream(list(replies), tools="native" if kind == "native" else "reject")


@pytest.fixture(params=["native", "emulated"])
def kind(request: pytest.FixtureRequest) -> Kind:
    value: Kind = request.param
    return value
