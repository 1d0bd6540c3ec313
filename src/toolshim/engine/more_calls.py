"""More calls in one reply, by continuing it: the model's calls handed back as the start of its
own reply, followed by the opening of one more call.

Small models write one call where a request needs several. Measured on Qwen2.5-Coder-0.5B
under hermes (BFCL ``parallel``): asked for the temperature in Seattle and in Los Angeles, it
writes one ``<tool_call>`` block and ends; after the block the end of the reply has a
probability of 0.85–1.0 and another ``<tool_call>`` under 0.01 (6 of 6 cases), and no
wording of the prompt changed that (``docs/results.md``, "Several calls from hermes"). Handed
its reply back with ``<tool_call>\\n{"name": "`` after it, it writes the second call right in 5
of those 6 cases (``Los Angeles``, ``base=18, height=24``, case ``67890``).

Continued on a question that needs one call, it writes that call again, a variation nobody
asked for (``transportation="bus"`` for a train, ``closed_status=false``), another tool with
the same values, or placeholders. So a continued call is kept only when all of these hold,
and the first one that fails ends the reply:

* it is valid: a declared tool, its schema, no placeholder or copy of the prompt's example;
* it is not a call the reply already has, nor one string written into several parameters
  (the 0.5B filled every parameter of a second tool with ``"talkative"``);
* it brings a value *the user's last message holds* that *no earlier call of the reply used*
  (a string said in it, word for word, and not part of one used nor holding one, nor an
  earlier call's parameter name (``talkative=true`` uses up "talkative"): ``Boston``
  after ``Boston, MA`` is the same city; or a number written in it), under a parameter that
  earlier calls of the same tool also set: Paris then London for "Paris and London", not
  ``unit="celsius"`` added to the Paris call.

A call of *another tool*, one no earlier call used, is also kept when the user named it: a
word of its name is in the user's message and in no earlier call's name ("the average and the
*standard deviation* of these grades": the same values, two tools). Valid, and not one string
in several parameters, as above.

It is tried only where it can work and where the calls answer the user's own request: the
upstream continues an assistant message that ends the request (registry fact ``prefill``:
the embedded llama.cpp server does), the dialect can write the opening
(:meth:`~toolshim.dialects.base.Dialect.continuation`), the strategy is ``single``, the reply
is not held to a JSON Schema, ``tool_choice`` is ``auto`` or ``required`` with parallel calls
allowed, and the request's last message is the user's (after tool results the model calls
again on its own, one turn at a time). Each continuation is one more request, bounded in
tokens by the length of the calls so far; an upstream failure ends it with the calls in hand.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from toolshim.dialects.interpret import ParsedCall
from toolshim.engine.checks import CONTINUED, run_checks
from toolshim.engine.checks.example_copies import NUMBER
from toolshim.engine.checks.made_up import names_not_written, stem_said, with_stems, written_in
from toolshim.engine.checks.ordered_steps import waits
from toolshim.engine.nocalls import Body
from toolshim.engine.turn import Turn, call_key
from toolshim.errors import ToolshimError
from toolshim.json_walk import json_values
from toolshim.types import Message, Strategy, ToolCall

__all__ = [
    "MAX_CALLS",
    "another_tool_asked_for",
    "asks_for_more",
    "continues",
    "more_asked",
    "more_calls",
    "new_said_value",
    "tool_named",
    "valid_call",
]

log = logging.getLogger(__name__)

MAX_CALLS = 8
"""The most calls a reply is continued to."""

_TOKENS_PER_CALL_CHAR = 0.5
"""A bound on a continued call's tokens per character of the longest call so far (JSON is
dense: about 3 characters a token for Qwen), with :data:`_SPARE_TOKENS` on top."""
_SPARE_TOKENS = 48
_WORD = re.compile(r"[^\W_]+")
_NAME_WORD = 4
"""A tool name's word counts from this length (``get``, ``set``, ``by`` do not)."""
_GENERIC = frozenset(
    [
        "find",
        "search",
        "list",
        "calculate",
        "compute",
        "check",
        "fetch",
        "lookup",
        "look",
        "show",
        "create",
        "make",
        "update",
        "info",
        "information",
        "details",
        "detail",
        "data",
        "value",
        "values",
        "current",
        "result",
        "results",
        "query",
        "tool",
        "function",
        "number",
        "total",
        "analyse",
        "analyze",
        "estimate",
    ]
)
"""Words of tool names that say what any tool does: "find the …" names no tool."""
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
"""The comma of ``1,500``: dropped before numbers are read."""


def continues(turn: Turn) -> bool:
    """Whether this turn's calls may be continued (see the module docstring)."""
    request = turn.request
    return (
        turn.prefill
        and not turn.one_step
        and not turn.constrained
        and turn.strategy is Strategy.SINGLE
        and turn.dialect.continuation(()) is not None
        and request.allows_parallel
        and request.choice.kind in ("auto", "required")
        and bool(request.messages)
        and request.messages[-1].role == "user"
    )


async def more_calls(
    turn: Turn,
    calls: Sequence[ParsedCall],
    extra: Sequence[Message],
    body: Body,
) -> tuple[ParsedCall, ...]:
    """``calls`` and each further call the continued reply brings (see the module docstring).

    ``extra`` are the driver's messages after the history (the re-asks that led to the
    calls); ``body(extra)`` builds the upstream body for them."""
    found = tuple(calls)
    if not found or not continues(turn):
        return found
    said = _user_text(turn)
    while len(found) < MAX_CALLS and asks_for_more(turn, found):
        written = [ToolCall(f"call_{i}", c.name, c.arguments_json) for i, c in enumerate(found)]
        opening = turn.dialect.continuation(written)
        if opening is None:
            break
        prefill, start = opening
        continued = body((*extra, Message("assistant", prefill)))
        request = dict(continued.params)
        limit = "max_completion_tokens" if "max_completion_tokens" in request else "max_tokens"
        request[limit] = _token_bound(request, found)
        try:
            completion = await turn.call(replace(continued, params=request))
        except ToolshimError as exc:  # the calls in hand are a whole, valid answer
            log.warning("continuing the reply for more calls failed: %s", exc)
            break
        text = completion.message.text
        if text.startswith(prefill):  # llama.cpp returns the prefill with its continuation
            text = text[len(prefill) :]
        parsed = turn.dialect.parse(start + text, turn.request.function_tools, markup=turn.markup)
        if not parsed.calls:
            break
        call = valid_call(turn, parsed.calls[0])
        if call is None or not (
            new_said_value(call, found, said) or another_tool_asked_for(call, found, said)
        ):
            break
        if waits(turn, call, found):  # a later step: remembered, asked for once results are in
            turn.held_back.append(call.name)
            break
        found = (*found, call)
    if len(found) > len(calls):
        log.debug("continued the reply: %d more call(s)", len(found) - len(calls))
    return found


def asks_for_more(turn: Turn, calls: Sequence[ParsedCall]) -> bool:
    """Whether the user's last message may ask for more calls than ``calls``
    (:func:`more_asked`). Else no continued call could be kept, and none is asked for: "what
    is the weather in Paris?" cost the 0.5B a request after each first call of the agent
    suite, and "Paris and London?" one more after London's."""
    return more_asked(
        turn.request.messages[-1].text,
        [(c.name, c.arguments) for c in calls],
        [t.name for t in turn.request.function_tools],
    )


def more_asked(text: str, calls: Sequence[tuple[str, Any]], tools: Sequence[str]) -> bool:
    """Whether the user's message ``text`` may ask for more than ``calls`` (each a name and
    its decoded arguments) of the offered ``tools``: it names a tool none of them is
    (:func:`tool_named`), holds a number none took or a capitalised
    word past a sentence's first that none wrote (a name: "Oslo" after Paris's call), or
    lists things ("and", a comma, "or") and one call was made."""
    said = " ".join(text.lower().split())
    called = list(dict.fromkeys(name for name, _ in calls))
    if any(n not in called and tool_named(n, called, said) for n in tools):
        return True
    values = [leaf for _, arguments in calls for leaf in json_values(arguments)]
    numbers = {float(v) for v in values if not isinstance(v, str)}
    strings = " ".join(v.lower() for v in values if isinstance(v, str))
    # (a number an id is written in counts as taken: ``order_id="1001"``)
    if any(
        float(n) not in numbers and not written_in(n, strings)
        for n in NUMBER.findall(_THOUSANDS.sub("", text))
    ):
        return True
    if names_not_written(text, strings):
        return True
    return len(calls) == 1 and _LISTS.search(said) is not None


_LISTS = re.compile(r",|;|&|\band\b|\bor\b|\bvs\b|\bversus\b|\bboth\b|\beach\b|\bplus\b")
"""What joins several things asked for in one message."""


def valid_call(turn: Turn, call: ParsedCall) -> ParsedCall | None:
    """``call`` checked alone by the checks a continued call must pass
    (:data:`toolshim.engine.checks.CONTINUED`: undeclared arguments dropped, schema,
    placeholders), or None."""
    verdict = run_checks(turn, [call], continued=True, checks=CONTINUED)
    if not verdict.ok or len(verdict.calls) != 1:
        return None
    return verdict.calls[0]


def _token_bound(request: Mapping[str, Any], calls: Sequence[ParsedCall]) -> int:
    longest = max(len(c.name) + len(c.arguments_json) for c in calls)
    bound = math.ceil(longest * _TOKENS_PER_CALL_CHAR) + _SPARE_TOKENS
    caller = request.get("max_tokens") or request.get("max_completion_tokens")
    return min(bound, int(caller)) if isinstance(caller, int) and caller > 0 else bound


def _user_text(turn: Turn) -> str:
    return " ".join(turn.request.messages[-1].text.lower().split())


def new_said_value(call: ParsedCall, earlier: Sequence[ParsedCall], said: str) -> bool:
    """Whether ``call`` has a value the user's text ``said`` (lower-cased) holds and no call in
    ``earlier`` used, under a parameter every earlier call of the same tool also sets."""
    if not isinstance(call.arguments, Mapping):
        return False
    key = call_key(call.name, call.arguments_json)
    if any(key == call_key(c.name, c.arguments_json) for c in earlier):
        return False
    if _one_string_in_several_parameters(call.arguments):
        return False
    used = {value for c in earlier for value in _leaves(c.arguments)}
    used |= {" ".join(k.lower().replace("_", " ").split()) for c in earlier for k in c.arguments}
    same_tool = [c for c in earlier if c.name == call.name]
    numbers = {float(n) for n in NUMBER.findall(_THOUSANDS.sub("", said))}
    for key, value in call.arguments.items():
        if any(key not in c.arguments for c in same_tool):
            continue
        for leaf in _leaves(value):
            if leaf in used:
                continue
            if isinstance(leaf, float) and leaf in numbers:
                return True
            if isinstance(leaf, str) and _said(leaf, said) and not _overlaps(leaf, used):
                return True
    return False


def another_tool_asked_for(call: ParsedCall, earlier: Sequence[ParsedCall], said: str) -> bool:
    """Whether ``call`` is of a tool no earlier call used, named by the user: a word of its
    name (four letters or more, or its first five letters) is in ``said`` and in no earlier
    call's name. "The average *and the standard deviation* of these grades" is two tools on
    the same values, which :func:`new_said_value` cannot tell from the 0.5B's
    ``movie_showtimes(location="New York City")`` after a humidity forecast for it."""
    if not isinstance(call.arguments, Mapping) or any(c.name == call.name for c in earlier):
        return False
    if _one_string_in_several_parameters(call.arguments):
        return False
    return tool_named(call.name, [c.name for c in earlier], said)


def tool_named(name: str, earlier: Sequence[str], said: str) -> bool:
    """Whether the user's text ``said`` (lower-cased) names the tool ``name`` apart from the
    tools ``earlier``: a word of its name (four letters or more, or its first five letters) is
    in ``said`` and in no earlier tool's name."""
    taken = {w for n in earlier for w in _name_words(n)}
    words = with_stems(_WORD.findall(said))
    return any(stem_said(w, words) for w in _name_words(name) - taken)


def _name_words(name: str) -> set[str]:
    """``scienceFacts_getDiameter`` → ``science``, ``facts``, ``diameter`` (``get``: too short;
    the verbs and nouns of any tool's name, :data:`_GENERIC`, name none)."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    words = _WORD.findall(spaced.lower())
    return {w for w in words if len(w) >= _NAME_WORD and w not in _GENERIC}


def _one_string_in_several_parameters(arguments: Mapping[str, Any]) -> bool:
    """The same string written into two parameters or more: the 0.5B filling every parameter
    of a second tool with one word of the question (``MBTI_analyse(thinking_vs_feeling=
    "talkative", introverted_vs_extroverted="talkative", …)``)."""
    strings = [v for value in arguments.values() for v in _leaves(value) if isinstance(v, str)]
    return len(strings) != len(set(strings))


def _leaves(value: Any) -> Iterator[str | float]:
    """The scalar values inside ``value``, normalised: strings lower-cased with single spaces,
    numbers as floats; booleans and nulls are not values anyone says."""
    for leaf in json_values(value):
        if not isinstance(leaf, str):
            yield float(leaf)
        elif text := " ".join(leaf.lower().split()):
            yield text


def _overlaps(value: str, used: set[str | float]) -> bool:
    """``value`` is part of a string an earlier call used, or holds one (``boston`` and
    ``boston, ma``): a rewording of the same thing, not a new one."""
    return any(isinstance(u, str) and (_said(value, u) or _said(u, value)) for u in used)


def _said(value: str, text: str) -> bool:
    """``value`` (lower-cased) written in ``text`` as whole words: ``paris``, ``new york``,
    ``67890``; not ``a`` inside ``paris``."""
    if len(value) < 2:
        return False
    return re.search(rf"(?<!\w){re.escape(value)}(?!\w)", text) is not None
