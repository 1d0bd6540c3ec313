"""Tools from functions: schemas from signatures and docstrings, validation and conversion."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import enum
import json
from typing import Annotated, Any, Literal, Optional

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, Field
from typing_extensions import TypedDict  # pydantic needs this one on Python < 3.12

from toolshim.agent import Tool, tool
from toolshim.errors import ConfigError


class Unit(enum.Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


class Address(BaseModel):
    street: str = Field(description="Street and number")
    city: str
    zip: str | None = None


@dataclasses.dataclass
class Window:
    start: dt.date
    days: int = 1


class Filters(TypedDict):
    tag: str
    limit: int


class TreeNode(BaseModel):
    label: str
    children: list[TreeNode] = []


def google_style(city: str, days: int = 3, units: Unit = Unit.CELSIUS) -> str:
    """Forecast the weather.

    Looks the city up in the forecast service.

    Args:
        city (str): The city to forecast,
            written in English.
        days: How many days ahead.
        units: The temperature unit.

    Returns:
        str: the forecast.
    """
    return f"{city}:{days}:{units.value}"


def numpy_style(query: str, limit: int | None = None) -> list[str]:
    """Search the notes.

    Parameters
    ----------
    query : str
        Words to look for.
    limit : int, optional
        Most results to return.

    Returns
    -------
    list of str
    """
    return [query] * (limit or 1)


def rest_style(path: str, recursive: bool = False) -> int:
    """Count the files under a directory.

    :param path: The directory to count in.
    :param bool recursive: Whether to descend into subdirectories.
    :returns: the number of files.
    """
    return len(path) + int(recursive)


def schema_of(fn: Any) -> dict[str, Any]:
    return Tool.from_function(fn).parameters


def test_google_docstring_gives_description_and_parameter_texts() -> None:
    t = Tool.from_function(google_style)
    assert t.name == "google_style"
    assert t.description == "Forecast the weather.\n\nLooks the city up in the forecast service."
    props = t.parameters["properties"]
    assert props["city"] == {
        "type": "string",
        "description": "The city to forecast,\nwritten in English.",
    }
    assert props["days"] == {"type": "integer", "default": 3, "description": "How many days ahead."}
    assert props["units"]["enum"] == ["celsius", "fahrenheit"]
    assert props["units"]["default"] == "celsius"
    assert props["units"]["description"] == "The temperature unit."
    assert t.parameters["required"] == ["city"]
    assert "$defs" not in t.parameters and "title" not in json.dumps(t.parameters)


def test_numpy_docstring() -> None:
    t = Tool.from_function(numpy_style)
    assert t.description == "Search the notes."
    props = t.parameters["properties"]
    assert props["query"]["description"] == "Words to look for."
    assert props["limit"] == {
        "type": ["integer", "null"],
        "default": None,
        "description": "Most results to return.",
    }
    assert t.parameters["required"] == ["query"]


def test_rest_docstring() -> None:
    t = Tool.from_function(rest_style)
    assert t.description == "Count the files under a directory."
    props = t.parameters["properties"]
    assert props["path"]["description"] == "The directory to count in."
    assert props["recursive"] == {
        "type": "boolean",
        "default": False,
        "description": "Whether to descend into subdirectories.",
    }


def test_annotated_and_field_descriptions_win_over_the_docstring() -> None:
    def f(
        a: Annotated[str, "from Annotated"],
        b: Annotated[int, Field(ge=0, description="from Field")] = 1,
        c: float = 0.5,
    ) -> None:
        """Do f.

        Args:
            a: from the docstring
            c: from the docstring too
        """

    props = schema_of(f)["properties"]
    assert props["a"]["description"] == "from Annotated"
    assert props["b"] == {
        "type": "integer",
        "minimum": 0,
        "default": 1,
        "description": "from Field",
    }
    assert props["c"] == {"type": "number", "default": 0.5, "description": "from the docstring too"}


def test_container_literal_model_dataclass_and_typeddict_types() -> None:
    def f(
        tags: list[str],
        weights: dict[str, float],
        mode: Literal["fast", "slow"],
        address: Address,
        window: Window,
        filters: Filters,
        maybe: Optional[int] = None,  # noqa: UP045 - Optional must work too
        pair: tuple[int, str] = (1, "a"),
    ) -> None:
        """F."""

    schema = schema_of(f)
    props = schema["properties"]
    assert props["tags"] == {"type": "array", "items": {"type": "string"}}
    assert props["weights"] == {"type": "object", "additionalProperties": {"type": "number"}}
    assert props["mode"] == {"type": "string", "enum": ["fast", "slow"]}
    assert props["address"]["properties"]["street"]["description"] == "Street and number"
    assert props["address"]["required"] == ["street", "city"]
    assert props["window"]["properties"]["start"] == {"type": "string", "format": "date"}
    assert props["filters"]["required"] == ["tag", "limit"]
    assert props["maybe"]["type"] == ["integer", "null"]
    assert schema["required"] == ["tags", "weights", "mode", "address", "window", "filters"]
    jsonschema.Draft202012Validator.check_schema(schema)


def test_recursive_models_keep_their_definitions() -> None:
    def f(tree: TreeNode) -> int:
        """Count nodes."""
        return 1

    schema = schema_of(f)
    assert "TreeNode" in schema["$defs"]
    validator = jsonschema.Draft202012Validator(schema)
    validator.validate({"tree": {"label": "a", "children": [{"label": "b"}]}})
    with pytest.raises(jsonschema.ValidationError):
        validator.validate({"tree": {"label": "a", "children": [{"nolabel": 1}]}})


def test_a_property_called_title_is_kept() -> None:
    def f(title: str, default: dict[str, str] | None = None) -> None:
        """F."""

    props = schema_of(f)["properties"]
    assert props["title"] == {"type": "string"}


def test_parameter_names_that_shadow_pydantic_attributes_work() -> None:
    def f(json: str, schema: int, model_config: bool = False) -> str:
        """F."""
        return f"{json}{schema}{model_config}"

    t = Tool.from_function(f)
    assert list(t.parameters["properties"]) == ["json", "schema", "model_config"]
    checked = t.check({"json": "x", "schema": 2})
    assert checked.ok and dict(checked.kwargs or {}) == {
        "json": "x",
        "schema": 2,
        "model_config": False,
    }


def test_a_default_without_a_json_form_is_left_out_quietly() -> None:
    marker = object()

    def f(a: Any = marker) -> None:
        """F."""

    assert schema_of(f)["properties"]["a"] == {}


def test_what_json_cannot_say_is_converted_before_the_call() -> None:
    seen: list[tuple[Any, ...]] = []

    def book(when: dt.date, guests: int, unit: Unit, address: Address, flags: list[bool]) -> str:
        """Book."""
        seen.append((when, guests, unit, address, flags))
        return "booked"

    t = Tool.from_function(book)
    checked = t.check(
        json.dumps(
            {
                "when": "2026-05-01",
                "guests": 4,
                "unit": "fahrenheit",
                "address": {"street": "1 Main St", "city": "Oslo"},
                "flags": [True, False],
            }
        )
    )
    assert checked.ok, checked.problem
    assert asyncio.run(t.invoke(checked)) == "booked"
    when, guests, unit, address, flags = seen[0]
    assert when == dt.date(2026, 5, 1)
    assert guests == 4
    assert unit is Unit.FAHRENHEIT
    assert isinstance(address, Address) and address.city == "Oslo"
    assert flags == [True, False]


def test_invalid_arguments_are_explained_and_the_function_is_never_called() -> None:
    calls: list[Any] = []

    def forecast(city: str, days: int = 3, units: Literal["c", "f"] = "c") -> str:
        """Forecast."""
        calls.append(city)
        return "x"

    t = Tool.from_function(forecast)
    checked = t.check({"location": "Paris", "days": "three", "units": "k"})
    assert not checked.ok
    problem = checked.problem or ""
    assert "the arguments of 'forecast' are invalid" in problem
    assert "city: required, but missing" in problem
    assert "days: Input should be a valid integer" in problem and '(got "three")' in problem
    assert "units: Input should be 'c' or 'f' (got \"k\")" in problem
    assert "Unknown argument(s) 'location'; the parameters are 'city', 'days', 'units'" in problem
    assert '"required": ["city"]' in problem  # the schema, so the model can fix its call
    with pytest.raises(ConfigError):
        asyncio.run(t.invoke(checked))
    assert calls == []


def test_arguments_that_are_not_json_or_not_an_object() -> None:
    t = Tool.from_function(rest_style)
    bad_json = t.check('{"path": "/tmp",')
    assert not bad_json.ok and "not valid JSON" in (bad_json.problem or "")
    not_object = t.check([1, 2])
    assert not not_object.ok and "must be a JSON object, not list" in (not_object.problem or "")
    assert t.check("").problem is not None  # path is required
    assert t.check(None).problem is not None


def test_normalized_arguments_match_despite_order_and_defaults() -> None:
    t = Tool.from_function(google_style)
    a = t.check({"city": "Paris"})
    b = t.check({"units": "celsius", "days": 3, "city": "Paris"})
    c = t.check({"city": "Paris", "days": 4})
    assert a.normalized == b.normalized
    assert a.normalized != c.normalized


def test_positional_only_parameters_are_passed_positionally() -> None:
    def power(base: float, exponent: int = 2, /) -> float:
        """Power."""
        return base**exponent

    t = Tool.from_function(power)
    checked = t.check({"base": 3, "exponent": 3})
    assert checked.args == (3.0, 3) and checked.kwargs == {}
    assert asyncio.run(t.invoke(checked)) == 27.0


def test_decorator_with_and_without_options_keeps_the_function_callable() -> None:
    @tool
    def plain(x: int) -> int:
        """Double x."""
        return x * 2

    @tool(name="renamed-tool", description="Custom text.")
    async def fancy(x: int) -> int:
        return x + 1

    assert isinstance(plain, Tool) and plain(4) == 8
    assert plain.to_openai() == {
        "type": "function",
        "function": {
            "name": "plain",
            "description": "Double x.",
            "parameters": {
                "type": "object",
                "properties": {"x": {"type": "integer"}},
                "required": ["x"],
            },
        },
    }
    assert fancy.name == "renamed-tool" and fancy.description == "Custom text."
    assert fancy.is_async and not plain.is_async
    assert asyncio.run(fancy(1)) == 2
    assert Tool.from_function(plain) is plain
    assert Tool.from_function(plain, name="other").name == "other"


def test_sync_tools_run_in_a_worker_thread_and_async_ones_on_the_loop() -> None:
    import threading

    def where() -> str:
        """Thread name."""
        return threading.current_thread().name

    async def where_async() -> str:
        """Thread name."""
        return threading.current_thread().name

    async def main() -> tuple[str, str, str]:
        sync_tool, async_tool = Tool.from_function(where), Tool.from_function(where_async)
        here = threading.current_thread().name
        return (
            here,
            await sync_tool.invoke(sync_tool.check({})),
            await async_tool.invoke(async_tool.check({})),
        )

    here, in_sync, in_async = asyncio.run(main())
    assert in_sync != here
    assert in_async == here


def test_callable_objects_with_async_call_are_async() -> None:
    class Lookup:
        """Look things up."""

        async def __call__(self, key: str) -> str:
            return key.upper()

    t = Tool(Lookup(), name="lookup")
    assert t.is_async
    assert asyncio.run(t.invoke(t.check({"key": "a"}))) == "A"


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (lambda x: x, "cannot use '<lambda>' as a tool name"),
        (print, "cannot"),
    ],
)
def test_unusable_functions_raise_config_errors(fn: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Tool.from_function(fn)


def test_star_args_are_rejected_with_the_parameter_named() -> None:
    def f(*items: int) -> None:
        """F."""

    with pytest.raises(ConfigError, match=r"'\*items': \*args and \*\*kwargs cannot be described"):
        Tool.from_function(f)


class Opaque:
    pass


def test_types_without_a_schema_are_rejected_clearly() -> None:
    def f(thing: Opaque) -> None:
        """F."""

    with pytest.raises(ConfigError, match="parameter type without a JSON Schema"):
        Tool.from_function(f)


def test_unresolvable_hints_name_the_tool() -> None:
    def f(thing: Missing) -> None:  # type: ignore[name-defined]  # noqa: F821
        """F."""

    with pytest.raises(ConfigError, match="cannot resolve the type hints of tool 'f'"):
        Tool.from_function(f)


def test_not_a_function() -> None:
    with pytest.raises(ConfigError, match="a tool must be a function, not int"):
        Tool.from_function(3)  # type: ignore[arg-type]


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(arguments=st.dictionaries(st.sampled_from(["city", "days", "units", "x"]), _json_values))
def test_check_never_raises_and_valid_means_schema_valid(arguments: dict[str, Any]) -> None:
    t = Tool.from_function(google_style)
    checked = t.check(arguments)
    if checked.ok:
        assert checked.kwargs is not None and isinstance(checked.kwargs["city"], str)
        assert isinstance(checked.kwargs["days"], int)
        assert isinstance(checked.kwargs["units"], Unit)
    else:
        assert checked.problem and checked.problem.startswith("the arguments of 'google_style'")


@given(city=st.text(min_size=1, max_size=20), days=st.integers(-1000, 1000))
def test_valid_arguments_round_trip(city: str, days: int) -> None:
    t = Tool.from_function(google_style)
    checked = t.check(json.dumps({"city": city, "days": days}))
    assert checked.ok
    assert asyncio.run(t.invoke(checked)) == f"{city}:{days}:celsius"
    jsonschema.validate({"city": city, "days": days}, t.parameters)
