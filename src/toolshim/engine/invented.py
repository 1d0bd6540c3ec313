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
"""

from __future__ import annotations

from toolshim.engine.checks.unused_numbers import said_numbers
from toolshim.engine.turn import Turn

__all__ = ["invented_numbers"]


def invented_numbers(turn: Turn, answer: str) -> tuple[str, ...]:
    """The numbers in ``answer`` that no message, call or tool description of the request
    holds (read as :func:`~toolshim.engine.checks.unused_numbers.said_numbers` reads them),
    when this is the first reply to a later user turn (see the module docstring); empty
    otherwise."""
    messages = turn.request.messages
    if turn.one_step or not messages or messages[-1].role != "user":
        return ()
    if not any(m.role == "user" for m in messages[:-1]):
        return ()  # the conversation's first question
    texts = [
        *(m.text for m in messages),
        *(c.arguments for m in messages for c in m.tool_calls),
        *(t.description for t in turn.request.function_tools),
    ]
    said = {value for text in texts for _, values in said_numbers(text or "") for value in values}
    out = [n for n, values in said_numbers(answer) if not any(v in said for v in values)]
    return tuple(dict.fromkeys(out))
