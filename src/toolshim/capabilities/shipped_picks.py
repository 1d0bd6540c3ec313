"""The configuration each embedded model's own eval picked, shipped in ``toolshim/data/eval_picks.json`` as source ``eval`` facts."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from typing import Any

from toolshim.capabilities.facts import PREFERENCE_FACTS, Fact, Source, coerce_value
from toolshim.errors import ConfigError

__all__ = ["SHIPPED_PREFIX", "shipped_eval_facts", "shipped_picks"]

SHIPPED_PREFIX = "shipped with toolshim: "
"""How the detail of a shipped pick begins (a pick a person's own ``--apply`` stored does not)."""


@cache
def shipped_picks() -> Mapping[str, Mapping[str, Any]]:
    """Known embedded model name -> its eval's pick (``toolshim.evaluation.pick.Pick.as_dict``)."""
    text = resources.files("toolshim").joinpath("data/eval_picks.json").read_text("utf-8")
    try:
        models = json.loads(text)["models"]
    except (ValueError, KeyError) as exc:
        raise ConfigError(f"the shipped eval picks are malformed: {exc!r}") from exc
    return {str(name): dict(entry) for name, entry in models.items()}


def shipped_eval_facts(name: str) -> dict[str, Fact]:
    """The preference facts (``dialect``, ``strategy``, ``constrain``, ``doubt``) the eval of
    known model ``name`` picked, dated with the eval; empty for a model without a shipped
    pick."""
    entry = shipped_picks().get(name)
    if entry is None:
        return {}
    when = datetime.strptime(str(entry["date"]), "%Y-%m-%d").replace(tzinfo=UTC).timestamp()
    detail = SHIPPED_PREFIX + str(entry["detail"])
    return {
        fact: Fact(fact, coerce_value(fact, entry[fact]), Source.EVAL, when, detail)
        for fact in PREFERENCE_FACTS
    }
