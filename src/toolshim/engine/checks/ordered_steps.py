"""Check ``ordered_steps``: a later step that needs an earlier one's result waits for it.

"Get the capital of Egypt and then the weather there", "find her user id first", "get the USD
price, then convert it": the 0.5B wrote the whole chain in its first reply, the later calls
with values it had not been given or had not got yet: ``get_weather(city="Egypt")``,
``convert_currency(amount=1, …)`` for "one AAPL share", ``lookup_order(order_id="123")``.
Those failed or were wrong, and it answered from them (5 of its 9 failed two-call chains on
the agent suite). Each passed the made-up values check: "Egypt" *was* said, and so was "one".

Only required parameters count (an option the model sets is not what carries a result
along). Ordering words alone do not make a step wait: 97 of BFCL's 199 ``parallel_multiple``
questions say "then" or "first" between independent requests ("Find all prime numbers
between 50 and 150. Then get the fibonacci series upto 150."), whose calls go out together.
So, when the user's message orders steps (:func:`orders_steps`) and this is the request's
first step (its last message is the user's), a call of a tool other than the first call's
waits (:func:`waits`) when one of its values

* is not in the user's message (a string none of whose words, or their first five letters,
  it writes; a number it does not write, read as numbers are read: ``1`` for "one",
  ``"123"``, the ``"Oslo"`` the capital call will give), or
* is one an earlier call of the reply took under another parameter, where that call's tool
  says it gives this parameter (``get_capital``, "the capital *city* of a country", took
  ``country="Egypt"``; ``get_weather(city="Egypt")`` waits; ``find_user``, "a customer's
  *user id* from their username", took ``username="alice"``; ``list_orders(user_id="alice")``
  waits).

The reply is cut at the first call that waits; the calls cut are remembered as the model's
plan (:mod:`toolshim.engine.plans`): once the results are in, an answer is opened as the next
step's call. A reply continued for more calls stops at such a call the same way
(:mod:`toolshim.engine.more_calls`). A coding agent's turn has its own rule (:mod:`.first_step`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from toolshim.dialects.interpret import ParsedCall
from toolshim.engine.checks.base import PASS, Check, CheckedReply, Outcome, Reask, Revise
from toolshim.engine.checks.made_up import stem_said, with_stems
from toolshim.engine.checks.unused_numbers import said_numbers
from toolshim.engine.turn import Turn
from toolshim.json_walk import json_values
from toolshim.types import ChatRequest

__all__ = ["CHECK", "NAME", "first_step_tool", "orders_steps", "request_orders_steps", "waits"]

NAME = "ordered_steps"

_ORDER = re.compile(
    r"\b(?:then|afterwards?|after\s+that|next,|once\s+you\s+(?:have|know|get)|"
    r"(?:using|with|from)\s+(?:that|the|its|this)\s+(?:result|answer|value|id)\b|"
    r"first\s*(?:[.,;:!?)]|$)|first\s+(?:look|find|get|check|call|fetch|search|convert))",
    re.IGNORECASE,
)
"""Words that order steps: "then", "after that", "first" ending a clause or before a verb of
looking up ("look up the capital first", "first find the id"); not "the first three"."""
_WORD = re.compile(r"[a-z0-9]+")


def orders_steps(text: str) -> bool:
    """Whether ``text`` orders steps, one after another (see :data:`_ORDER`)."""
    return _ORDER.search(text) is not None


def request_orders_steps(request: ChatRequest) -> bool:
    """Whether ``request`` is a first step (its last message is the user's) of a request that
    orders its steps."""
    messages = request.messages
    return bool(messages) and messages[-1].role == "user" and orders_steps(messages[-1].text)


_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_NAME_WORD = re.compile(r"[a-z]{4,}")
_STEP_ORDER = re.compile(
    r"\b(?:then|afterwards?|after\s+that)\b|"
    r"\bfirst\s*(?:[.,;:!?)]|$)|\bfirst\s+(?:look|find|get|check|call|fetch|search|convert)",
    re.IGNORECASE,
)
"""The words that say which step comes first ("then", "first"; not "with the value", which
makes a later step use a result without saying where the first ends)."""
_VERBS = frozenset(
    [
        "find",
        "finder",
        "fetch",
        "list",
        "lookup",
        "look",
        "search",
        "check",
        "calculate",
        "compute",
        "retrieve",
        "show",
    ]
)
"""Words of tool names that say how, not what: "find" is in "Find the statistical
significance" and in ``event_finder_find_upcoming``."""


def first_step_tool(request: ChatRequest) -> str | None:
    """The offered tool the first of the steps ``request`` orders asks for (a first step:
    its last message is the user's), or None: the sentence's clause before "then" ("Get the
    USD price, then convert it"), or the clause "first" ends ("Look up the capital first"),
    holding a word of four letters or more of one tool's name and of no other's (its first
    five letters will do: "price" for ``get_stock_price``, "capital" for ``get_capital``)."""
    if not request_orders_steps(request):
        return None
    text = request.messages[-1].text
    found = _STEP_ORDER.search(text)
    if found is None:
        return None
    if found.group().lower().startswith("first"):  # the sentence "first" is in
        clause = (
            _SENTENCE.split(text[: found.start()])[-1] + _SENTENCE.split(text[found.start() :])[0]
        )
    else:
        clause = _SENTENCE.split(text[: found.start()])[-1]
    words = with_stems(_WORD.findall(clause.lower()))
    named = [
        t.name
        for t in request.function_tools
        if any(
            stem_said(w, words)
            for w in _NAME_WORD.findall(t.name.lower().replace("_", " "))
            if w not in _VERBS
        )
    ]
    return named[0] if len(named) == 1 else None


def waits(turn: Turn, call: ParsedCall, earlier: Sequence[ParsedCall]) -> bool:
    """Whether ``call``, after ``earlier`` in one reply to a request that orders its steps,
    needs a result not in yet (see the module docstring). Never a call of the first call's
    tool, nor in a coding agent's turn or a request that does not order its steps."""
    if (
        not earlier
        or call.name == earlier[0].name
        or turn.one_step
        or not isinstance(call.arguments, Mapping)
        or not request_orders_steps(turn.request)
    ):
        return False
    text = turn.request.messages[-1].text
    words = with_stems(_WORD.findall(text.lower()))
    numbers = {v for _, values in said_numbers(text) for v in values}
    required = _required(turn, call.name)
    for parameter, value in call.arguments.items():
        if required is not None and parameter not in required:
            continue  # an option the model set: not what carries a result along
        for leaf in json_values(value):
            if isinstance(leaf, bool) or leaf is None:
                continue
            if isinstance(leaf, str):
                unsaid = not any(stem_said(w, words) for w in _WORD.findall(leaf.lower()))
            else:
                unsaid = isinstance(leaf, int | float) and float(leaf) not in numbers
            if unsaid or _given_by(turn, parameter, leaf, earlier):
                return True
    return False


def _required(turn: Turn, name: str) -> set[str] | None:
    """The parameters ``name``'s schema requires (None: it lists none, so all count)."""
    tool = next((t for t in turn.request.function_tools if t.name == name), None)
    required = tool.parameters.get("required") if tool is not None else None
    if not isinstance(required, list) or not required:
        return None
    return {r for r in required if isinstance(r, str)}


def _given_by(turn: Turn, parameter: str, value: object, earlier: Sequence[ParsedCall]) -> bool:
    """Whether an earlier call took ``value`` under another parameter and its tool's name or
    description holds every word of ``parameter`` (``city`` in "The capital city of a
    country")."""
    wanted = set(_WORD.findall(parameter.lower().replace("_", " ")))
    descriptions = {t.name: t.description or "" for t in turn.request.function_tools}
    for call in earlier:
        if not isinstance(call.arguments, Mapping):
            continue
        took = [
            k
            for k, v in call.arguments.items()
            if k != parameter and any(leaf == value for leaf in json_values(v))
        ]
        if not took:
            continue
        gives = set(_WORD.findall(f"{call.name} {descriptions.get(call.name, '')}".lower()))
        if wanted and wanted <= gives:
            return True
    return False


def _run(reply: CheckedReply) -> Outcome:
    calls = reply.calls
    turn = reply.turn
    if not calls or turn.one_step or not request_orders_steps(turn.request):
        return PASS
    first = first_step_tool(turn.request)
    if first is not None and all(c.name != first for c in calls):
        # Only later steps, written with what the model guessed their input to be: the 1.5B,
        # "Get the USD price, then convert it", wrote convert_currency(amount=1, …) alone.
        if reply.continued:
            return PASS
        if turn.reasked:
            # Re-asked already (for this, or for values nobody gave) and still only later
            # steps: the first one is opened as its call where the upstream continues a reply
            # (toolshim.engine.next_step), else the reply goes on to the other checks. The
            # 0.5B, "Look up the capital first", wrote get_weather(city="Tokyo") three times.
            if turn.can_open and turn.request.choice.kind == "auto":
                turn.answer_now = True
                return Revise(
                    (),
                    reply.finish,
                    (
                        f"the model wrote only later steps again; the request's first, "
                        f"{first!r}, is opened as its call",
                    ),
                )
            return PASS
        return Reask(
            (
                f"the request asks for {first!r} first: call it now, and the later steps "
                "once its result is in",
            ),
            (),
        )
    if len(calls) < 2:
        return PASS
    # Calls written before the step the request puts first did not wait for its result: the
    # 1.5B, "Get the USD price, then convert it", wrote convert_currency(amount=1, …) first.
    at = next((i for i, c in enumerate(calls) if c.name == first), 0)
    ahead, rest = calls[:at], calls[at:]
    cut = next((i for i in range(1, len(rest)) if waits(turn, rest[i], rest[:i])), len(rest))
    later = (*ahead, *rest[cut:])
    if not later:
        return PASS
    if not reply.continued:
        turn.held_back.extend(dict.fromkeys(c.name for c in later))
    names = ", ".join(dict.fromkeys(repr(c.name) for c in later))
    why = (
        f"{rest[0].name!r} comes first"
        if ahead
        else f"{rest[cut].name!r} needs a value not given yet"
    )
    return Revise(
        rest[:cut],
        reply.finish,
        (
            f"one step at a time: the request orders its steps and {why}; later call(s) "
            f"{names} left for the next turn",
        ),
    )


CHECK = Check(NAME, _run)
