"""Answer first: after results that leave no step to take, the answer is asked for without tools.

After tool results, an emulated turn used to offer the tools again, so that the model could
take a next step. On the agent suite the 0.5B did that where a step was left, but where none
was it wrote the call it had just made in 43 of its 100 tasks, and the answer was asked for
without tools after all (:mod:`.checks.answered_repeats`): a request spent on every such
turn, seconds each on a CPU. So the answer is asked for at once, without tools, when nothing
says a step is left. A step is left (and the tools are offered as before) when:

* a step is planned, failed until a result came in, or named by a request that orders its
  steps or by the last call's error (:attr:`Turn.planned`, :mod:`.plans`);
* a call since the user's message failed (what to do about it is the model's to say);
* the user's message may ask for more than the calls made (:func:`.more_calls.more_asked`:
  it names an offered tool no call has used, as "what's the weather where order 1001 is
  going" names ``get_weather`` after ``lookup_order``; it holds a number or a name no call
  took, as "which is warmer, Paris or Oslo?" after Paris's weather alone; or it lists things
  and one call was made).

Asked for its answer without tools, a model that still writes a call it has no result for
wants a step nothing above foresaw: the tools are then offered as before (one request more).

Only where the model decides alone: ``tool_choice: "auto"``, the ``single`` strategy, not a
coding agent's turn (:attr:`Turn.one_step`: its steps follow from what it reads), no
``response_format`` of the caller's, and a request that ends with the results.
"""

from __future__ import annotations

from toolshim.engine.files_named import request_index
from toolshim.engine.more_calls import more_asked
from toolshim.engine.outcomes import call_outcomes
from toolshim.engine.turn import Turn
from toolshim.types import Strategy

__all__ = ["STEP_WARNING", "WARNING", "answers_first", "nothing_more_asked"]

WARNING = "no step is left after the results: the answer was asked for without tools"
STEP_WARNING = (
    "no step seemed left after the results, but asked for the answer without tools the model "
    "wrote a new call: the tools were offered for it"
)

_RESULT_ROLES = frozenset({"tool", "function"})


def answers_first(turn: Turn) -> bool:
    """Whether this turn's answer is asked for without tools from the start (see the module
    docstring)."""
    return (
        turn.nothing_asked  # (the request ends with results, and no step is planned)
        and turn.request.choice.kind == "auto"
        and turn.strategy is Strategy.SINGLE
        and not turn.one_step
        and turn.caller_format is None
        and all(o.worked for o in call_outcomes(turn.request.messages))
    )


def nothing_more_asked(turn: Turn) -> bool:
    """Whether the request ends with results, and the calls made since the user's message
    leave nothing in it to call for (:func:`~toolshim.engine.more_calls.more_asked`), and no
    step is planned (:attr:`Turn.nothing_asked`, set by the emulated paths: only their
    checks read it)."""
    messages = turn.request.messages
    if not messages or messages[-1].role not in _RESULT_ROLES:
        return False
    start = request_index(messages)
    outcomes = call_outcomes(messages)
    if start is None or not outcomes or turn.planned:
        return False
    calls = [(o.name, o.arguments) for o in outcomes]
    tools = [t.name for t in turn.request.function_tools]
    return not more_asked(messages[start].text, calls, tools)
