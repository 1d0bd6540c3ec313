"""The steps a model planned and toolshim held back, remembered until their inputs are in.

Asked which orders alice has, the 1.5B writes ``find_user(username="alice")`` and
``list_orders(user_id="12345")`` in one reply. The second is held back (:mod:`.checks.made_up`:
its id is nobody's yet) on the promise that the model asks for it again once the first result
is in. It does not: given ``u-17``, it answers "alice has the user id u-17" (4 of its 6 failed
two-call chains on the agent suite, and the three-call chains too).

So the engine remembers each held-back step under the conversation it was written in: the
user's words and the calls made so far, with the calls returned (a digest: neither the
results nor the system prompt, which a client or the brief may rewrite, and never the call
ids, which Anthropic and Responses clients rename). A later request whose history holds
that reply finds the steps it left (:meth:`PlanMemory.pending`): planned after the user's
last message, not taken since (no call of that tool after the reply), and no error among
the results since (a plan is made on the promise that its first steps work; after
``unknown user`` the answer is the error). A text answer there is handed back opened as the
first such step's call (:func:`planned_opening`, :mod:`.next_step`); the call it writes is returned when it passes
every check a continued call passes (its values must be in the conversation now).

The memory is per process and bounded (:data:`MAX_PLANS`, oldest out first); a replica
that did not see the plan serves the request as before. It holds tool names only.

A step that failed before its input was in is left the same way, read from the history alone
(:func:`failed_steps`): the 0.5B wrote ``get_capital("Egypt")`` and ``get_weather("Egypt")``
in one reply, or ``list_orders("alice")`` before ``find_user("alice")``; the weather of
"Egypt" and the orders of "alice" failed, the capital and the user id came back, and it
answered with those. A tool whose call failed, with no call of it that worked since, is left
when a call that worked was made no earlier than the failed one (its result is what the
failed call lacked); opened, the same failed call written again is not taken.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any

from toolshim.dialects.base import OPEN_HERE
from toolshim.engine.checks.ordered_steps import orders_steps
from toolshim.engine.files_named import request_index
from toolshim.engine.history import is_error_result
from toolshim.engine.more_calls import tool_named
from toolshim.engine.outcomes import call_outcomes
from toolshim.engine.turn import Turn, call_key
from toolshim.types import Message

__all__ = [
    "MAX_PLANS",
    "PlanMemory",
    "chained_value",
    "described_tool",
    "failed_steps",
    "planned_opening",
    "planned_warning",
    "steps_left",
    "tries_planned_step",
]

MAX_PLANS = 4096
"""Conversations whose held-back steps are remembered (a few hundred bytes each)."""


def _digest(messages: Sequence[Message], calls: Iterable[tuple[str, str]]) -> str:
    """The conversation ``messages`` and a reply's ``calls`` (as :func:`call_key`) as a key:
    the users' words and the calls, in order."""
    parts: list[Any] = []
    for message in messages:
        if message.role == "user":
            parts.append(["u", " ".join(message.text.split())])
        elif message.tool_calls:
            parts.append(["c", [call_key(c.name, c.arguments) for c in message.tool_calls]])
    parts.append(["r", [list(c) for c in calls]])
    encoded = json.dumps(parts, ensure_ascii=False, separators=(",", ":")).encode()
    return hashlib.sha256(encoded).hexdigest()


class PlanMemory:
    """Held-back steps by the conversation that held them (see the module docstring)."""

    def __init__(self, size: int = MAX_PLANS) -> None:
        self._size = size
        self._plans: OrderedDict[str, tuple[str, ...]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._plans)

    def remember(
        self,
        messages: Sequence[Message],
        returned: Sequence[tuple[str, str]],
        held: Sequence[str],
    ) -> None:
        """``held``: the names of the steps held back from the reply whose calls ``returned``
        (name, arguments JSON) went to the caller after ``messages``."""
        names = tuple(dict.fromkeys(n for n in held if n not in {c[0] for c in returned}))
        if not names or not returned:
            return
        key = _digest(messages, (call_key(*c) for c in returned))
        self._plans[key] = names
        self._plans.move_to_end(key)
        while len(self._plans) > self._size:
            self._plans.popitem(last=False)

    def pending(self, messages: Sequence[Message]) -> tuple[str, ...]:
        """The steps planned since the user's last message and not taken yet, in order."""
        if not self._plans:
            return ()
        start = request_index(messages)
        if start is None:
            return ()
        planned: list[str] = []
        for i in range(start + 1, len(messages)):
            message = messages[i]
            if message.role != "assistant" or not message.tool_calls:
                continue
            calls = (call_key(c.name, c.arguments) for c in message.tool_calls)
            names = self._plans.get(_digest(messages[:i], calls))
            if names is None:
                continue
            later = messages[i + 1 :]
            if any(m.role in ("tool", "function") and is_error_result(m.text) for m in later):
                continue  # a step failed: the plan's promise is broken
            taken = {c.name for m in later for c in m.tool_calls}
            planned += [n for n in names if n not in taken and n not in planned]
        return tuple(planned)


def failed_steps(messages: Sequence[Message]) -> tuple[str, ...]:
    """The tools whose call failed since the user's last message and that are left to call
    again with what a later result gave (see the module docstring)."""
    outcomes = call_outcomes(messages)
    left: list[str] = []
    for failed in outcomes:
        if failed.worked or failed.name in left:
            continue
        later = [o.name for o in outcomes if o.worked and o.position >= failed.position]
        if later and failed.name not in later:
            left.append(failed.name)
    return tuple(left)


def chained_value(messages: Sequence[Message], name: str, parameter: str) -> str | None:
    """The value a failed call of ``name`` lacked, where a later lookup gave it: the failed
    call's ``parameter`` held a value (``"Egypt"``) that a call which worked, made no earlier,
    took as an argument (``get_capital(country="Egypt")``), and that call's JSON result holds
    exactly one string it was not given (``"Cairo"``). Handed ``{"city": "`` to go on from,
    the 0.5B wrote "Egypt" again each time; the value is written for it, and it closes the
    call (or changes it). A result in words gives its one id-like token ("User bob has id
    u-42": the 0.5B wrote ``list_orders(user_id="bob")`` again). None when that is not
    so."""
    outcomes = call_outcomes(messages)
    failed = next((o for o in reversed(outcomes) if o.name == name), None)
    if failed is None or not isinstance(failed.arguments, dict):
        return None
    value = failed.arguments.get(parameter)
    if not isinstance(value, str) or not value:
        return None
    found: set[str] = set()
    for lookup in outcomes:
        if lookup.position < failed.position or not lookup.worked:
            continue
        given = lookup.arguments.values() if isinstance(lookup.arguments, dict) else ()
        if value not in given:
            continue
        try:
            result = json.loads(lookup.result)
        except ValueError:
            # A result in words ("User bob has id u-42"): its one token with a digit in it.
            tokens = _ID_TOKEN.findall(lookup.result)
            found |= {t for t in tokens if t not in given}
            continue
        leaves = result.values() if isinstance(result, dict) else ()
        found |= {v for v in leaves if isinstance(v, str) and v and v not in given}
    return found.pop() if len(found) == 1 else None


_ID_TOKEN = re.compile(r"(?<![\w.-])[A-Za-z][\w-]*\d[\w-]*|(?<![\w.-])\d+(?:-\w+)+")
"""An id in a sentence: letters then a digit (``u-42``, ``AB123``), or digits joined by a
dash to more (``2024-05``); not a plain number, which a sentence gives as an amount."""


def steps_left(
    memory: PlanMemory,
    messages: Sequence[Message],
    *,
    coding: bool = False,
    tools: Sequence[str] = (),
) -> tuple[str, ...]:
    """The steps an answer to ``messages`` is opened as: planned and held back, failed
    before their input was in, named by a request that orders its steps
    (:func:`named_steps`), or named by the user and by the last call's error
    (:func:`fixing_steps`; ``tools``: the names offered). Not the failed or named ones of a
    ``coding`` agent's turn: a command that failed (a test run) failed for the code, not for
    a value it lacked, and the step left is the fix (:mod:`.next_step`)."""
    start = request_index(messages)
    if start is None or start == len(messages) - 1:
        return ()  # nothing since the user's message: no step was taken, none is left
    if coding:
        return memory.pending(messages)
    found = (
        *memory.pending(messages),
        *failed_steps(messages),
        *named_steps(messages, tools),
        *fixing_steps(messages, tools),
    )
    return tuple(dict.fromkeys(found))


def fixing_steps(messages: Sequence[Message], tools: Sequence[str]) -> tuple[str, ...]:
    """The tools that may fix the last call's failure: not called since the user's message,
    named by a word of their name in both the error and the user's words. Asked "List the
    orders of user bob (look up his user id, then his orders)", the 0.5B called
    ``list_orders(user_id="bob")``, was told "unknown user id 'bob'; user ids look like
    'u-17'", wrote the same call twice more and answered with the error; ``find_user`` was
    never called."""
    start = request_index(messages)
    outcomes = call_outcomes(messages)
    if start is None or not outcomes or outcomes[-1].worked:
        return ()
    said = " ".join(messages[start].text.lower().split())
    error = outcomes[-1].result.lower()
    called = list(dict.fromkeys(o.name for o in outcomes))
    return tuple(
        n
        for n in tools
        if n not in called and tool_named(n, called, said) and tool_named(n, called, error)
    )


def named_steps(messages: Sequence[Message], tools: Sequence[str]) -> tuple[str, ...]:
    """The tools a request that orders its steps names and no call has used since, once
    calls have been made and all of them worked: "get the USD price, *then convert* it" —
    given the price, the 0.5B answered "AAPL is trading at 191.25 USD" without converting it.
    A tool is named by a word of its name (:func:`~toolshim.engine.more_calls.tool_named`)."""
    start = request_index(messages)
    if start is None or start == len(messages) - 1:
        return ()
    said = " ".join(messages[start].text.lower().split())
    if not orders_steps(said):
        return ()
    outcomes = call_outcomes(messages)  # (those since the user's message)
    if not outcomes or not all(o.worked for o in outcomes):
        return ()
    called = list(dict.fromkeys(o.name for o in outcomes))
    return tuple(n for n in tools if n not in called and tool_named(n, called, said))


def tries_planned_step(turn: Turn) -> bool:
    """Whether a text answer of this turn is handed back opened as its planned step."""
    return bool(turn.planned) and turn.can_open


def described_tool(turn: Turn, answer: str) -> str | None:
    """An offered tool the ``answer`` tells the user to call, not called since the user's
    last message: asked for the weather "where I'm going" (Tokyo, said a turn before), the
    1.5B answered "To get the weather for Tokyo, you can call the `get_weather` function with
    the city name "Tokyo"." Named as code (```get_weather``, ```get_weather --x``,
    ``get_weather(``) or as what to call or use; a name of one or two letters (``ls``) only
    as code; the first named wins. Not in a coding agent's turn (its answers name its
    tools to explain). Tried and not kept: a fenced block's command or a bracketed line
    naming a tool (BFCL's file system, ```sh grep …```, ``[mv log.txt archive]``): the 1.5B
    then made the calls, which failed for want of a ``cd`` (0/5 multi-turn cases either way,
    2.4 LLM calls a turn against 2.1; docs/results.md)."""
    if turn.one_step or not answer or not turn.can_open:
        return None
    messages = turn.request.messages
    start = request_index(messages)
    called = {c.name for m in messages[(start or 0) + 1 :] for c in m.tool_calls}
    found: list[tuple[int, str]] = []
    for tool in turn.request.function_tools:
        if tool.name in called:
            continue
        name = re.escape(tool.name)
        # A name of one or two letters (``ls``, ``cd``, ``wc``) only as code: "you can use the
        # `ls` command" (the 1.5B, asked to list a folder's files "using the terminal
        # interface"), not "use cd" nor a word's letters.
        code = rf"`{name}[`\s]|`{name}\s*\("
        words = rf"|\b{name}\s*\(|\b(call|use|using|calling|invoke|run)\s+(the\s+)?`?{name}\b"
        named = re.search(code if len(tool.name) < 3 else code + words, answer, re.IGNORECASE)
        if named:
            found.append((named.start(), tool.name))
    return min(found)[1] if found else None


def planned_opening(turn: Turn, answer: str = "") -> tuple[str, str] | None:
    """The step an answer of this turn is opened as: its tool's name and the opening of its
    call, or None. The first planned step (:attr:`Turn.planned`), else the tool the answer
    tells the user to call (:func:`described_tool`). Opened up to the value of its first
    required parameter when that is a string
    (:meth:`~toolshim.dialects.base.Dialect.opening_at`): handed ``[list_orders(``, the 1.5B
    wrote ``[list_orders( u-17 )]`` and ``[list_orders(lookup_order("u-17"))]``."""
    tools = turn.request.function_tools
    tool = None
    if tries_planned_step(turn):
        tool = next((t for n in turn.planned for t in tools if t.name == n), None)
    if tool is None:
        described = described_tool(turn, answer)
        tool = next((t for t in tools if t.name == described), None)
    if tool is None:
        return None
    properties = tool.parameters.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    required = [p for p in tool.parameters.get("required") or () if isinstance(p, str)]
    first = required[0] if required else None
    if first is not None and (properties.get(first) or {}).get("type") != "string":
        first = None  # a number is written as it is: opened up to the arguments
    prefill = None
    if first is not None:
        value = chained_value(turn.request.messages, tool.name, first) or ""
        prefill = turn.dialect.opening_at(tool.name, {first: value + OPEN_HERE})
    prefill = prefill or turn.dialect.call_opening(tool.name)
    return (tool.name, prefill) if prefill else None


def planned_warning(name: str, written: str) -> str:
    return (
        f"the model answered where a step was left ({name!r}: held back from its plan, "
        f"failed until the results it needed were in, or named in its answer as the call to "
        f"make); opened as that call, it wrote {written!r}"
    )
