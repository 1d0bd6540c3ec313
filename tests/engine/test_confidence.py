"""Calls the model was unsure of (:mod:`toolshim.engine.confidence`): a reply that opens with a
call whose opening token was under the bar is read as no call, and the answer is asked for
without tools. The scripted upstream returns ``logprobs`` as llama.cpp does."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.engine.helpers import WEATHER, called, emulating_engine
from toolshim.engine import Engine
from toolshim.engine.confidence import MIN_CONFIDENCE, TOP_LOGPROBS, call_confidence
from toolshim.testing import FakeUpstream, Reply, opening_logprobs

CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
ANSWER = "Water freezes at 0 °C at sea level."

SURE = {"<tool_call>": 0.9, "{": 0.05, "The": 0.04}
UNSURE = {"<tool_call>": 0.45, "The": 0.35, "```": 0.1, "Sure": 0.05}


def engine(upstream: FakeUpstream, *, doubt: bool = True, **options: Any) -> Engine:
    return emulating_engine(upstream, {"doubt": "yes"} if doubt else {}, **options)


def ask(question: str, **extra: Any) -> dict[str, Any]:
    return {
        "model": "m",
        "messages": [{"role": "user", "content": question}],
        "tools": [WEATHER],
        **extra,
    }


def opened(alternatives: dict[str, float], text: str = CALL) -> Reply:
    first = max(alternatives, key=alternatives.__getitem__)
    return Reply(text, logprobs=opening_logprobs(first, alternatives))


async def outcome(built: Engine, request: dict[str, Any], stream: bool) -> tuple[str, list[str]]:
    """The answer's text and the called tools' names, from a whole or a streamed reply."""
    if not stream:
        completion = await built.acomplete(request)
        return completion.message.text, [c.name for c in completion.tool_calls]
    text, names = "", []
    async for chunk in built.astream({**request, "stream": True}):
        text += chunk.content or ""
        names += [d.name for d in chunk.tool_calls if d.name]
    return text, names


# --- reading the opening ------------------------------------------------------------------


def test_the_confidence_is_the_mass_of_markup_openings_among_the_first_tokens_alternatives() -> (
    None
):
    tokens = opening_logprobs('{"', {'{"': 0.4, "```": 0.15, "The": 0.3, "<": 0.05})
    assert call_confidence(tokens) == pytest.approx(0.6)


def test_leading_whitespace_is_skipped_and_a_prose_opening_is_not_judged() -> None:
    space = {"token": "\n", "logprob": -0.1, "top_logprobs": []}
    assert call_confidence([space, *opening_logprobs("<", {"<": 0.7, "I": 0.3})]) == (
        pytest.approx(0.7)
    )
    assert call_confidence(opening_logprobs("The", {"The": 0.6, "{": 0.4})) is None


@pytest.mark.parametrize(
    "tokens",
    [[], [{"token": "{"}], [{"token": "{", "top_logprobs": "x"}], ["{"], [{"logprob": -1}]],
    ids=["empty", "no-alternatives", "bad-alternatives", "not-an-object", "no-token"],
)
def test_logprobs_that_say_nothing_are_not_judged(tokens: list[Any]) -> None:
    assert call_confidence(tokens) is None


@given(
    st.dictionaries(
        st.sampled_from(["{", "```", "<", "[", "The", "Sure", "1", " {", "\n"]),
        st.floats(min_value=0.001, max_value=1.0),
        min_size=1,
    )
)
def test_the_confidence_is_a_probability_or_nothing(alternatives: dict[str, float]) -> None:
    total = sum(alternatives.values())
    normal = {k: v / total for k, v in alternatives.items()}
    found = call_confidence(opening_logprobs("{", normal))
    assert found is not None and 0.0 <= found <= 1.0 + 1e-9
    markup = sum(v for k, v in normal.items() if k.strip() and not k.strip()[0].isalnum())
    assert found == pytest.approx(min(1.0, markup))


# --- the engine --------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
async def test_a_call_the_model_opened_unsure_of_becomes_an_answer_without_tools(
    stream: bool,
) -> None:
    upstream = FakeUpstream([opened(UNSURE), ANSWER])
    built = engine(upstream)
    text, names = await outcome(built, ask("What is the freezing point of water?"), stream)
    assert (text, names) == (ANSWER, [])
    first, second = upstream.history
    assert first["logprobs"] is True and first["top_logprobs"] == TOP_LOGPROBS
    assert "logprobs" not in second and "get_weather" not in json.dumps(second["messages"])


async def test_the_warning_says_how_likely_the_call_was() -> None:
    upstream = FakeUpstream([opened(UNSURE), ANSWER])
    completion = await engine(upstream).acomplete(ask("Freezing point of water?"))
    assert completion.meta is not None
    warning = next(w for w in completion.meta.warnings if "unsure" in w)
    assert "55%" in warning and f"{MIN_CONFIDENCE:.0%}" in warning
    assert completion.meta.llm_calls == 2


@pytest.mark.parametrize("stream", [False, True])
async def test_a_call_the_model_was_sure_of_is_returned(stream: bool) -> None:
    upstream = FakeUpstream([opened(SURE)])
    text, names = await outcome(engine(upstream), ask("Weather in Paris?"), stream)
    assert names == ["get_weather"] and not text.strip()
    assert upstream.calls == 1


async def test_toolshims_own_logprobs_do_not_reach_the_caller_and_the_callers_do() -> None:
    upstream = FakeUpstream([opened(SURE), opened(SURE)])
    built = engine(upstream)
    mine = await built.acomplete(ask("Weather in Paris?"))
    assert "logprobs" not in mine.choices[0].extra
    theirs = await built.acomplete(ask("Weather in Paris?", logprobs=True, top_logprobs=20))
    assert theirs.choices[0].extra["logprobs"]["content"][0]["token"] == "<tool_call>"
    assert upstream.history[1]["top_logprobs"] == 20  # the caller's larger number is kept


@pytest.mark.parametrize(
    ("setup", "request_extra"),
    [
        ({"doubt": False}, {}),  # not read for this model (or no logprobs upstream)
        ({}, {"tool_choice": "required"}),  # a forced call is wanted whatever the model thinks
        ({"strategy": "decision"}, {}),
    ],
    ids=["fact-unset", "forced", "decision"],
)
async def test_the_opening_is_not_judged_where_the_model_does_not_choose_alone(
    setup: dict[str, Any], request_extra: dict[str, Any]
) -> None:
    doubt = setup.pop("doubt", True)
    script: list[Any] = [opened(UNSURE)]
    if setup.get("strategy") == "decision":
        script = [
            opened(
                UNSURE, '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}'
            )
        ]
    upstream = FakeUpstream(script)
    built = engine(upstream, doubt=doubt, **setup)
    completion = await built.acomplete(ask("Weather in Paris?", **request_extra))
    assert [c.name for c in completion.tool_calls] == ["get_weather"]
    assert "logprobs" not in upstream.history[0]


async def test_after_tool_results_the_opening_is_not_judged() -> None:
    upstream = FakeUpstream([opened(UNSURE)])
    request = ask("Weather in Paris?")
    request["messages"] += called("get_weather", '{"city": "Lyon"}', "18°C")
    completion = await engine(upstream).acomplete(request)
    assert [c.name for c in completion.tool_calls] == ["get_weather"]
    assert "logprobs" not in upstream.history[0]


async def test_a_reply_that_opens_in_prose_is_not_judged() -> None:
    prose_first = "Let me check.\n" + CALL
    upstream = FakeUpstream([opened({"Let": 0.5, "<tool_call>": 0.3, "The": 0.2}, prose_first)])
    completion = await engine(upstream).acomplete(ask("Weather in Paris?"))
    assert [c.name for c in completion.tool_calls] == ["get_weather"]


async def test_an_unsure_broken_call_is_not_reasked_but_answered() -> None:
    broken = '<tool_call>\n{"name": "get_weather", "arguments": {"town": 3}}\n</tool_call>'
    upstream = FakeUpstream([opened(UNSURE, broken), ANSWER])
    completion = await engine(upstream).acomplete(ask("Freezing point of water?"))
    assert completion.message.text == ANSWER and not completion.tool_calls
    assert "Freezing" in json.dumps(upstream.history[1]["messages"])  # asked without tools
