"""Two plain Python functions used as tools by the examples (no network: a fixed weather table)."""

from __future__ import annotations

from typing import Literal

# Fixed observations, so the examples give the same answer every time.
_WEATHER = {
    "paris": (18.0, "sunny"),
    "london": (14.0, "light rain"),
    "tokyo": (24.0, "cloudy"),
    "new york": (21.0, "clear"),
    "sydney": (11.0, "windy"),
}


def get_weather(city: str) -> dict[str, object]:
    """Get the current weather in a city.

    Args:
        city: The city name, e.g. "Paris".

    Returns:
        The temperature in degrees Celsius and the sky conditions.
    """
    key = city.strip().lower()
    if key not in _WEATHER:
        known = ", ".join(name.title() for name in _WEATHER)
        raise ValueError(f"no weather station for {city!r}; known cities: {known}")
    celsius, sky = _WEATHER[key]
    return {"city": city.strip().title(), "celsius": celsius, "conditions": sky}


def convert_temperature(value: float, to: Literal["fahrenheit", "kelvin"]) -> float:
    """Convert a temperature given in degrees Celsius.

    Args:
        value: The temperature in degrees Celsius.
        to: The unit to convert to.
    """
    if to == "fahrenheit":
        return round(value * 9 / 5 + 32, 1)
    return round(value + 273.15, 2)
