"""Word triggers: the tool names and keywords that may open a call in the middle of prose.

``get_weather(`` and ``get_weather{`` (calls of an offered tool), ``functools[`` (Phi-4-mini),
``to=functions.name`` (gpt-oss), ``functions.name:0`` (Kimi-K2) and ``call:name{`` (Gemma 4)
start a call without any bracket before them; the parser finds them with one pattern per tool
set, and holds back a chunk that ends in a piece of one (an offered tool's name is held too
while ``:0`` may follow it, for Kimi-K2 and GLM calls whose opening token is missing).
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["WordLiterals", "held_word", "word_triggers"]

WordLiterals = dict[str, tuple[tuple[str, str], ...]]
_HARMONY = "to=functions."
"""First character -> (literal, what must follow it) for every trigger word."""


@lru_cache(maxsize=256)
def word_triggers(names: tuple[str, ...]) -> tuple[re.Pattern[str], WordLiterals, int]:
    """The word-trigger pattern for a tool set, the literals a partial trigger may be, and the
    longest tail that may still become one."""
    alternatives = [
        r"(?P<functools>functools)\s*\[",
        r"functions\.(?P<kimi>[A-Za-z_][\w\-]*(?:\.[\w\-]+)*):\d+",
        r"call:(?P<gemma>[A-Za-z_][\w.\-]{0,127})[{(]",
    ]
    literals = [
        ("functools", "["),
        (_HARMONY, "name"),
        ("functions.", "kimi"),
        ("call:", "name"),
    ]
    if names:
        joined = "|".join(re.escape(n) for n in names)
        alternatives.insert(
            0,
            rf"(?:functions\.|default_api\.)?(?:{joined})"
            r"(?:\s*\(|(?P<named_json>[ \t]*\n[ \t]*)(?=\{)|(?P<glued_json>[ \t]*[>=]?[ \t]*)(?=\{))",
        )
        for name in names:
            literals += [(name, "("), (f"functions.{name}", "("), (f"default_api.{name}", "(")]
    # A harmony recipient may follow stray tokens of another script with no space between
    # (``全民彩票to=functions.x``), and its name is ASCII, as OpenAI's tool names are.
    harmony = r"(?<![A-Za-z0-9_.])to=functions\.(?P<harmony>[A-Za-z0-9_.\-]+)"
    pattern = re.compile(r"(?<![\w.])(?:" + "|".join(alternatives) + ")|" + harmony)
    by_first: dict[str, list[tuple[str, str]]] = {}
    for literal, follow in literals:
        by_first.setdefault(literal[0], []).append((literal, follow))
    span = max(len(literal) for literal, _ in literals) + 8
    return pattern, {k: tuple(v) for k, v in by_first.items()}, span


_FOLLOWS = {
    "name": re.compile(r"[\w.\-]*"),
    "kimi": re.compile(r"[\w.\-]*(?::\d*)?"),
    "(": re.compile(r"\s*(?::\d*)?|[ \t]*[>=][ \t]*"),
}


def could_follow(rest: str, follow: str) -> bool:
    """Could ``rest`` (what came after a complete literal) still turn into a trigger?"""
    pattern = _FOLLOWS.get(follow)
    if pattern is None:
        return not rest.strip()
    return pattern.fullmatch(rest) is not None


def held_word(buf: str, start: int, literals: WordLiterals, span: int) -> int:
    """Length of a tail of ``buf[start:]`` that may still become a word trigger (``get_wea``,
    ``to=func``): text the parser must hold back until more arrives."""
    n = len(buf)
    for k in range(max(start, n - span), n):
        before = buf[k - 1] if k > 0 else " "
        if before in "_." or (before.isalnum() and (before.isascii() or buf[k] != "t")):
            continue  # inside a word (only "to=functions." may follow another script's)
        tail = buf[k:]
        for literal, follow in literals.get(tail[0], ()):
            if before.isalnum() and literal != _HARMONY:
                continue
            if literal.startswith(tail):
                return n - k
            if tail.startswith(literal) and could_follow(tail[len(literal) :], follow):
                return n - k
    return 0
