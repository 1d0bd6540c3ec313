"""Numbers an answer gives that nothing in the conversation holds, in a later user turn.

Asked "What is that stock trading at now?" a turn after "I'm thinking about buying some NVDA",
Qwen2.5-Coder-0.5B answered "The latest stock price in USD for NVDA is 100." without a call:
the value is its own. Asked about a customer's orders a turn after giving her name, it
answered "I have order ids for customer 1 and customer 2." A first question it nearly always
answers with the call; a question that follows an exchange in prose it answers in prose, as
the turns before it were.

Such an answer is handed back opened as a call (:mod:`toolshim.engine.next_step`): the call the
model then writes is returned when its values are in the conversation
(:func:`~toolshim.engine.checks.made_up.made_up_calls`), else the answer stands as written. A
turn's first question is not judged: asked something no tool does (BFCL's irrelevance, "how
many legs does a spider have?"), the answer's own numbers are its knowledge, and a call opened
there would be a made-up one.

An answer can also take its numbers from an earlier question's results for a new subject
(:func:`borrowed_numbers`): asked "And in Oslo?" after Paris's weather (sunny, 18 °C), the
0.5B answered "The weather in Oslo is sunny with a temperature of 18 degrees Celsius." with
no call. When the new question names something no earlier message or call did (a capitalised
word, not a sentence's first) and every number of the answer is one of those results', the
answer is opened as a call the same way.
"""

from __future__ import annotations

import re

from toolshim.engine.checks.unused_numbers import said_numbers
from toolshim.engine.turn import Turn

__all__ = ["borrowed_numbers", "invented_numbers"]

_NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][\w-]+")
"""A capitalised word that does not begin a sentence (a place, a person, a ticker)."""


def _later_question(turn: Turn) -> bool:
    """Whether this is the first reply to a later user turn (not the conversation's first
    question, nor a coding agent's turn)."""
    messages = turn.request.messages
    return (
        not turn.one_step
        and bool(messages)
        and messages[-1].role == "user"
        and any(m.role == "user" for m in messages[:-1])
    )


def invented_numbers(turn: Turn, answer: str) -> tuple[str, ...]:
    """The numbers in ``answer`` that no message, call or tool description of the request
    holds (read as :func:`~toolshim.engine.checks.unused_numbers.said_numbers` reads them),
    when this is the first reply to a later user turn (see the module docstring); empty
    otherwise."""
    messages = turn.request.messages
    if not _later_question(turn):
        return ()
    texts = [
        *(m.text for m in messages),
        *(c.arguments for m in messages for c in m.tool_calls),
        *(t.description for t in turn.request.function_tools),
    ]
    said = {value for text in texts for _, values in said_numbers(text or "") for value in values}
    out = [n for n, values in said_numbers(answer) if not any(v in said for v in values)]
    return tuple(dict.fromkeys(out))


def borrowed_numbers(turn: Turn, answer: str) -> tuple[str, ...]:
    """The numbers of ``answer``, when each is one an earlier question's results hold and
    the later question names a new subject (see the module docstring); empty otherwise."""
    messages = turn.request.messages
    if not _later_question(turn):
        return ()
    earlier = messages[:-1]
    before = " ".join(
        [*(m.text for m in earlier), *(c.arguments for m in earlier for c in m.tool_calls)]
    ).lower()
    question = messages[-1].text.strip()
    if not any(w.lower() not in before for w in _NAME.findall(question) if w != "I"):
        return ()
    results = {
        v
        for m in earlier
        if m.role in ("tool", "function")
        for _, values in said_numbers(m.text)
        for v in values
    }
    given = [(n, values) for n, values in said_numbers(answer)]
    if not given or not all(any(v in results for v in values) for _, values in given):
        return ()
    return tuple(dict.fromkeys(n for n, _ in given))
