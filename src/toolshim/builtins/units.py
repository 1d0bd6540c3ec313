"""Unit conversion for the demo tool: length, mass, temperature, volume, time, speed, area, data.

Each unit is a factor to its kind's base unit (temperatures are converted through kelvin).
Names are matched without case, spaces or a trailing plural ``s``, so ``"Miles"``, ``"mi"``
and ``"mile"`` are the same unit. US customary volumes are used (``gal`` is the US gallon).
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass

__all__ = ["UNITS", "Unit", "convert", "find_unit", "format_conversion"]


@dataclass(frozen=True, slots=True)
class Unit:
    """One unit: its symbol, its kind and how many base units it is."""

    symbol: str
    kind: str
    factor: float = 1.0
    offset: float = 0.0
    """For temperatures: base = value * factor + offset (kelvin)."""


def _units(
    kind: str, table: dict[str, tuple[float, tuple[str, ...]]]
) -> list[tuple[Unit, tuple[str, ...]]]:
    return [(Unit(symbol, kind, factor), aliases) for symbol, (factor, aliases) in table.items()]


_TABLE: list[tuple[Unit, tuple[str, ...]]] = [
    *_units(
        "length",
        {
            "m": (1.0, ("meter", "metre")),
            "km": (1000.0, ("kilometer", "kilometre")),
            "cm": (0.01, ("centimeter", "centimetre")),
            "mm": (0.001, ("millimeter", "millimetre")),
            "µm": (1e-6, ("um", "micrometer", "micrometre", "micron")),
            "nm": (1e-9, ("nanometer", "nanometre")),
            "mi": (1609.344, ("mile",)),
            "yd": (0.9144, ("yard",)),
            "ft": (0.3048, ("foot", "feet")),
            "in": (0.0254, ("inch", "inches")),
            "nmi": (1852.0, ("nautical mile",)),
        },
    ),
    *_units(
        "mass",
        {
            "kg": (1.0, ("kilogram", "kilo")),
            "g": (0.001, ("gram", "gramme")),
            "mg": (1e-6, ("milligram",)),
            "µg": (1e-9, ("ug", "microgram")),
            "t": (1000.0, ("tonne", "metric ton")),
            "lb": (0.45359237, ("lbs", "pound")),
            "oz": (0.028349523125, ("ounce",)),
            "st": (6.35029318, ("stone",)),
        },
    ),
    (Unit("°C", "temperature", 1.0, 273.15), ("c", "celsius", "degc", "centigrade")),
    (Unit("°F", "temperature", 5 / 9, 273.15 - 32 * 5 / 9), ("f", "fahrenheit", "degf")),
    (Unit("K", "temperature", 1.0, 0.0), ("k", "kelvin")),
    *_units(
        "volume",
        {
            "l": (1.0, ("liter", "litre")),
            "ml": (0.001, ("milliliter", "millilitre")),
            "cl": (0.01, ("centiliter", "centilitre")),
            "dl": (0.1, ("deciliter", "decilitre")),
            "m³": (1000.0, ("m3", "cubic meter", "cubic metre")),
            "cm³": (0.001, ("cm3", "cc", "cubic centimeter")),
            "gal": (3.785411784, ("gallon", "us gallon")),
            "qt": (0.946352946, ("quart",)),
            "pt": (0.473176473, ("pint",)),
            "cup": (0.2365882365, ()),
            "fl oz": (0.0295735295625, ("floz", "fluid ounce")),
            "tbsp": (0.01478676478125, ("tablespoon",)),
            "tsp": (0.00492892159375, ("teaspoon",)),
        },
    ),
    *_units(
        "time",
        {
            "s": (1.0, ("sec", "second")),
            "ms": (0.001, ("millisecond",)),
            "min": (60.0, ("minute",)),
            "h": (3600.0, ("hr", "hour")),
            "d": (86400.0, ("day",)),
            "wk": (604800.0, ("week",)),
            "yr": (31557600.0, ("year",)),
        },
    ),
    *_units(
        "speed",
        {
            "m/s": (1.0, ("meters per second", "metres per second", "mps")),
            "km/h": (1 / 3.6, ("kph", "kmh", "kilometers per hour", "kilometres per hour")),
            "mph": (0.44704, ("mi/h", "miles per hour")),
            "kn": (1852 / 3600, ("knot", "kt")),
            "ft/s": (0.3048, ("fps", "feet per second")),
        },
    ),
    *_units(
        "area",
        {
            "m²": (1.0, ("m2", "sq m", "square meter", "square metre")),
            "km²": (1e6, ("km2", "sq km", "square kilometer", "square kilometre")),
            "cm²": (1e-4, ("cm2", "sq cm", "square centimeter", "square centimetre")),
            "ha": (1e4, ("hectare",)),
            "acre": (4046.8564224, ("ac",)),
            "ft²": (0.09290304, ("ft2", "sq ft", "square foot", "square feet")),
            "mi²": (2589988.110336, ("mi2", "sq mi", "square mile")),
        },
    ),
    *_units(
        "data",
        {
            "B": (1.0, ("byte",)),
            "bit": (0.125, ()),
            "kB": (1e3, ("kb", "kilobyte")),
            "MB": (1e6, ("megabyte",)),
            "GB": (1e9, ("gigabyte",)),
            "TB": (1e12, ("terabyte",)),
            "KiB": (1024.0, ("kibibyte",)),
            "MiB": (1024.0**2, ("mebibyte",)),
            "GiB": (1024.0**3, ("gibibyte",)),
            "TiB": (1024.0**4, ("tebibyte",)),
        },
    ),
]


def _key(name: str) -> str:
    text = name.strip().lower().replace("°", "").replace("degrees ", "").replace("degree ", "")
    return " ".join(text.replace("²", "2").replace("³", "3").split())


def _index() -> dict[str, Unit]:
    index: dict[str, Unit] = {}
    for unit, aliases in _TABLE:
        for name in (unit.symbol, *aliases):
            index.setdefault(_key(name), unit)
    return index


_BY_NAME = _index()
UNITS: dict[str, list[str]] = {}
"""The unit symbols of each kind, for messages and ``/tools``."""
for _unit, _ in _TABLE:
    UNITS.setdefault(_unit.kind, []).append(_unit.symbol)


def find_unit(name: str) -> Unit:
    """The unit ``name`` means; ValueError naming close matches and the known units."""
    key = _key(name)
    unit = _BY_NAME.get(key)
    if unit is None and key.endswith("s") and len(key) > 2:
        unit = _BY_NAME.get(key[:-1])
    if unit is not None:
        return unit
    close = difflib.get_close_matches(key, list(_BY_NAME), n=3, cutoff=0.75)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    known = "; ".join(f"{kind}: {', '.join(symbols)}" for kind, symbols in UNITS.items())
    raise ValueError(f"unknown unit {name!r}.{hint} Known units — {known}")


def convert(value: float, from_unit: str, to_unit: str) -> float:
    """``value`` in ``from_unit`` expressed in ``to_unit`` (units of the same kind)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"the value to convert must be a finite number, not {value!r}")
    source, target = find_unit(from_unit), find_unit(to_unit)
    if source.kind != target.kind:
        raise ValueError(
            f"cannot convert {source.kind} ({source.symbol}) to {target.kind} ({target.symbol}); "
            f"{target.kind} units are {', '.join(UNITS[target.kind])}"
        )
    base = value * source.factor + source.offset
    if source.kind == "temperature" and base < -1e-9:
        raise ValueError(f"{value:g} {source.symbol} is below absolute zero")
    return (base - target.offset) / target.factor


def format_conversion(value: float, from_unit: str, to_unit: str) -> str:
    """``"10 km = 6.21371192 mi"``: the conversion as one line of text."""
    result = convert(value, from_unit, to_unit)
    source, target = find_unit(from_unit), find_unit(to_unit)
    return f"{value:g} {source.symbol} = {result:.10g} {target.symbol}"
