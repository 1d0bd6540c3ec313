"""Emulated calls that must not be returned as they are: repeats, placeholders, made-up values.

The arguments a call can lose instead of being re-asked are :mod:`toolshim.engine.arguments`.

* A reply that writes the same call several times (a small model looping on its own output
  until ``max_tokens``) is read as that call once; the cut tail of the loop is not a call. To
  spare the upstream that loop, a request made once results are in stops where the reply
  writes an answered call again on the line after a call (:func:`repeat_stops`): Qwen2.5-
  Coder-0.5B otherwise writes ``{"name": "get_weather", …}`` sixty times, minutes on a CPU.
* A call whose result the conversation already holds is re-asked once, with that result
  quoted ("you already have this result …: answer the user or call something else"). If the
  model writes it again under ``tool_choice: "auto"``, the answer is asked for without tools,
  from the results (:attr:`Turn.answer_now`); a forced ``tool_choice`` returns the call (polling
  the same tool can be what is meant), with the warning the engine adds for any repeat.
* A required parameter filled with a placeholder (``"..."``, ``"<city>"``, ``""``,
  ``"string"``, the parameter's own name) is an invalid call, re-asked like any other: it is
  what a model writes when it copies the prompt's example instead of the conversation.
* A call that is the prompt's own example (:func:`example_copies`): every dialect shows the
  first tool called with placeholder values (``"..."``, ``1``, ``1.5``), and a small model
  asked something no tool fits copies it (``calculate_ROI(investment_amount=1.5,
  net_profit=1.5)`` for a profit margin, BFCL's irrelevance cases) — re-asked like a
  placeholder, unless the conversation gives those numbers (``add(a=1, b=1)`` for "1 + 1").
* A call none of whose values the conversation holds was made up (:func:`grounding_problems`):
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

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from toolshim.dialects.base import example_arguments
from toolshim.dialects.interpret import ParsedCall
from toolshim.engine.files_named import untouched_since_request
from toolshim.engine.history import is_error_result
from toolshim.engine.next_file import reading_call
from toolshim.engine.turn import Turn, call_key
from toolshim.types import ToolCall, ToolSpec

__all__ = [
    "NUMBER",
    "REPEAT_STOPS",
    "STEM",
    "drop_repeats_in_reply",
    "example_copies",
    "grounding_problems",
    "hold_back_made_up",
    "is_placeholder",
    "made_up_calls",
    "placeholder_problems",
    "repeat_problems",
    "repeat_stops",
]

REPEAT_STOPS = 2
"""Answered calls (the latest ones) whose second writing ends a reply."""
_RESULT_QUOTE = 1500
"""Characters of an earlier result quoted in the re-ask (the rest is elided)."""

_PLACEHOLDER_WORDS = frozenset(
    {
        "",
        "...",
        "…",
        "..",
        "string",
        "str",
        "value",
        "example",
        "placeholder",
        "xxx",
        "tbd",
        "todo",
        "n/a",
        "none",
        "null",
        "undefined",
        "unknown",
        "<string>",
        "your_value",
    }
)
_BRACKETED = re.compile(r"^\s*(<[^<>]{0,40}>|\{[^{}]{0,40}\}|\[[^\[\]]{0,40}\])\s*$")
_YOUR = re.compile(r"^\s*(your|insert|enter)[ _-]\w+", re.IGNORECASE)


def is_placeholder(value: Any, name: str) -> bool:
    """True for a string that stands for a value rather than being one."""
    if not isinstance(value, str):
        return False
    text = value.strip()
    lowered = text.lower()
    if lowered in _PLACEHOLDER_WORDS or set(text) <= {".", "…", " ", "_", "-", "?"}:
        return True
    if lowered in (name.lower(), name.lower().replace("_", " ")):
        return True
    return bool(_BRACKETED.match(text) or _YOUR.match(text))


def placeholder_problems(calls: Sequence[ParsedCall], tools: Sequence[ToolSpec]) -> list[str]:
    """One problem per call whose required string parameters hold placeholders."""
    by_name = {t.name: t for t in tools}
    problems: list[str] = []
    for call in calls:
        tool = by_name.get(call.name)
        if tool is None or not isinstance(call.arguments, Mapping):
            continue
        needed = tool.required
        bad = [
            f"{key}={call.arguments[key]!r}"
            for key in needed
            if key in call.arguments and is_placeholder(call.arguments[key], key)
        ]
        if bad:
            problems.append(
                f"the arguments of {call.name!r} are placeholders, not values: {', '.join(bad)}. "
                "Use the real values the user gave; if the conversation does not give them, "
                "this tool does not fit"
            )
    return problems


NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def example_copies(turn: Turn, calls: Sequence[ParsedCall]) -> list[str]:
    """One problem per call that is the prompt's example call of its tool (the placeholder
    arguments every dialect shows) with a number nobody said: a copy, not a call. Only under
    ``tool_choice: "auto"``, where declining is allowed."""
    if turn.request.choice.kind != "auto":
        return []
    by_name = {t.name: t for t in turn.request.function_tools}
    said: set[float] | None = None
    problems: list[str] = []
    for call in calls:
        tool = by_name.get(call.name)
        if tool is None or not call.arguments:
            continue
        example = example_arguments(tool)
        numbers = [
            v for v in example.values() if isinstance(v, int | float) and not isinstance(v, bool)
        ]
        if not numbers or dict(call.arguments) != example:
            continue
        if said is None:
            said = {
                float(n) for message in turn.request.messages for n in NUMBER.findall(message.text)
            }
        if all(float(n) in said for n in numbers):
            continue
        shown = ", ".join(f"{k}={v!r}" for k, v in example.items())
        problems.append(
            f"your call {call.name}({shown}) is the example from the instructions, not a call "
            "for this request: nothing in the conversation gives these values. Call a tool "
            "only with values the user gave; if no tool fits the request, answer the user "
            "directly"
        )
    return problems


def drop_repeats_in_reply(
    turn: Turn, calls: Sequence[ParsedCall], finish: str | None
) -> tuple[Sequence[ParsedCall], str | None]:
    """``calls`` with identical repeats dropped; a reply cut by ``max_tokens`` while it
    repeated itself keeps its complete calls and is no longer treated as cut off."""
    turn.trimmed_reply = None
    seen: set[tuple[str, str]] = set()
    unique: list[ParsedCall] = []
    dropped = 0
    for call in calls:
        if call.problem is None and isinstance(call.arguments, Mapping):
            key = call_key(call.name, call.arguments_json)
            if key in seen:
                dropped += 1
                continue
            seen.add(key)
        unique.append(call)
    if not dropped:
        return calls, finish
    turn.warn(f"dropped {dropped} identical repeat(s) of a call written again in the same reply")
    if finish == "length":
        complete = [c for c in unique if c.problem is None and not c.repaired]
        if complete:
            turn.trimmed_reply = turn.dialect.render_calls(
                [ToolCall(f"trimmed_{i}", c.name, c.arguments_json) for i, c in enumerate(complete)]
            )
            return complete, None
    return unique, finish


def repeat_problems(turn: Turn, calls: Sequence[ParsedCall]) -> list[str]:
    """The re-ask for calls whose results the conversation holds (see the module docstring)."""
    if turn.request.choice.kind != "auto" or not turn.answered_results:
        return []
    repeated = [
        (call, turn.answered_results[key])
        for call in calls
        if (key := call_key(call.name, call.arguments_json)) in turn.answered_results
    ]
    if not repeated:
        return []
    if turn.repeat_reasked:
        turn.answer_now = True
        turn.warn(
            "the model repeated a call whose result it already had, after being told so; "
            "answered from the results without tools"
        )
        return []
    turn.repeat_reasked = True
    problems = []
    for call, result in repeated:
        shown = json.dumps(call.arguments, ensure_ascii=False)
        quoted = result if len(result) <= _RESULT_QUOTE else result[: _RESULT_QUOTE - 3] + "..."
        if is_error_result(result):
            # BFCL's multi-turn file system: the 0.5B repeated a failed cat() where a cd()
            # first would have fixed it, and was told to answer with the error.
            problems.append(
                f"you already called {call.name}({shown}) and it failed: {quoted!r}. The same "
                "call fails the same way: change its arguments, or first make the call that "
                "fixes what the error says (the folder to move to, the value to look up)"
            )
            continue
        problems.append(
            f"you already called {call.name}({shown}) and have its result: {quoted!r}. Do not "
            "call it again: answer the user's question with this result now, or call a "
            "different tool if you still need something else"
        )
    if turn.one_step:  # a coding agent: say which named files are still to look at
        untouched = untouched_since_request(turn.request.messages)
        read = reading_call(turn.request, turn.dialect)
        if untouched:
            problems.append(
                f"the request names files no call has used yet: {', '.join(untouched)}; "
                "the next step is likely with one of them"
                + (f", for example: {read}" if read else "")
            )
    return problems


def repeat_stops(turn: Turn) -> tuple[str, ...]:
    """Stop sequences that end a reply where, right after a call, it writes an answered call
    again as a JSON line (``}\n{"name": …, "arguments": …}``: the shape small models loop
    in), for the latest :data:`REPEAT_STOPS` answered calls; the latest also with a blank line
    between (``}\n\n{…``: Qwen's hermes blocks once their special tags are stripped). The
    reply keeps its first call (less the closing brace the stop sequence begins with, which the
    tolerant parser restores). Most important first: a request carries at most four stops."""
    stops: list[str] = []
    for rank, (name, arguments) in enumerate(list(turn.answered_results)[-REPEAT_STOPS:][::-1]):
        try:
            value = json.loads(arguments)
        except ValueError:
            continue
        call = json.dumps({"name": name, "arguments": value}, ensure_ascii=False)
        stops += ["}\n" + call, "}\n\n" + call] if rank == 0 else ["}\n" + call]
    return tuple(stops)


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


def _initials(text: str) -> set[str]:
    """The initials of each two and three words in a row (``ny`` for New York)."""
    words = _WORD.findall(text.lower())
    return {
        "".join(w[0] for w in words[i : i + n]) for n in (2, 3) for i in range(len(words) - n + 1)
    }


def _conversation_words(turn: Turn) -> set[str]:
    words: set[str] = set()
    initials: set[str] = set()
    for message in turn.request.messages:
        words |= _words(message.text)
        initials |= _initials(message.text)
        for tool_call in message.tool_calls:
            words |= _words(tool_call.arguments)
    return words | initials | {w[:STEM] for w in words if len(w) >= STEM}


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
    if word in said or (len(word) >= STEM and word[:STEM] in said):
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


def grounding_problems(turn: Turn, calls: Sequence[ParsedCall], said: set[str]) -> list[str]:
    """The re-ask for a reply whose every call is made up (see the module docstring)."""
    if not calls:
        return []
    by_name = {t.name: t for t in turn.request.function_tools}
    made_up = [(c, bad) for c in calls if (bad := _ungrounded(c, by_name.get(c.name), said))]
    if len(made_up) < len(calls):
        return []
    keys = frozenset(call_key(c.name, c.arguments_json) for c in calls)
    if turn.made_up_calls is not None:
        if keys & turn.made_up_calls:
            turn.warn("returned a call whose values are not in the conversation: written again")
        else:
            turn.answer_now = True
            turn.warn(
                "the model made up another call with values nobody gave after being told so; "
                "answered without tools"
            )
        return []
    turn.made_up_calls = keys
    return [
        f"nothing in the conversation mentions {', '.join(bad)} (your call of {c.name!r}). "
        "Call a tool only with values the user gave or a tool returned; if no tool fits "
        "the request, answer the user directly"
        for c, bad in made_up
    ]
