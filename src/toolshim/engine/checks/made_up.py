"""Check ``made_up``: calls whose values nobody gave are held back, or re-asked once.

A call none of whose values the conversation holds was made up (:func:`grounding_problems`):
the 1.5B answered "what colour do blue and yellow make" with ``get_weather("London")``. A
value is held when a word of it was said (by the user, the system prompt, a result, an
earlier call), a long word by its first letters (``forecasts``/``forecast``), as an
abbreviation of a word said (``AAPL`` for Apple, ``NVDA`` for NVIDIA), the initials of words
said (``NY`` for New York) or one letter off a word
(``ZZZZZ`` for ``ZZZZ``: the 0.5B's slip, which a re-ask only made worse). A word of one or
two letters grounds a longer value only when said as it is: ``CA`` abbreviates "can", and
the 1.5B's "San Francisco, CA" (a weather tool's example) for a question about a domain's
CNAME records was made up all the same. Only strings are
judged, and not those the schema offers (``enum``, ``const``, ``default``) nor arithmetic
(``"6 * 7"`` for "six times seven"): numbers are computed as often as said.

- Written beside calls whose values are held, it is held back when it has an identifier (a
  string with a digit, a parameter named ``…id``), or when a call beside it looks something
  up by one: ``list_orders(user_id="12345")`` beside the ``find_user`` call whose result
  holds the real id, and ``get_weather(city="London")`` beside the ``lookup_order("1001")``
  whose result says where the order goes (the 0.5B's reply, asked for the weather where an
  order is going). Beside other calls a value nobody said can be meant (``get_time("CET")``
  beside Paris's weather) and goes out. The model asks for a held call again once the
  results are in.
- Alone (every call made up), it is re-asked once, naming the values nobody said. The same
  call written again is returned (a value can be meant without being said: ``CET`` for
  Paris); a different made-up call is flailing, and the answer is asked for without tools
  (:attr:`Turn.answer_now`). Measured on the 1.5B's no-tool questions: re-asked, it wrote
  ``lookup_order("12345")`` after ``get_weather("London")`` for "the chemical symbol of
  gold", and answered "Au" without tools.
- Only under ``tool_choice: "auto"``: a forced call is wanted whatever its values.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from toolshim.dialects.interpret import ParsedCall
from toolshim.engine.checks.base import PASS, Check, CheckedReply, Outcome, Reask, Revise
from toolshim.engine.turn import Turn, call_key
from toolshim.json_walk import json_values
from toolshim.types import ToolSpec

__all__ = [
    "CHECK",
    "NAME",
    "SHORT",
    "STEM",
    "grounding_problems",
    "hold_back_made_up",
    "made_up_calls",
    "stem_said",
    "with_stems",
]

NAME = "made_up"

_IDEOGRAPH = "\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af"
_WORD = re.compile(rf"[{_IDEOGRAPH}]|[^\W_{_IDEOGRAPH}]+")
"""A word: a run of letters and digits, or one CJK character (those texts have no spaces)."""
STEM = 5
"""Words this long or longer match on their first letters (``cities``/``city`` do not, but
``forecasts``/``forecast`` do); shorter ones must match whole."""

SHORT = 2
"""Words this long or shorter (``CA``, ``NY``) ground a value that has longer words only when
said as they are (:func:`_value_grounded`)."""


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def _initials(words: list[str]) -> set[str]:
    """The initials of each two and three ``words`` in a row (``ny`` for New York)."""
    first = [w[0] for w in words]
    pairs = [a + b for a, b in itertools.pairwise(first)]
    return {*pairs, *(p + c for p, c in zip(pairs, first[2:], strict=False))}


def _conversation_words(turn: Turn) -> set[str]:
    words: set[str] = set()
    initials: set[str] = set()
    for message in turn.request.messages:
        found = _WORD.findall(message.text.lower())  # read once for both
        words.update(found)
        initials |= _initials(found)
        for tool_call in message.tool_calls:
            words |= _words(tool_call.arguments)
    return words | initials | with_stems(words)


def with_stems(words: Iterable[str]) -> set[str]:
    """``words`` and the first :data:`STEM` letters of each that long: what
    :func:`stem_said` looks a word up in."""
    return {*words, *(w[:STEM] for w in words if len(w) >= STEM)}


def stem_said(word: str, said: set[str]) -> bool:
    """``word`` is in ``said`` (:func:`with_stems`), or its first :data:`STEM` letters are
    ("prices" for "price", "convert" for "conversion")."""
    return word in said or (len(word) >= STEM and word[:STEM] in said)


def _value_grounded(value: Any, said: set[str]) -> bool:
    """A word of the value was said (:func:`_word_said`). A word of one or two letters stands
    for the whole value only when the value has no longer word, or when it was said as it is:
    as an abbreviation, ``ca`` is in almost every word that starts with a c, and "San
    Francisco, CA" is the example of a weather tool's description, not something the user
    who asked for the CNAME records of a domain said."""
    words = _words(value if isinstance(value, str) else json.dumps(value))
    if not words:
        return True
    longer = [w for w in words if len(w) > SHORT]
    if any(_word_said(w, said) for w in longer):
        return True
    short = [w for w in words if len(w) <= SHORT]
    if longer:
        return any(w in said for w in short)
    return any(_word_said(w, said) for w in short)


def _word_said(word: str, said: set[str]) -> bool:
    if stem_said(word, said):
        return True
    if word.isdigit() or len(word) < 2:
        return False
    return any(
        s[0] == word[0] and ((len(s) > len(word) and _abbreviates(word, s)) or _one_edit(word, s))
        for s in said
    )


def _one_edit(word: str, other: str) -> bool:
    """One letter added, dropped or changed (``ZZZZZ`` for the ``ZZZZ`` the user wrote): a
    typo or a slip, not a value made up. Words of four letters or more."""
    if min(len(word), len(other)) < 4 or abs(len(word) - len(other)) > 1 or word == other:
        return False
    short, long = sorted((word, other), key=len)
    i = next((k for k, (a, b) in enumerate(zip(short, long, strict=False)) if a != b), len(short))
    if len(short) == len(long):
        return short[i + 1 :] == long[i + 1 :]
    return short[i:] == long[i + 1 :]


def _abbreviates(short: str, long: str) -> bool:
    """``short``'s letters appear in ``long`` in order, a doubled one once (``aapl`` in
    ``apple``)."""
    letters = iter(long)
    return all(ch in letters for i, ch in enumerate(short) if i == 0 or ch != short[i - 1])


def _judged_values(call: ParsedCall, tool: ToolSpec) -> list[tuple[str, Any]]:
    """The call's string values that must come from somewhere: not arithmetic, not one the
    schema itself offers (``enum``, ``const``, ``default``), not a placeholder (re-asked
    already)."""
    properties = tool.parameters.get("properties")
    schemas = properties if isinstance(properties, Mapping) else {}
    out = []
    for key, value in call.arguments.items():
        if not isinstance(value, str) or _arithmetic(value):
            continue  # numbers are computed as often as said: 6 * 7 for "six times seven"
        schema = schemas.get(key)
        if isinstance(schema, Mapping) and (
            "enum" in schema or "const" in schema or schema.get("default") == value
        ):
            continue
        out.append((key, value))
    return out


def _arithmetic(value: str) -> bool:
    """Digits with operators between them (``"6 * 7"``), not one made-up number (``"12345"``)."""
    words = _words(value)
    return len(words) > 1 and all(w.isdigit() for w in words)


def _ungrounded(call: ParsedCall, tool: ToolSpec | None, said: set[str]) -> list[str]:
    """The call's judged values as ``key=value`` when none of them is grounded, else []."""
    if tool is None or not isinstance(call.arguments, Mapping):
        return []
    judged = _judged_values(call, tool)
    if not judged or any(_value_grounded(value, said) for _, value in judged):
        return []
    return [f"{key}={value!r}" for key, value in judged]


def made_up_calls(turn: Turn, calls: Sequence[ParsedCall]) -> tuple[list[ParsedCall], list[str]]:
    """The calls to go on with and the re-ask for made-up ones (see the module docstring):
    the conversation's words read once for both checks. Only under ``tool_choice: "auto"``:
    a forced call is wanted whatever its values."""
    if turn.request.choice.kind != "auto" or not calls:
        return list(calls), []
    said = _conversation_words(turn)
    kept = hold_back_made_up(turn, calls, said)
    return kept, grounding_problems(turn, kept, said)


def grounded(turn: Turn, call: ParsedCall) -> bool:
    """Whether some value ``call`` is judged by is in the conversation (whatever the re-asks of
    this turn so far)."""
    tool = next((t for t in turn.request.function_tools if t.name == call.name), None)
    return not _ungrounded(call, tool, _conversation_words(turn))


def hold_back_made_up(turn: Turn, calls: Sequence[ParsedCall], said: set[str]) -> list[ParsedCall]:
    """The calls less those written beside grounded ones with a made-up identifier (see the
    module docstring); ``said``: the conversation's words."""
    if len(calls) < 2:
        return list(calls)
    by_name = {t.name: t for t in turn.request.function_tools}
    ungrounded = {
        i: bad for i, c in enumerate(calls) if (bad := _ungrounded(c, by_name.get(c.name), said))
    }
    if len(ungrounded) == len(calls):
        # Beside nothing but made-up calls there is no result to wait for: the whole reply is
        # judged as one (grounding_problems), not cut down to the calls without a digit.
        ungrounded = {}
    # A lookup beside it (a grounded call by an identifier: ``lookup_order("1001")``) is where
    # its value would come from; beside other calls, a value nobody said can be meant (``CET``
    # beside Paris's weather), and only an identifier of its own marks it made up.
    lookup_beside = any(_identifier_like(c) for i, c in enumerate(calls) if i not in ungrounded)
    made_up = {
        i: bad
        for i, c in enumerate(calls)
        if ((bad := ungrounded.get(i, [])) and (lookup_beside or _identifier_like(c)))
        or (bad := _numbered_ids(c))
    }
    if not made_up or len(made_up) == len(calls):
        return list(calls)
    for i in made_up:
        turn.held_back.append(calls[i].name)
        turn.warn(
            f"held back {calls[i].name}({', '.join(made_up[i])}): none of its values is in "
            "the conversation yet (it needs a result of the calls returned with it)"
        )
    return [c for i, c in enumerate(calls) if i not in made_up]


def _numbered_ids(call: ParsedCall) -> list[str]:
    """``key=value`` for each identifier the call fills with its parameter's name numbered
    (``case_id=["case_id1", "case_id2"]``): ids the model has yet to look up."""
    out = []
    for key, value in call.arguments.items():
        if re.search(r"(^|_)ids?$", key.lower()) is None:
            continue
        items = value if isinstance(value, list) else [value]
        numbered = re.compile(re.escape(key.lower().rstrip("s")) + r"[ _-]?\d+")
        if items and all(isinstance(i, str) and numbered.fullmatch(i.lower()) for i in items):
            out.append(f"{key}={value!r}")
    return out


def _identifier_like(call: ParsedCall) -> bool:
    """A string with a digit, or a value under a parameter named as an id: what a model invents
    for a value it has yet to look up (``"12345"``, ``user_id``). Numbers are not: ``add(1, 2)``
    is arithmetic, not a look-up."""
    return any(
        (isinstance(value, str) and any(ch.isdigit() for ch in value))
        or re.search(r"(^|_)ids?$", key.lower()) is not None
        for key, value in call.arguments.items()
        if not isinstance(value, bool)
    )


_CAPITALISED = re.compile(r"(?<![.!?:]\s)(?<!^)(?<![\"'(])\b[A-Z][\w-]*")
"""A capitalised word that does not open a sentence (nor a quote): a name the user gave."""


def written_in(value: str, text: str) -> bool:
    """``value`` in ``text`` as a whole word or number (``9`` in ``24 * 9 / 5``, not in
    ``1995`` nor ``0.9``)."""
    return re.search(rf"(?<![\w.]){re.escape(value)}(?![\w]|\.\d)", text) is not None


def names_not_written(text: str, written: str) -> list[str]:
    """The names ``text`` gives (a capitalised word past a sentence's first, not "I") that
    ``written`` (lower-cased values) does not hold, once each."""
    return list(
        dict.fromkeys(
            w for w in _CAPITALISED.findall(text) if w != "I" and not written_in(w.lower(), written)
        )
    )


def grounding_problems(turn: Turn, calls: Sequence[ParsedCall], said: set[str]) -> list[str]:
    """The re-ask for a reply whose every call is made up (see the module docstring)."""
    if not calls:
        return []
    by_name = {t.name: t for t in turn.request.function_tools}
    made_up = [(c, bad) for c in calls if (bad := _ungrounded(c, by_name.get(c.name), said))]
    if len(made_up) < len(calls):
        return []
    earlier = turn.reasked.get(NAME)  # the calls of the reply re-asked for this, if any
    if earlier is not None:
        if frozenset(call_key(c.name, c.arguments_json) for c in calls) & earlier:
            turn.warn("returned a call whose values are not in the conversation: written again")
        else:
            turn.answer_now = True
            turn.warn(
                "the model made up another call with values nobody gave after being told so; "
                "not asked for a call again"
            )
        return []
    return [
        f"nothing in the conversation mentions {', '.join(bad)} (your call of {c.name!r}). "
        f"{_names_given(turn, calls)}Call a tool only with values the user gave or a tool "
        "returned; if no tool fits the request, answer the user directly"
        for c, bad in made_up
    ]


def _names_given(turn: Turn, calls: Sequence[ParsedCall]) -> str:
    """ "The user named 'Japan'. ": the names the user's message gives that no call wrote (the
    1.5B, asked for the weather in the capital of Japan, called ``get_capital("Tokyo")``, was
    told that nobody said Tokyo, and called ``get_weather("Tokyo")``); empty when there are
    none, or the last message is not the user's."""
    last = turn.request.messages[-1] if turn.request.messages else None
    if last is None or last.role != "user":
        return ""
    values = " ".join(
        v.lower() for c in calls for v in json_values(c.arguments) if isinstance(v, str)
    )
    names = names_not_written(last.text, values)
    if not names or len(names) > 5:
        return ""
    return f"The user named {', '.join(repr(n) for n in names)}. "


def _run(reply: CheckedReply) -> Outcome:
    kept, problems = made_up_calls(reply.turn, reply.calls)
    if problems:
        return Reask(tuple(problems), tuple(kept))
    if len(kept) == len(reply.calls):
        return PASS
    return Revise(tuple(kept), reply.finish)


CHECK = Check(NAME, _run)
