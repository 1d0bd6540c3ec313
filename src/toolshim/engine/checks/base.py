"""The interface of a check on a model's calls: a name, a function from the reply to an outcome.

A check reads a :class:`CheckedReply` (the turn, the calls as the earlier checks left them, how the
reply ended) and says one of three things:

* :class:`Pass`: nothing to change; the next check runs.
* :class:`Revise`: go on with these calls (some dropped, repaired, held back or coerced), and
  say why in ``notes`` (the turn's warnings).
* :class:`Reask`: the reply cannot be returned as it is: these problems are sent back to the
  model, and no later check runs.

A check that re-asks only once looks itself up in the turn's ledger,
:attr:`~toolshim.engine.turn.Turn.reasked`, which :func:`toolshim.engine.checks.run_checks`
keeps: each check that asked for a re-ask, by name, with the calls of the reply it re-asked.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from toolshim.dialects.interpret import ParsedCall
from toolshim.engine.turn import Turn

__all__ = ["PASS", "Check", "CheckedReply", "Outcome", "Pass", "Reask", "Revise", "revised"]


@dataclass(frozen=True, slots=True)
class CheckedReply:
    """A reply's calls as a check reads them.

    ``native``: the upstream's own tool calls (or calls rescued from a native reply's text),
    held to the request's rules only, not to the dialect's. ``continued``: one call judged alone
    before it is added to a reply (:func:`toolshim.engine.more_calls.valid_call`: a call the
    reply was continued for, a step toolshim asked for); it is dropped, never re-asked, and
    what was changed in it is not the caller's warning."""

    turn: Turn
    calls: tuple[ParsedCall, ...]
    finish: str | None = None
    native: bool = False
    continued: bool = False

    def warn(self, message: str) -> None:
        """Add ``message`` to the turn's warnings (not for a continued call)."""
        if not self.continued:
            self.turn.warn(message)


@dataclass(frozen=True, slots=True)
class Pass:
    """Nothing to change: the next check runs on the same calls."""


PASS = Pass()


@dataclass(frozen=True, slots=True)
class Revise:
    """The next checks run on ``calls`` (and ``finish``); ``notes`` say what was changed."""

    calls: tuple[ParsedCall, ...]
    finish: str | None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Reask:
    """The reply is sent back with ``problems``; ``calls``: those that passed (None: the
    reply's calls as they were)."""

    problems: tuple[str, ...]
    calls: tuple[ParsedCall, ...] | None = None


Outcome = Pass | Revise | Reask


@dataclass(frozen=True, slots=True)
class Check:
    """One check: ``run`` reads a reply and returns an outcome.

    ``native``: it also runs on native calls (most checks hold an emulated reply to what the
    prompt asked of it). ``continued``: it also judges a call alone before it is added to a
    reply (:func:`toolshim.engine.more_calls.valid_call`)."""

    name: str
    run: Callable[[CheckedReply], Outcome]
    native: bool = False
    continued: bool = False


def revised(reply: CheckedReply, calls: Sequence[ParsedCall], notes: Sequence[str] = ()) -> Outcome:
    """:class:`Revise` with ``calls`` and ``notes``, or :data:`PASS` when there are no notes
    and ``calls`` are the reply's own objects (equal is not enough: ``1 == 1.0 == True``, and
    a coerced argument must go on coerced)."""
    kept = tuple(calls)
    if not notes and len(kept) == len(reply.calls) and all(map(operator.is_, kept, reply.calls)):
        return PASS
    return Revise(kept, reply.finish, tuple(notes))
