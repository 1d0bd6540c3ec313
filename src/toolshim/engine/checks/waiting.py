"""Check ``waiting``: a call written with another call as its argument waits for its result.

``[convert_currency(amount=get_stock_price("TSLA"), from_currency="USD", to_currency="BTC")]``
(the 1.5B on "what does one TSLA share cost in BTC?") is two steps: the parser reads the inner
call first and the outer one as waiting for it (:attr:`~toolshim.dialects.calls.ParsedCall.
waits_for`). The inner call goes out; the outer is held back like a call with a made-up id
(:mod:`.made_up`), and remembered as a step of the model's plan (:mod:`toolshim.engine.plans`):
once the price is in, an answer is opened as the conversion's call. Before, the nesting was
re-asked as "must be literal values" twice, and the model answered with a made-up price.
"""

from __future__ import annotations

from toolshim.engine.checks.base import PASS, Check, CheckedReply, Outcome, Revise

__all__ = ["CHECK", "NAME"]

NAME = "waiting"


def _run(reply: CheckedReply) -> Outcome:
    waiting = [c for c in reply.calls if c.waits_for]
    if not waiting:
        return PASS
    kept = tuple(c for c in reply.calls if not c.waits_for)
    notes = []
    for call in waiting:
        if not reply.continued:
            reply.turn.held_back.append(call.name)
        notes.append(
            f"held back {call.name}: written with the result of "
            f"{', '.join(call.waits_for)} as an argument, it waits for that result"
        )
    return Revise(kept, reply.finish, tuple(notes))


CHECK = Check(NAME, _run, continued=True)
