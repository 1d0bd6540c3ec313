"""Fact precedence: one merge function, tested for every pair of sources."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolshim.capabilities.facts import (
    Fact,
    Source,
    Support,
    coerce_value,
    merge,
    strongest,
)
from toolshim.errors import ConfigError

STRONGEST_FIRST = [
    Source.USER,
    Source.PROBE,
    Source.RUNTIME_ERROR,
    Source.EVAL,
    Source.UPSTREAM,
    Source.PROFILE,
]


def test_the_order_of_sources_is_the_documented_one() -> None:
    ranks = [s.rank for s in STRONGEST_FIRST]
    assert ranks == sorted(ranks, reverse=True)
    assert len(set(ranks)) == len(ranks)


@pytest.mark.parametrize(
    ("stronger", "weaker"),
    [(a, b) for a, b in itertools.combinations(STRONGEST_FIRST, 2)],
    ids=lambda s: s.value,
)
def test_a_weaker_source_never_overwrites_a_stronger_one(stronger: Source, weaker: Source) -> None:
    old_strong = Fact("native_tools", "no", stronger, updated_at=100.0)
    new_weak = Fact("native_tools", "yes", weaker, updated_at=200.0)  # newer, still loses
    assert merge(old_strong, new_weak) is old_strong
    old_weak = Fact("native_tools", "yes", weaker, updated_at=100.0)
    new_strong = Fact("native_tools", "no", stronger, updated_at=50.0)  # older, still wins
    assert merge(old_weak, new_strong) is new_strong


@pytest.mark.parametrize("source", STRONGEST_FIRST, ids=lambda s: s.value)
def test_between_equal_sources_the_newer_fact_wins(source: Source) -> None:
    older = Fact("dialect", "json", source, updated_at=1.0)
    newer = Fact("dialect", "hermes", source, updated_at=2.0)
    assert merge(older, newer) is newer
    assert merge(newer, older) is newer


def test_merge_with_nothing_known_takes_the_new_fact() -> None:
    fact = Fact("native_tools", "yes", Source.PROFILE)
    assert merge(None, fact) is fact
    assert strongest([]) is None


facts = st.builds(
    Fact,
    name=st.just("native_tools"),
    value=st.sampled_from(["yes", "no", "unknown"]),
    source=st.sampled_from(list(Source)),
    updated_at=st.floats(min_value=0, max_value=2e9, allow_nan=False),
)


@given(st.lists(facts, min_size=1, max_size=8, unique_by=lambda f: f.updated_at), st.randoms())
def test_the_winner_does_not_depend_on_arrival_order(found: list[Fact], rnd: object) -> None:
    shuffled = list(found)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    winner = strongest(found)
    assert winner is strongest(shuffled)
    assert winner is not None
    top = max(f.source.rank for f in found)
    assert winner.source.rank == top
    assert winner.updated_at == max(f.updated_at for f in found if f.source.rank == top)


def test_support_reads_the_usual_spellings() -> None:
    assert Support.of(True) is Support.YES
    assert Support.of("No") is Support.NO
    assert Support.of("maybe") is Support.UNKNOWN
    assert Fact("native_tools", "yes", Source.USER).support is Support.YES


def test_values_are_checked_by_fact() -> None:
    assert coerce_value("native_tools", Support.NO) == "no"
    assert coerce_value("native_tools", "Yes") == "yes"
    assert coerce_value("context_window", "8192") == 8192
    assert coerce_value("dialect", " Hermes ") == "hermes"
    with pytest.raises(ConfigError, match="yes, no or unknown"):
        coerce_value("native_tools", "perhaps")
    with pytest.raises(ConfigError, match="whole number"):
        coerce_value("context_window", "big")
    with pytest.raises(ConfigError, match="positive"):
        coerce_value("context_window", 0)
    with pytest.raises(ConfigError, match="known facts: native_tools"):
        coerce_value("colour", "red")


def test_an_unknown_source_lists_the_known_ones() -> None:
    assert Source.parse("runtime-error") is Source.RUNTIME_ERROR
    with pytest.raises(ConfigError, match="user, probe, runtime_error, eval, upstream, profile"):
        Source.parse("rumour")
