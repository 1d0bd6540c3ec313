"""An answer from results that gives none of the numbers they hold: asked once more, with them.

The request for the answer says "giving the values they hold (numbers with their units, …)".
The 0.5B, given ``{"city": "Oslo", "temperature_c": -3, "conditions": "snowing"}`` for "the
capital of Norway, then its weather", answered "The capital of Norway is Oslo, and its
current weather is snowing." — and so for Tokyo's 24 °C and Cairo's 35 °C: 3 of its 12
two-call chains on the agent suite, each with every call right.

So, after a chain (calls of two tools or more that worked since the user's message), when
their results hold numbers the request did not give (:func:`result_numbers`: not the
question's own, nor the calls' arguments), an answer
asked for without tools that writes none of them is asked for once more: its reply, then
"Your answer leaves out values the results give: -3. Answer again in plain words, giving
them." (:func:`left_out_note`). One more request, only then; the second answer stands. A
streamed answer is held until it is known (it is short: the results are in). Not in a
coding agent's turn, whose answers report what it did, not the figures it read.
"""

from __future__ import annotations

from collections.abc import Sequence

from toolshim.engine.checks.unused_numbers import said_numbers
from toolshim.engine.files_named import request_index
from toolshim.engine.outcomes import call_outcomes
from toolshim.engine.turn import Turn

__all__ = ["LEFT_OUT_WARNING", "left_out", "left_out_note", "result_numbers"]

LEFT_OUT_WARNING = (
    "the model's answer gave none of the numbers its results hold; asked once more, with them"
)
_SHOWN = 4


def result_numbers(turn: Turn) -> tuple[str, ...]:
    """The numbers the results since the user's message hold (calls that worked, of two
    tools or more), as written, that neither the user's message nor a call's arguments
    gave; () in a coding agent's turn."""
    messages = turn.request.messages
    start = request_index(messages)
    if turn.one_step or start is None:
        return ()
    outcomes = [o for o in call_outcomes(messages) if o.worked]
    if len({o.name for o in outcomes}) < 2:
        return ()  # one tool's results: the 0.5B gave their numbers (22 of its 24 one-call tasks)
    given = {v for _, vs in said_numbers(messages[start].text) for v in vs}
    for message in messages[start + 1 :]:
        for call in message.tool_calls:
            given |= {v for _, vs in said_numbers(call.arguments) for v in vs}
    found: dict[str, None] = {}
    for outcome in outcomes:
        for written, values in said_numbers(outcome.result):
            if not given.intersection(values):
                found[written] = None
    return tuple(found)


def left_out(numbers: Sequence[str], answer: str) -> bool:
    """Whether ``answer`` writes none of ``numbers`` (:func:`result_numbers`)."""
    if not numbers or not answer.strip():
        return False
    wanted = {v for n in numbers for _, vs in said_numbers(n) for v in vs}
    return not any(wanted.intersection(vs) for _, vs in said_numbers(answer))


def left_out_note(numbers: Sequence[str]) -> str:
    shown = ", ".join(numbers[:_SHOWN])
    return (
        f"Your answer leaves out values the results give: {shown}. Answer again in plain "
        "words, giving them."
    )
