"""Replies a small model writes when it loops until ``max_tokens`` (and some worse texts): what
the tests and the benchmark of the parser's cost feed it."""

from __future__ import annotations

from toolshim.types import ToolSpec

__all__ = ["LOOPING_REPLIES", "LOOPING_TOOLS", "looping_reply"]

LOOPING_REPLIES: dict[str, tuple[str, str]] = {
    "pythonic list never closed": ('[get_weather(city="Paris"), ', "pythonic"),
    "json call list never closed": (
        '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}, ',
        "json",
    ),
    "json objects never closed": (
        '{"name": "get_weather", "arguments": {"city": "Paris", ',
        "json",
    ),
    "'{tool ' repeated": ("{tool ", "json"),
    "ever deeper arguments": ('{"city": {"name": ', "json"),
    "apostrophes in braces": ("{'name': it's ", "json"),
    "'get_weather(' lines": ("get_weather(\n", "json"),
    "brackets only": ("[", "json"),
    "escaped json in a string": ('{"name": "get_weather", "arguments": "{\\"city\\": ', "json"),
    "escaped quotes and braces": ('\\"{', "hermes"),
    "'<tool_call>' repeated": ("<tool_call>", "hermes"),
    "tags never closed": ("<tool_call>{", "hermes"),
    "answer string never closed": ('{"answer": "' + "Paris is sunny. " * 4096, "json"),
}
"""Label -> (the unit the model repeats, the dialect it was asked for)."""

LOOPING_TOOLS = [
    ToolSpec("get_weather", "", {"type": "object", "properties": {"city": {"type": "string"}}})
]


def looping_reply(unit: str, size: int) -> str:
    """``unit`` repeated up to ``size`` characters: a model looping until ``max_tokens``."""
    return (unit * (size // len(unit) + 1))[:size]
