"""The demo tools (unit conversion, current time) and loading the user's module:function tools."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolshim.builtins import current_time
from toolshim.builtins.units import UNITS, convert, find_unit, format_conversion
from toolshim.chat.builtin import builtin_tools, load_tool, load_tools
from toolshim.errors import ConfigError


@pytest.mark.parametrize(
    ("value", "source", "target", "expected"),
    [
        (1, "mi", "km", 1.609344),
        (10, "kilometers", "miles", 6.2137119224),
        (12, "inches", "feet", 1.0),
        (1, "lb", "g", 453.59237),
        (16, "oz", "lbs", 1.0),
        (100, "°C", "°F", 212.0),
        (32, "fahrenheit", "celsius", 0.0),
        (0, "K", "C", -273.15),
        (-40, "F", "C", -40.0),
        (1, "gal", "l", 3.785411784),
        (2, "cups", "ml", 473.176473),
        (90, "min", "h", 1.5),
        (100, "km/h", "mph", 62.1371192237),
        (1, "ha", "m2", 10000.0),
        (1, "GiB", "MB", 1073.741824),
        (8, "bits", "B", 1.0),
        (3, "Degrees Celsius", "kelvin", 276.15),
    ],
)
def test_converts_known_units(value: float, source: str, target: str, expected: float) -> None:
    assert convert(value, source, target) == pytest.approx(expected, rel=1e-9, abs=1e-9)


UNIT_PAIRS = st.sampled_from(
    [(a, b) for symbols in UNITS.values() for a in symbols for b in symbols]
)


@given(st.floats(min_value=-1e6, max_value=1e6), UNIT_PAIRS)
def test_converting_there_and_back_returns_the_value(value: float, pair: tuple[str, str]) -> None:
    source, target = pair
    if find_unit(source).kind == "temperature":
        value = abs(value)  # stay above absolute zero in every scale
        if source == "°C":
            value -= 200
    there = convert(value, source, target)
    assert convert(there, target, source) == pytest.approx(value, rel=1e-9, abs=1e-6)


@pytest.mark.parametrize(
    ("source", "target", "message"),
    [
        ("km", "kg", "cannot convert length (km) to mass (kg)"),
        ("parsec", "km", "unknown unit 'parsec'"),
        ("kilometr", "m", "Did you mean 'kilometre', 'kilometer'?"),
    ],
)
def test_conversion_errors_name_the_problem(source: str, target: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        convert(1, source, target)


def test_below_absolute_zero_and_non_numbers_are_refused() -> None:
    with pytest.raises(ValueError, match="below absolute zero"):
        convert(-500, "°F", "°C")
    with pytest.raises(ValueError, match="finite number"):
        convert(float("nan"), "m", "km")


def test_format_conversion_uses_the_symbols() -> None:
    assert format_conversion(10, "kilometres", "miles") == "10 km = 6.213711922 mi"


def test_current_time_names_the_zone_and_offset() -> None:
    text = current_time("Asia/Tokyo")
    assert re.search(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} JST \(UTC\+09:00", text), text
    assert "UTC+00:00" in current_time("UTC")
    with pytest.raises(ValueError, match="did you mean 'Europe/Paris'"):
        current_time("Europe/Pariss")


def test_builtin_tools_have_schemas_for_the_model() -> None:
    tools = {t.name: t for t in builtin_tools()}
    assert set(tools) == {"current_time", "calculate", "convert_units"}
    assert tools["calculate"].parameters["required"] == ["expression"]
    assert tools["convert_units"].parameters["properties"]["value"]["type"] == "number"
    assert tools["current_time"].parameters["properties"]["timezone"]["default"] == "local"
    checked = tools["convert_units"].check({"value": 3, "from_unit": "km", "to_unit": "m"})
    assert checked.ok and checked.kwargs == {"value": 3.0, "from_unit": "km", "to_unit": "m"}


def test_user_tools_load_from_module_function(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "my_chat_tools.py").write_text(
        "def shout(text: str) -> str:\n"
        '    """Say it louder."""\n'
        "    return text.upper()\n\n"
        "def calculate(expression: str) -> str:\n"
        '    """My own calculator."""\n'
        "    return 'mine'\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    tools = load_tools(["my_chat_tools:shout,my_chat_tools:calculate"])
    names = [t.name for t in tools]
    assert names == ["current_time", "calculate", "convert_units", "shout"]
    assert tools[1].description == "My own calculator."  # replaced the builtin of that name
    assert [t.name for t in load_tools(["my_chat_tools:shout"], builtin=False)] == ["shout"]
    with pytest.raises(ConfigError, match="has no 'whisper'; its functions are: calculate, shout"):
        load_tool("my_chat_tools:whisper")


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("no_colon", "must be an import path 'module:function'"),
        ("no_such_module_xyz:f", "cannot import module 'no_such_module_xyz'"),
        ("math:pi", "is not a function"),
    ],
)
def test_bad_tool_paths_are_one_clear_error(path: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_tool(path)
    assert message in caught.value.message
