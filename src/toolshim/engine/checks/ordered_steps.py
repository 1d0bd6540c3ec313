"""Check ``ordered_steps``: a request that orders its steps gets them one tool at a time.

"Get the capital of Egypt *and then* the weather there", "find her user id *first*", "get the
USD price, *then* convert it": the user says the later step needs the earlier one's result.
The 0.5B wrote the whole chain in its first reply anyway, the later calls with values it had
not been given: ``get_weather(city="Egypt")``, ``convert_currency(amount=1, …)`` for "one AAPL
share", ``lookup_order(order_id="123")``. Those failed or were wrong, and it answered from
them (5 of its 9 failed two-call chains on the agent suite). Each passed the made-up values
check: the country *was* said, and so was "one".

So, on the request's first step (its last message is the user's) and when the user's words
order the steps (:func:`orders_steps`), the reply's calls are cut at the first call of a tool
other than the first call's: more calls of that tool go out together ("the weather in Paris,
then in London"), a call of the next tool waits for the results. The calls cut are
remembered as the model's plan (:mod:`toolshim.engine.plans`): once the results are in, an
answer is opened as the next step's call. The reply is not continued for more calls either
(:func:`toolshim.engine.more_calls.continues`): what a continuation brings is a later step.
A coding agent's turn has its own rule (:mod:`.first_step`).
"""

from __future__ import annotations

import re

from toolshim.engine.checks.base import PASS, Check, CheckedReply, Outcome, Revise
from toolshim.types import ChatRequest

__all__ = ["CHECK", "NAME", "orders_steps", "request_orders_steps"]

NAME = "ordered_steps"

_ORDER = re.compile(
    r"\b(?:then|afterwards?|after\s+that|next,|once\s+you\s+(?:have|know|get)|"
    r"(?:using|with|from)\s+(?:that|the|its|this)\s+(?:result|answer|value|id)|"
    r"first\s*(?:[.,;:!?)]|$)|first\s+(?:look|find|get|check|call|fetch|search|convert))",
    re.IGNORECASE,
)
"""Words that order steps: "then", "after that", "first" ending a clause or before a verb of
looking up ("look up the capital first", "first find the id"); not "the first three"."""


def orders_steps(text: str) -> bool:
    """Whether ``text`` orders steps, one after another (see :data:`_ORDER`)."""
    return _ORDER.search(text) is not None


def request_orders_steps(request: ChatRequest) -> bool:
    """Whether ``request`` is a first step (its last message is the user's) of a request that
    orders its steps."""
    messages = request.messages
    return bool(messages) and messages[-1].role == "user" and orders_steps(messages[-1].text)


def _run(reply: CheckedReply) -> Outcome:
    calls = reply.calls
    turn = reply.turn
    if len(calls) < 2 or turn.one_step or not request_orders_steps(turn.request):
        return PASS
    first = calls[0].name
    cut = next((i for i, c in enumerate(calls) if c.name != first), len(calls))
    if cut == len(calls):
        return PASS
    later = calls[cut:]
    if not reply.continued:
        turn.held_back.extend(dict.fromkeys(c.name for c in later))
    names = ", ".join(dict.fromkeys(repr(c.name) for c in later))
    return Revise(
        calls[:cut],
        reply.finish,
        (
            f"one step at a time: the request orders its steps; later call(s) {names} left "
            f"for the next turn, once the result of {first!r} is in",
        ),
    )


CHECK = Check(NAME, _run)
