"""The tool the tests ask about (``get_weather(city)``), in each protocol's shape, and the
emulated call to it that a scripted model writes."""

from __future__ import annotations

from typing import Any

__all__ = [
    "CALL_JSON",
    "WEATHER",
    "WEATHER_ANTHROPIC",
    "WEATHER_FUNCTION",
    "WEATHER_RESPONSES",
    "function_tool",
    "weather_parameters",
]


def function_tool(name: str, description: str = "", **parameters: str) -> dict[str, Any]:
    """A chat completions ``tools`` entry whose parameters, each required, have the JSON types
    given (``function_tool("find_user", username="string")``), in that order."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description or name,
            "parameters": {
                "type": "object",
                "properties": {key: {"type": kind} for key, kind in parameters.items()},
                "required": list(parameters),
            },
        },
    }


def weather_parameters() -> dict[str, Any]:
    """``get_weather``'s JSON Schema (a new dict each call)."""
    return {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


WEATHER_FUNCTION: dict[str, Any] = {
    "name": "get_weather",
    "description": "Current weather for a city",
    "parameters": weather_parameters(),
}
"""The function itself (chat completions' legacy ``functions`` entry)."""

WEATHER: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": weather_parameters(),
    },
}
"""As a chat completions ``tools`` entry."""

WEATHER_RESPONSES: dict[str, Any] = {
    "type": "function",
    "name": "get_weather",
    "description": "Current weather for a city",
    "parameters": weather_parameters(),
    "strict": False,
}
"""As a Responses API ``tools`` entry."""

WEATHER_ANTHROPIC: dict[str, Any] = {
    "name": "get_weather",
    "description": "Current weather for a city",
    "input_schema": weather_parameters(),
}
"""As an Anthropic Messages ``tools`` entry."""

CALL_JSON = '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}'
"""An emulated call to ``get_weather`` for Paris, as the json dialect writes it."""
