"""The built-in demo tools as plain functions: the current time, a calculator and unit
conversion. They sit below both the chat and the agent (each makes them tools); nothing here
imports either."""

from __future__ import annotations

import difflib
import zoneinfo
from datetime import datetime
from typing import Annotated

from toolshim.builtins.calculator import Number, evaluate
from toolshim.builtins.units import format_conversion

__all__ = ["BUILTIN_FUNCTIONS", "calculate", "convert_units", "current_time"]


def current_time(
    timezone: Annotated[
        str,
        "IANA time zone such as 'Europe/Paris' or 'America/New_York'; 'local' for this computer's",
    ] = "local",
) -> str:
    """Get the current date and time in a time zone."""
    name = timezone.strip() or "local"
    if name.lower() == "local":
        now = datetime.now().astimezone()
    elif name.upper() in ("UTC", "GMT", "Z"):
        now = datetime.now(zoneinfo.ZoneInfo("UTC"))
    else:
        try:
            now = datetime.now(zoneinfo.ZoneInfo(name))
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            close = difflib.get_close_matches(name, sorted(zoneinfo.available_timezones()), n=3)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise ValueError(
                f"unknown time zone {name!r}{hint} Use an IANA name like 'Europe/Paris'"
            ) from None
    offset = now.strftime("%z")
    return (
        f"{now:%A %Y-%m-%d %H:%M:%S} {now.tzname() or ''} "
        f"(UTC{offset[:3]}:{offset[3:]}, time zone {name})"
    ).replace("  ", " ")


def calculate(
    expression: Annotated[str, "Arithmetic such as '(17 + 3) * 2 ** 10 / 7' or 'sqrt(2)'"],
) -> Number:
    """Evaluate an arithmetic expression exactly; use it for any calculation.

    Supports + - * / // % ** and parentheses, the constants pi, e, tau and the functions sqrt,
    log, exp, sin, cos, tan, abs, round, floor, ceil, min, max and factorial.
    """
    return evaluate(expression)


def convert_units(
    value: Annotated[float, "The amount to convert"],
    from_unit: Annotated[str, "The unit of the amount, e.g. 'km', 'lb', '°F', 'gal'"],
    to_unit: Annotated[str, "The unit wanted, e.g. 'mi', 'kg', '°C', 'l'"],
) -> str:
    """Convert an amount from one unit to another.

    Units of length, mass, temperature, volume, time, speed, area and data size.
    """
    return format_conversion(value, from_unit, to_unit)


BUILTIN_FUNCTIONS = (current_time, calculate, convert_units)
"""The demo tools, in the order the chat lists them."""
