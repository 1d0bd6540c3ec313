"""The checks on a model's calls, as one ordered list run by :func:`run_checks`.

Each check is a module here that defines ``CHECK`` (:class:`~.base.Check`: a name and a
function from the reply to an outcome, :mod:`.base`), and one entry in :data:`CHECKS`. The
checks run in this order, each on the calls the ones before it left::

    repeats_in_reply       N  a call written several times in one reply is read once
    waiting                 C a call with another call as its argument waits for its result
    first_step                a coding agent's step: the first call and those ready now
    ordered_steps             a request that orders its steps: one tool at a time
    paths                     a coding agent's file path above the working directory, moved
    undeclared_arguments    C arguments the schema does not declare, dropped
    schema                 NC names, JSON Schema, tool_choice and limits (re-asks)
    quoted                    a call copied from a tool result (re-asks)
    placeholders            C a required parameter filled with a placeholder (re-asks)
    file_syntax               a file written whole that its kind cannot read (re-asks once)
    number_content          C a file asked to hold a number, written with more (mended or re-asked)
    example_copies            the prompt's own example call (re-asks)
    answered_repeats          a call whose result is in (re-asks once; then answer now)
    made_up                   values nobody gave (held back, or re-asks once)
    unused_numbers            numbers the user gave that no call uses (re-asks once)
    local_names               a path where the tool's doc takes a name: into its folder first

``N``: it also runs on a native reply's calls (:mod:`toolshim.engine.native`,
:mod:`toolshim.engine.relay`), which are held to the request's rules, not to the prompt's.
``C``: it also judges a call alone before it joins a reply (a call the reply was continued
for, :mod:`toolshim.engine.more_calls`), which is dropped where a reply would be re-asked.

The first check that asks for a re-ask ends the run: its problems are the correction
(:func:`toolshim.engine.validate.reask_message`), and it is written in the turn's one re-ask
ledger, :attr:`~toolshim.engine.turn.Turn.reasked` (the check's name, with the calls of the
reply it re-asked), where a check that re-asks once looks itself up. Whether the re-ask is
sent is the :mod:`~toolshim.engine.driver`'s.

A new check is a module here with its ``CHECK`` and a line in :data:`CHECKS`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import assert_never

from toolshim.dialects.interpret import ParsedCall
from toolshim.engine.checks import (
    answered_repeats,
    example_copies,
    file_syntax,
    first_step,
    local_names,
    made_up,
    number_content,
    ordered_steps,
    paths,
    placeholders,
    quoted,
    repeats_in_reply,
    schema,
    undeclared_arguments,
    unused_numbers,
    waiting,
)
from toolshim.engine.checks.base import Check, CheckedReply, Pass, Reask, Revise
from toolshim.engine.turn import Turn, call_key
from toolshim.engine.validate import Verdict

__all__ = ["CHECKS", "CONTINUED", "run_checks"]

CHECKS: tuple[Check, ...] = (
    repeats_in_reply.CHECK,
    waiting.CHECK,
    first_step.CHECK,
    ordered_steps.CHECK,
    paths.CHECK,
    undeclared_arguments.CHECK,
    schema.CHECK,
    quoted.CHECK,
    placeholders.CHECK,
    file_syntax.CHECK,
    number_content.CHECK,
    example_copies.CHECK,
    answered_repeats.CHECK,
    made_up.CHECK,
    unused_numbers.CHECK,
    local_names.CHECK,
)
"""Every check, in the order they run (see the module docstring)."""

CONTINUED: tuple[Check, ...] = tuple(c for c in CHECKS if c.continued)
"""The checks a call judged alone before it joins a reply must pass, in the same order
(:func:`toolshim.engine.more_calls.valid_call`: a continued call, a step toolshim asked for)."""


def run_checks(
    turn: Turn,
    calls: Sequence[ParsedCall],
    finish: str | None = None,
    *,
    native: bool = False,
    continued: bool = False,
    checks: Sequence[Check] | None = None,
) -> Verdict:
    """Run ``checks`` in order on a reply's ``calls``: the calls that passed, and the problems
    of the first check that asked for a re-ask (written in :attr:`Turn.reasked`, unless the
    call is ``continued``). ``native``: only the checks that run on native calls. ``checks``:
    :data:`CHECKS` unless given."""
    reply = CheckedReply(turn, tuple(calls), finish, native=native, continued=continued)
    notes: list[str] = []
    for check in CHECKS if checks is None else checks:
        if native and not check.native:
            continue
        match check.run(reply):
            case Pass():
                pass
            case Revise(calls=revised_calls, finish=revised_finish, notes=said):
                for note in said:
                    reply.warn(note)
                notes += said
                reply = replace(reply, calls=revised_calls, finish=revised_finish)
            case Reask(problems=problems, calls=passed):
                kept = reply.calls if passed is None else passed
                if not continued:
                    turn.reasked[check.name] = frozenset(
                        call_key(c.name, c.arguments_json) for c in kept
                    )
                return Verdict(kept, problems, tuple(notes))
            case outcome:
                assert_never(outcome)
    return Verdict(reply.calls, (), tuple(notes))
