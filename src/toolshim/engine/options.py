"""Engine options: mode, strategy, dialect and limits, validated once into canonical values."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, TypeVar

from toolshim.errors import ConfigError
from toolshim.types import Mode, Strategy

__all__ = ["EngineOptions", "parse_mode", "parse_strategy"]


def parse_mode(value: str | Mode) -> Mode:
    return _parse_choice(Mode, value, "mode")


def parse_strategy(value: str | Strategy) -> Strategy:
    return _parse_choice(Strategy, value, "strategy")


_Choice = TypeVar("_Choice", bound=StrEnum)


def _parse_choice(kind: type[_Choice], value: str | _Choice, param: str) -> _Choice:
    """``value`` as a member of ``kind`` (case and surrounding spaces ignored); an unknown one
    raises a :class:`ConfigError` for ``param`` listing the choices."""
    try:
        return kind(str(value).strip().lower())
    except ValueError:
        raise ConfigError(
            f"unknown {param} {value!r}; choose one of: {', '.join(m.value for m in kind)}",
            param=param,
        ) from None


MAX_REASKS = 10
"""The most re-asks one request may ask for (each costs an upstream call)."""
DEFAULT_MAX_TOKENS = 1024
"""``max_tokens`` of an emulated request that sets none: a small model that loops on its own
output (writing the same call again and again) stops there instead of filling its context."""


@dataclass(frozen=True, slots=True)
class EngineOptions:
    """How the engine serves requests; per-request overrides come from :meth:`override`."""

    mode: Mode = Mode.AUTO
    strategy: Strategy | None = None
    """None: the model's preferred strategy (registry fact ``strategy``), else single."""
    dialect: str | None = None
    max_reasks: int = 2
    rescue: bool = True
    """Turn a native reply's text that holds a valid call into a tool call."""
    constrain: bool | None = None
    """Hold emulated replies to a JSON Schema: None asks the registry whether the upstream
    honours ``response_format`` (fact ``structured_output``); True/False force it."""
    default_max_tokens: int | None = DEFAULT_MAX_TOKENS
    """``max_tokens`` for emulated requests that set none (None: no cap)."""
    offer_tools: tuple[str, ...] | None = None
    """Offer the model only these tools (names or shell patterns) when a request has any of
    them; the others are left out and named in the warnings (:mod:`.focus`). None: all."""
    brief_system: bool | None = None
    """Replace the caller's system prompt with a short brief and its environment lines
    (:func:`toolshim.engine.focus.brief_system`): None when ``offer_tools`` left tools out."""
    compact_tools: bool | None = None
    """Condense the tools' schemas in emulated prompts: None when they are longer than
    :data:`toolshim.engine.focus.COMPACT_OVER` characters."""

    def __post_init__(self) -> None:
        if self.default_max_tokens is not None and self.default_max_tokens < 1:
            raise ConfigError(
                f"default_max_tokens must be at least 1, not {self.default_max_tokens}",
                param="default_max_tokens",
            )
        if not 0 <= self.max_reasks <= MAX_REASKS:
            raise ConfigError(
                f"max_reasks must be between 0 and {MAX_REASKS}, not {self.max_reasks}",
                param="max_reasks",
            )
        if self.dialect is not None:
            from toolshim.dialects import get_dialect

            get_dialect(self.dialect)  # raises ConfigError for an unknown name

    @classmethod
    def build(
        cls,
        *,
        mode: str | Mode = Mode.AUTO,
        strategy: str | Strategy | None = None,
        dialect: str | None = None,
        max_reasks: int = 2,
        rescue: bool = True,
        constrain: bool | None = None,
        default_max_tokens: int | None = DEFAULT_MAX_TOKENS,
        offer_tools: str | Sequence[str] | None = None,
        compact_tools: bool | None = None,
        brief_system: bool | None = None,
    ) -> EngineOptions:
        from toolshim.engine.focus import parse_offer_tools

        return cls(
            parse_mode(mode),
            parse_strategy(strategy) if strategy else None,
            dialect or None,
            max_reasks,
            rescue,
            constrain,
            default_max_tokens,
            parse_offer_tools(offer_tools),
            brief_system,
            compact_tools,
        )

    def override(self, values: Mapping[str, Any] | None) -> EngineOptions:
        """These options with per-request ``mode``/``strategy``/``dialect``/``max_reasks`` applied
        (``max_reasks`` at most the engine's own: the operator's setting bounds a caller)."""
        if not values:
            return self
        unknown = set(values) - {"mode", "strategy", "dialect", "max_reasks", "constrain"}
        if unknown:
            raise ConfigError(
                f"unknown toolshim option(s) {sorted(unknown)}; "
                "known: mode, strategy, dialect, max_reasks, constrain",
                param="toolshim",
            )
        changes: dict[str, Any] = {}
        if values.get("mode") is not None:
            changes["mode"] = parse_mode(values["mode"])
        if values.get("strategy") is not None:
            changes["strategy"] = parse_strategy(values["strategy"])
        if values.get("dialect") is not None:
            changes["dialect"] = str(values["dialect"])
        if values.get("max_reasks") is not None:
            try:
                max_reasks = int(values["max_reasks"])
            except (TypeError, ValueError):
                raise ConfigError("max_reasks must be an integer", param="max_reasks") from None
            if 0 <= max_reasks <= MAX_REASKS and max_reasks > self.max_reasks:
                raise ConfigError(
                    f"max_reasks {max_reasks} is above this server's {self.max_reasks} "
                    "(toolshim serve --max-reasks): a request may lower it, not raise it",
                    param="max_reasks",
                )
            changes["max_reasks"] = max_reasks
        if values.get("constrain") is not None:
            flag = values["constrain"]
            if not isinstance(flag, bool):
                raise ConfigError("constrain must be true or false", param="constrain")
            changes["constrain"] = flag
        return replace(self, **changes)
