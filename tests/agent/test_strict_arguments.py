"""The agent validates a model's arguments strictly against the tool: no loose coercion, no
silently dropped argument; a mismatch goes back to the model as the call's error result."""

from __future__ import annotations

import datetime as dt
import enum
from typing import Any

import pytest

from toolshim.agent import Agent, Tool
from toolshim.testing import FakeUpstream, Reply, call


class Unit(enum.Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


def book(guests: int, vip: bool = False, price: float = 0.0, when: dt.date | None = None) -> str:
    """Book a table."""
    return f"{guests}:{vip}:{price}:{when}"


def forecast(city: str, unit: Unit = Unit.CELSIUS, days: tuple[int, int] = (1, 3)) -> str:
    """Forecast."""
    return f"{city}:{unit.value}:{days}"


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"guests": True}, "guests: Input should be a valid integer (got true)"),
        ({"guests": "7"}, 'guests: Input should be a valid integer (got "7")'),
        ({"guests": 7.5}, "guests: Input should be a valid integer"),
        ({"guests": 2, "vip": "true"}, 'vip: Input should be a valid boolean (got "true")'),
        ({"guests": 2, "vip": 1}, "vip: Input should be a valid boolean (got 1)"),
        ({"guests": 2, "price": "9.5"}, 'price: Input should be a valid number (got "9.5")'),
        ({"guests": 2, "when": "tomorrow"}, "when: "),
    ],
)
def test_a_value_of_the_wrong_json_type_is_refused_naming_the_parameter(
    arguments: dict[str, Any], expected: str
) -> None:
    checked = Tool.from_function(book).check(arguments)
    assert not checked.ok
    assert checked.problem is not None and expected in checked.problem
    assert checked.problem.startswith("the arguments of 'book' are invalid: ")


def test_an_unknown_argument_is_refused_even_when_the_rest_is_valid() -> None:
    checked = Tool.from_function(book).check({"guests": 2, "table": "window"})
    assert not checked.ok
    assert checked.problem is not None and checked.problem.startswith(
        "the arguments of 'book' are invalid: Unknown argument(s) 'table'; the parameters are "
        "'guests', 'vip', 'price', 'when'"
    )


def test_what_json_cannot_say_is_still_converted() -> None:
    t = Tool.from_function(book)
    checked = t.check('{"guests": 2, "vip": true, "price": 7, "when": "2026-05-01"}')
    assert checked.ok, checked.problem
    assert checked.kwargs == {"guests": 2, "vip": True, "price": 7.0, "when": dt.date(2026, 5, 1)}
    assert isinstance(checked.kwargs["price"], float)  # a JSON number into a float parameter
    checked = Tool.from_function(forecast).check(
        {"city": "Oslo", "unit": "fahrenheit", "days": [2, 4]}
    )
    assert checked.ok, checked.problem
    assert checked.kwargs == {"city": "Oslo", "unit": Unit.FAHRENHEIT, "days": (2, 4)}


async def test_a_mismatch_goes_back_to_the_model_and_the_loop_continues() -> None:
    seen: list[Any] = []

    def add(a: int, b: int) -> int:
        """Add two integers."""
        seen.append((a, b))
        return a + b

    fake = FakeUpstream(
        [
            Reply(tool_calls=[call("add", {"a": True, "b": "7"})]),
            Reply(tool_calls=[call("add", {"a": 1, "b": 7, "c": 0})]),
            Reply(tool_calls=[call("add", {"a": 1, "b": 7})]),
            "1 + 7 = 8",
        ]
    )
    result = await Agent([add], upstream=fake, model="m", mode="off").arun("1 + 7?")
    first, second, third = result.tool_runs
    assert first.status == "invalid_arguments" and first.error_type == "ValidationError"
    assert "a: Input should be a valid integer (got true)" in first.result
    assert 'b: Input should be a valid integer (got "7")' in first.result
    assert first.result.endswith("Call 'add' again with corrected arguments.")
    assert second.status == "invalid_arguments"
    assert "Unknown argument(s) 'c'; the parameters are 'a', 'b'" in second.result
    assert third.status == "ok" and third.value == 8
    assert seen == [(1, 7)]  # the function only ever ran with exactly what it asked for
    assert result.output == "1 + 7 = 8"
    # The model read each refusal as the result of its call.
    sent = fake.history[1]["messages"][-1]
    assert sent["role"] == "tool" and sent["content"] == first.result
