"""The chat's demo tools (current time, calculator, unit conversion) and ``module:function`` loading."""

from __future__ import annotations

import difflib
import importlib
import os
import sys
import zoneinfo
from collections.abc import Iterable
from datetime import datetime
from typing import Annotated, Any

from toolshim.agent.tools import Tool
from toolshim.chat.calculator import Number, evaluate
from toolshim.chat.units import format_conversion
from toolshim.errors import ConfigError

__all__ = [
    "builtin_tools",
    "calculate",
    "convert_units",
    "current_time",
    "load_tool",
    "load_tools",
]


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


def builtin_tools() -> list[Tool]:
    """The demo tools, as agent tools."""
    return [Tool(current_time), Tool(calculate), Tool(convert_units)]


def load_tool(path: str) -> Tool:
    """The function at ``module:function`` (looked up on sys.path and the current directory)."""
    module_name, colon, attribute = path.strip().partition(":")
    if not colon or not module_name.strip() or not attribute.strip():
        raise ConfigError(
            f"--tools {path!r} must be an import path 'module:function' (e.g. 'my_tools:get_weather')",
            param="tools",
        )
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        target: Any = importlib.import_module(module_name.strip())
    except ImportError as exc:
        raise ConfigError(
            f"--tools {path!r}: cannot import module {module_name!r} ({exc}); it is looked up on "
            "sys.path and in the current directory",
            param="tools",
        ) from exc
    except Exception as exc:  # the user's module failed while importing: report it in one line
        raise ConfigError(
            f"--tools {path!r}: importing {module_name!r} raised {type(exc).__name__}: {exc}",
            param="tools",
        ) from exc
    module = target
    for part in attribute.strip().split("."):
        if not hasattr(target, part):
            available = sorted(
                n for n, v in vars(module).items() if callable(v) and not n.startswith("_")
            )
            raise ConfigError(
                f"--tools {path!r}: module {module_name!r} has no {attribute!r}; its functions "
                f"are: {', '.join(available) or '(none)'}",
                param="tools",
            )
        target = getattr(target, part)
    if not callable(target):
        raise ConfigError(f"--tools {path!r} is not a function", param="tools")
    try:
        return Tool.from_function(target)
    except ConfigError as exc:
        raise ConfigError(f"--tools {path!r}: {exc.message}", param="tools") from exc


def load_tools(paths: Iterable[str], *, builtin: bool = True) -> list[Tool]:
    """The builtin tools (unless ``builtin`` is False) and the user's ``module:function`` tools.

    Several paths may share one option, separated by commas. A user tool with a builtin's name
    replaces the builtin.
    """
    chosen: dict[str, Tool] = {t.name: t for t in builtin_tools()} if builtin else {}
    for item in paths:
        for path in item.split(","):
            if path.strip():
                loaded = load_tool(path)
                chosen[loaded.name] = loaded
    return list(chosen.values())
