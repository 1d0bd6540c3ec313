"""Check ``named_ids``: an id parameter given a name, where the id is to be looked up first.

Asked for "the orders of user bob (look up his user id, then his orders)", the 0.5B called
``list_orders(user_id="bob")``, beside ``find_user(username="bob")`` or alone; told a turn
earlier "my username is carol", the 1.5B called ``list_orders(user_id="carol")`` and answered
the error ("unknown user id 'carol'") instead of looking carol up. In BFCL's
``multi_turn_base_14`` it wrote ``add_contact(user_name='John Levy')`` and
``send_message(receiver_id='John Levy', …)`` in one reply, where the id to send to
(``USR005``) is what ``add_contact`` returns.

A parameter named as an id (``user_id``, ``receiver_id``, ``customerId``; not ``id`` alone)
given a name (letters, spaces and ``'-.``, no digit) that the conversation gave:

* beside a call that passes the same name under a parameter not named as an id (the lookup
  made in the same reply), it is held back until that call's result is in, as
  :mod:`.made_up` holds back a call that needs a result of the calls beside it (the model is
  asked for it again once the results are in: :mod:`toolshim.engine.plans`);
* alone, when another offered tool reads as that id's lookup (its description names the id,
  ``user id`` for ``user_id``, and it takes a name: a parameter named with ``name``), the
  reply is re-asked once, naming that tool. Written again, the call goes out: some APIs take
  a name as the id.

Only under ``tool_choice: "auto"`` (a forced call is wanted as written), and not for a
coding agent's step.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from toolshim.dialects.interpret import ParsedCall
from toolshim.engine.checks.base import PASS, Check, CheckedReply, Outcome, Reask, Revise
from toolshim.engine.turn import Turn
from toolshim.types import ToolSpec

__all__ = ["CHECK", "NAME", "named_ids"]

NAME = "named_ids"

_ID_PARAMETER = re.compile(r"(?P<stem>[A-Za-z][A-Za-z0-9]*?)_?(?:id|Id|ID)")
"""A parameter named as an id of something (``user_id``, ``customerId``), with its stem."""
_A_NAME = re.compile(r"[^\W\d_]+(?:[ '.-]+[^\W\d_]+)*")
"""A name: words of letters, no digit (``carol``, ``John Levy``, ``O'Brien``)."""


def named_ids(call: ParsedCall) -> list[tuple[str, str, str]]:
    """``(parameter, stem, name)`` for each id parameter of ``call`` given a name."""
    if not isinstance(call.arguments, Mapping):
        return []
    out = []
    for key, value in call.arguments.items():
        id_parameter = _ID_PARAMETER.fullmatch(key)
        if id_parameter and isinstance(value, str) and _A_NAME.fullmatch(value.strip()):
            out.append((key, id_parameter["stem"].lower(), value.strip()))
    return out


def _passed_as_name(name: str, calls: Sequence[ParsedCall], own: ParsedCall) -> bool:
    """Whether another of ``calls`` passes ``name`` under a parameter not named as an id."""
    return any(
        isinstance(other.arguments, Mapping)
        and any(
            isinstance(value, str)
            and value.strip().lower() == name.lower()
            and not _ID_PARAMETER.fullmatch(key)
            for key, value in other.arguments.items()
        )
        for other in calls
        if other is not own
    )


def _lookup_tool(stem: str, own: str, tools: Sequence[ToolSpec]) -> str | None:
    """An offered tool, not ``own``, that reads as the lookup of a ``stem`` id from a name."""
    named = re.compile(rf"\b{re.escape(stem)}[ _-]?ids?\b", re.IGNORECASE)
    for tool in tools:
        if tool.name == own or not tool.is_function or not named.search(tool.description):
            continue
        properties = tool.parameters.get("properties")
        if isinstance(properties, Mapping) and any(
            "name" in key.lower() and not _ID_PARAMETER.fullmatch(key) for key in properties
        ):
            return tool.name
    return None


def _said(turn: Turn, name: str) -> bool:
    pattern = re.compile(rf"(?<!\w){re.escape(name)}(?!\w)", re.IGNORECASE)
    return any(pattern.search(m.text) for m in turn.request.messages)


def _run(reply: CheckedReply) -> Outcome:
    turn = reply.turn
    if turn.request.choice.kind != "auto" or turn.one_step or reply.continued:
        return PASS
    held: list[int] = []
    notes: list[str] = []
    problems: list[str] = []
    for index, call in enumerate(reply.calls):
        for parameter, stem, name in named_ids(call):
            if _passed_as_name(name, reply.calls, call):
                held.append(index)
                notes.append(
                    f"held back {call.name}({parameter}={name!r}): {parameter!r} takes an id "
                    f"and {name!r} is a name another call of the reply looks up; it waits "
                    "for that call's result"
                )
                break
            lookup = _lookup_tool(stem, call.name, turn.request.function_tools)
            if lookup is not None and NAME not in turn.reasked and _said(turn, name):
                problems.append(
                    f"{call.name}'s {parameter!r} takes an id, and {name!r} is a name, not an "
                    f"id: {lookup!r} looks the id up; call {lookup!r} first, then "
                    f"{call.name!r} with the id its result gives (if {name!r} is the id, "
                    "write the same call again)"
                )
                break
    if problems:
        return Reask(tuple(problems))
    if not held or len(held) == len(reply.calls):
        return PASS
    turn.held_back.extend(reply.calls[i].name for i in held)
    kept = tuple(c for i, c in enumerate(reply.calls) if i not in held)
    return Revise(kept, reply.finish, tuple(notes))


CHECK = Check(NAME, _run)
