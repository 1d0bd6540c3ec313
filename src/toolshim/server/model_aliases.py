"""Model aliases: which model a request naming another one is served by (``--model-alias``).

Clients name models of their own vendor by default (Claude Code ``claude-sonnet-…`` and a
``claude-haiku-…`` for side requests, Codex ``gpt-5…``); an upstream that does not serve those
names answers 404. An alias maps a shell-style pattern to a model the upstream serves.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from toolshim.errors import ConfigError

__all__ = ["ModelAlias", "parse_model_aliases", "resolve_model"]


@dataclass(frozen=True, slots=True)
class ModelAlias:
    """Requests for a model matching ``pattern`` (case-insensitive, ``*`` and ``?``) go to
    ``target``."""

    pattern: str
    target: str

    def matches(self, name: str) -> bool:
        return fnmatch.fnmatchcase(name.lower(), self.pattern.lower())


def parse_model_aliases(texts: Iterable[str]) -> tuple[ModelAlias, ...]:
    """``PATTERN=MODEL`` texts (a text may hold several, comma-separated, as an environment
    variable does) as aliases in the order given; ConfigError naming a malformed one."""
    aliases: list[ModelAlias] = []
    for text in texts:
        for item in text.split(","):
            if not item.strip():
                continue
            pattern, equals, target = item.partition("=")
            if not equals or not pattern.strip() or not target.strip():
                raise ConfigError(
                    f"--model-alias {item.strip()!r} is not PATTERN=MODEL "
                    "(for example 'claude-*=qwen2.5-coder:7b')",
                    param="model_alias",
                )
            aliases.append(ModelAlias(pattern.strip(), target.strip()))
    return tuple(aliases)


def resolve_model(
    name: object, aliases: Sequence[ModelAlias], default: str | None, pinned: bool
) -> str | None:
    """The model a request naming ``name`` is served by: the pinned ``default`` (a one-model
    upstream), the first alias that matches, ``default`` when no name is given, else ``name``
    itself (None: leave the request's value as it is)."""
    if default and pinned:
        return default
    if isinstance(name, str) and name:
        for alias in aliases:
            if alias.matches(name):
                return alias.target
        return None
    return default
