"""Shipped model profiles: known facts about model families, matched by normalised model name.

The table lives in ``toolshim/data/profiles.json`` (package data); each family says where its
facts come from. Names are normalised first so that ``ollama/qwen2.5:7b-instruct-q4_K_M``,
``hf.co/bartowski/Qwen2.5-7B-Instruct-GGUF:Q4_K_M`` and ``Qwen/Qwen2.5-7B-Instruct`` all
become ``qwen2.5-7b``: vendor prefixes, ``:latest``/``:free`` tags, quantisation suffixes,
``.gguf`` and ``-instruct``/``-chat``/``-it`` are dropped, a size tag is kept. Profile facts
are the weakest source: anything the upstream, a probe, an error or a person says wins.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from typing import Any

from toolshim.capabilities.facts import Fact, Source, coerce_value
from toolshim.errors import ConfigError

__all__ = [
    "FAMILY_MARKUPS",
    "Family",
    "ProfileMatch",
    "ProfileTable",
    "normalize_name",
    "parameter_count",
    "shipped_profiles",
]

_DROPPED_TAGS = frozenset({"latest", "free", "beta", "extended", "nitro", "floor", "online"})
_QUANT = re.compile(
    r"[-_.](?:i?q\d(?:_[a-z0-9]+)*|f16|fp16|bf16|f32|fp32|fp8|int4|int8|awq|gptq|gguf|ggml|"
    r"mlx|exl2|\d+bit|\d+-bit)(?=$|[-_.])"
)
_ROLE_SUFFIX = re.compile(r"-(?:instruct|it|hf)(?=$|-)|(?<=\d[bm])-chat(?=$|-)")
_SIZE = re.compile(r"(?:^|[-_])(?:(\d+)x)?(\d+(?:\.\d+)?)([mb])(?=$|[-_])")


def normalize_name(model: str) -> str:
    """The model's name without vendor prefix, tags that do not change the model, quantisation,
    ``.gguf`` or role suffixes (``-instruct``, ``-it``, ``-hf``; ``-chat`` after a size): ``"hf.co/x/Qwen2.5-Coder-7B-Instruct-GGUF:Q4_K_M"`` →
    ``"qwen2.5-coder-7b"``, ``"gemma3:latest"`` → ``"gemma3"``, ``"llama3.2:1b"`` →
    ``"llama3.2-1b"``."""
    text = model.strip().lower().replace(" ", "-")
    text = text.rstrip("/").rsplit("/", 1)[-1]
    base, _, tag = text.partition(":")
    base = _clean(base.removesuffix(".gguf"))
    tag_parts = [p for p in _clean(tag).split("-") if p and p not in _DROPPED_TAGS]
    return "-".join([base, *tag_parts]) if base else "-".join(tag_parts)


def _clean(text: str) -> str:
    text = f"-{text}"
    previous = None
    while previous != text:
        previous = text
        text = _QUANT.sub("", text)
    text = _ROLE_SUFFIX.sub("", text[1:].replace("_", "-"))
    return text.strip("-.")


def parameter_count(normalized: str) -> float | None:
    """Parameters the name advertises (``0.5b`` → 5e8, ``135m`` → 1.35e8, ``8x7b`` → 5.6e10)."""
    match = _SIZE.search(normalized)
    if match is None:
        return None
    experts, number, unit = match.groups()
    count = float(number) * (1e9 if unit == "b" else 1e6)
    return count * int(experts) if experts else count


@dataclass(frozen=True, slots=True)
class Family:
    """One row of the profiles table."""

    name: str
    pattern: re.Pattern[str]
    facts: Mapping[str, Any]
    source: str
    examples: tuple[str, ...] = ()
    note: str = ""


@dataclass(frozen=True, slots=True)
class ProfileMatch:
    """What the shipped table says about one model name."""

    model: str
    normalized: str
    family: Family | None
    parameters: float | None
    facts: Mapping[str, Fact] = field(default_factory=dict)
    markup: Fact | None = None
    """The family's own call markup (``toolshim.dialects.MARKUPS``), source ``profile``: the
    reader a leaked call is tried with first (``Dialect.parse(..., markup=...)``)."""


class ProfileTable:
    """The shipped families, first match wins (the file lists specific families first)."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        try:
            checked = datetime.strptime(str(data["checked"]), "%Y-%m-%d").replace(tzinfo=UTC)
            self.checked_at = checked.timestamp()
            rule = data["size_rule"]
            self.compact_below = float(rule["below_parameters"])
            self.compact_dialect = str(rule["dialect"])
            self.families = tuple(_family(row) for row in data["families"])
        except (KeyError, TypeError, ValueError, re.error) as exc:
            raise ConfigError(f"the model profiles table is malformed: {exc!r}") from exc
        self._cache: dict[str, ProfileMatch] = {}

    def match(self, model: str) -> ProfileMatch:
        """The family and facts for ``model`` (facts may come from the size rule alone)."""
        cached = self._cache.get(model)
        if cached is not None:
            return cached
        normalized = normalize_name(model)
        family = next((f for f in self.families if f.pattern.match(normalized)), None)
        params = parameter_count(normalized)
        facts: dict[str, Fact] = {}
        if family is not None:
            detail = f"{family.name} family: {family.source}"
            for name, value in family.facts.items():
                facts[name] = Fact(name, value, Source.PROFILE, self.checked_at, detail)
        if params is not None and params < self.compact_below:
            facts["dialect"] = Fact(
                "dialect",
                self.compact_dialect,
                Source.PROFILE,
                self.checked_at,
                f"size rule: the name says {_human(params)} parameters, under "
                f"{_human(self.compact_below)}; small models follow the {self.compact_dialect} "
                "format best",
            )
        markup = None
        if family is not None and family.name in FAMILY_MARKUPS:
            markup = Fact(
                "markup",
                FAMILY_MARKUPS[family.name],
                Source.PROFILE,
                self.checked_at,
                f"{family.name} family: the call markup its chat template writes",
            )
        result = ProfileMatch(model, normalized, family, params, facts, markup)
        if len(self._cache) < 4096:
            self._cache[model] = result
        return result

    def lookup(self, model: str) -> Mapping[str, Fact]:
        """The profile facts for ``model`` (the :data:`Registry` ``profiles`` callable)."""
        return self.match(model).facts


FAMILY_MARKUPS: Mapping[str, str] = {
    "gpt-oss": "harmony",
    "llama4": "pythonic",
    "llama3.3": "llama3-json",
    "llama3.2": "pythonic",
    "llama3.1": "llama3-json",
    "llama3-groq-tool-use": "hermes",
    "hermes3": "hermes",
    "qwq": "hermes",
    "qwen3-coder": "qwen3-coder",
    "qwen3": "hermes",
    "qwen2.5-coder": "hermes",
    "qwen2.5": "hermes",
    "qwen2": "hermes",
    "mistral": "mistral",
    "mixtral": "mistral",
    "codestral": "mistral",
    "phi4-mini": "phi4",
    "deepseek-r1": "deepseek",
    "deepseek-chat": "deepseek",
    "granite": "granite",
    "glm": "glm",
    "kimi-k2": "kimi-k2",
    "deepseek-v3.2": "deepseek-dsml",
    "deepseek-v3": "deepseek",
    "xlam": "json",
    "lfm2": "pythonic",
    "seed-oss": "qwen3-coder",
    "minimax": "invoke-xml",
    "gemma4": "gemma",
}
"""Shipped family (by name) -> the call markup its chat template writes (docs/formats.md).
Families named here but not yet in the profiles table take effect when a row is added."""


def _family(row: Mapping[str, Any]) -> Family:
    facts = {k: coerce_value(k, v) for k, v in row.get("facts", {}).items()}
    return Family(
        name=str(row["family"]),
        pattern=re.compile(str(row["match"])),
        facts=facts,
        source=str(row["source"]),
        examples=tuple(str(e) for e in row.get("examples", ())),
        note=str(row.get("note", "")),
    )


def _human(params: float) -> str:
    if params >= 1e9:
        return f"{params / 1e9:g}B"
    return f"{params / 1e6:g}M"


@cache
def shipped_profiles() -> ProfileTable:
    """The table shipped in ``toolshim/data/profiles.json`` (read once)."""
    text = resources.files("toolshim").joinpath("data/profiles.json").read_text("utf-8")
    return ProfileTable(json.loads(text))
