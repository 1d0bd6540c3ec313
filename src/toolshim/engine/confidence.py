"""Calls the model was unsure of: a reply that opens with a call the model nearly did not write.

Asked something no offered tool does, a small model often calls the nearest tool anyway with
the question's own values: Qwen2.5-Coder-0.5B answers "what is the freezing point of water
at 10 kPa?" with ``thermodynamics_calculate_boiling_point(substance="water", pressure=10)``.
Those values were said, the call is valid, and no check of the call can tell it from a right
one. The model itself can: at the first token of its reply it weighs opening a call against
answering in prose, and where no tool fits, the two are close.

Measured on the 0.5B under hermes (BFCL, ``docs/results.md``, "No-tool questions"): the
probability of a call-opening token (``{"``, `````` ``` ``````, ``<tool_call>`` …) at the first
token of the reply, summed over its ten likeliest alternatives, was under 0.6 for 6 of the 16
no-tool questions it answered with a call (0.22–0.58; the other ten 0.60–0.99), and for 2 of
the 107 right calls it made in the other categories (0.48, 0.49; the rest 0.63–1.0). Above 0.6
the two groups overlap (at 0.8: 10 of 16 caught, 10 of 107 lost). A reply that opens with a
call less likely than :data:`MIN_CONFIDENCE` is read as no call: the answer is asked for
without tools (:class:`~toolshim.engine.driver.AnswerWithoutTools`).

It is judged only where that weighing is the model's own and its result is the whole decision:

* the model's doubt is read for this model (registry fact ``doubt``, set by a person: ``toolshim
  models set M --doubt yes``): the upstream returns token log-probabilities, and the bar
  holds for the model;
* ``tool_choice`` is ``auto`` (a forced call is wanted whatever the model thinks), the
  strategy ``single``, and the reply not held to a JSON Schema (there the first token is the
  schema's, not the model's choice);
* it is the turn's first attempt (a re-ask told the model to fix a call), and the request's
  last message is the user's (after tool results, calling again or answering is another
  decision, with its own checks);
* the reply opens with the call: a reply that begins in prose and then calls has chosen its
  call on its own, later; it is not judged.

Off unless asked for. On the 0.5B's served default it took BFCL irrelevance from 68% to 80%
(overall 60% → 61%, 7 cases gained and 4 right calls lost, p ≈ 0.55), and cost the agent suite
two one-call tasks (``order-1001``: unsure of its call, the model answered without tools by
inventing the order's status): a made-up answer is worse than a needless call, so the
embedded server does not set it. The threshold is the 0.5B's; another model may weigh
differently.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from toolshim.engine.turn import Turn
from toolshim.types import Strategy

__all__ = [
    "MIN_CONFIDENCE",
    "TOP_LOGPROBS",
    "call_confidence",
    "doubt",
    "judged",
    "logprob_params",
    "logprob_tokens",
    "unsure_warning",
]

MIN_CONFIDENCE = 0.6
"""A reply that opens with a call less likely than this is read as no call (the 0.5B: 6 of
its 16 no-tool calls under it, 2 of its 107 right calls)."""

TOP_LOGPROBS = 10
"""Alternatives asked for at each token: enough to hold nearly all of the first token's mass."""


def judged(turn: Turn, first_attempt: bool) -> bool:
    """Whether this attempt's opening is judged (see the module's conditions)."""
    request = turn.request
    return (
        turn.doubt
        and first_attempt
        and not turn.constrained
        and turn.strategy is Strategy.SINGLE
        and request.wants_tools
        and request.choice.kind == "auto"
        and bool(request.messages)
        and request.messages[-1].role == "user"
    )


def logprob_params(params: dict[str, Any]) -> None:
    """Ask for the log-probabilities the judgement reads, keeping a caller's larger
    ``top_logprobs``."""
    params["logprobs"] = True
    top = params.get("top_logprobs")
    if not isinstance(top, int) or isinstance(top, bool) or top < TOP_LOGPROBS:
        params["top_logprobs"] = TOP_LOGPROBS


def _opens_call(token: str) -> bool:
    """A token that opens markup rather than prose: its first visible character is not a
    letter or digit (``{"``, `````` ``` ``````, ``<``, ``[``)."""
    text = token.lstrip()
    return bool(text) and not text[0].isalnum()


def call_confidence(tokens: Sequence[Any]) -> float | None:
    """The probability that the reply opens with markup, at its first visible token: the sum
    over that token's ``top_logprobs`` of those that open markup (what lies beyond them counts
    as prose). Read from the OpenAI ``logprobs.content`` list; None when the reply opens with
    prose, or the list says nothing: then there is nothing to judge."""
    for entry in tokens:
        if not isinstance(entry, Mapping):
            return None
        token = entry.get("token")
        if not isinstance(token, str):
            return None
        if not token.strip():
            continue  # leading whitespace: the choice comes at the next token
        if not _opens_call(token):
            return None
        alternatives = entry.get("top_logprobs")
        if not isinstance(alternatives, list) or not alternatives:
            return None
        markup = 0.0
        for alternative in alternatives:
            if not isinstance(alternative, Mapping):
                continue
            text, logprob = alternative.get("token"), alternative.get("logprob")
            if isinstance(text, str) and isinstance(logprob, int | float) and _opens_call(text):
                markup += math.exp(logprob)
        return min(1.0, markup)
    return None


def logprob_tokens(logprobs: Any) -> list[Any]:
    """The ``content`` list of a choice's (or a chunk's) ``logprobs`` object, or ``[]``."""
    if isinstance(logprobs, Mapping):
        content = logprobs.get("content")
        if isinstance(content, list):
            return content
    return []


def doubt(tokens: Sequence[Any]) -> float | None:
    """How likely the call that opens the reply was (:func:`call_confidence`), when under
    :data:`MIN_CONFIDENCE`; None when the opening is not judged or the model was sure enough."""
    found = call_confidence(tokens)
    return found if found is not None and found < MIN_CONFIDENCE else None


def unsure_warning(confidence: float) -> str:
    return (
        f"the model was unsure a tool was needed (its reply opened with a call "
        f"{confidence:.0%} likely, under {MIN_CONFIDENCE:.0%}); answered without tools"
    )
