"""Answers that stand in for the step the user asked for: a promise, a refusal, the last answer
again.

On BFCL's multi-turn file system, the 1.5B answered requests its tools do with words and no
call: a promise ("Sure, I'll initiate a file creation in our communal folder and label it as
'Annual_Report_2023.docx'.", three turns running), a refusal of a later request its tools
cover ("I'm sorry, but I can't assist with that." asked to post on the Twitter API it had;
"I'm sorry, but I cannot access or view files on your computer." asked for a file it had
``cat`` for), or
its previous turn's answer again, word for word, whatever the new question ("The current
working directory is academic_venture. …" for "list every project that has goal in its file
name").

Such an answer, when no call has been made since the user's message, is handed back opened as
a call (:mod:`toolshim.engine.next_step`), as an answer that invents numbers is: the call the
model then writes is returned when its values are in the conversation, else the answer stands.
A promise is read in any turn (no final answer is one); a refusal and a repeated answer only in
a later turn of a conversation, since a first question no tool fits is rightly declined
(BFCL's irrelevance, where the 1.5B's refusals are right answers).
"""

from __future__ import annotations

import re

from toolshim.engine.files_named import request_index
from toolshim.engine.turn import Turn

__all__ = ["unfulfilled"]

_PROMISE = re.compile(
    r"\A\W*(?:(?:sure|okay|ok|certainly|of course|alright|absolutely|yes)\b[,!.]?\s*)?"
    r"(?:I'll|I will|let me|I'm going to|I am going to)\s+(?!not\b|never\b)\w+",
    re.IGNORECASE,
)
_REFUSAL = re.compile(
    r"\A\W*(?:I'm sorry|I am sorry|I apologi[sz]e|sorry)\b[^.\n]{0,40}?"
    r"\b(?:can't|cannot|can not|unable to|not able to)\s+\w+",
    re.IGNORECASE,
)
_LONGEST = 400
"""An answer longer than this says more than a promise or a refusal: it is not judged."""
_SAME = 40
"""Characters of an earlier answer's opening a new answer must repeat to be that answer again."""


def _words(text: str) -> str:
    return " ".join(text.split()).lower()


def unfulfilled(turn: Turn, answer: str) -> str | None:
    """What ``answer`` is instead of the step asked for (see the module docstring): "a
    promise", "a refusal", "the previous answer again", or None."""
    messages = turn.request.messages
    start = request_index(messages)
    if turn.one_step or start is None or messages[-1].role != "user" or start != len(messages) - 1:
        return None
    text = answer.strip()
    if not text:
        return None
    if len(text) <= _LONGEST and _PROMISE.match(text):
        return "a promise"
    earlier = [m for m in messages[:start] if m.role == "assistant" and m.text.strip()]
    if not any(m.role == "user" for m in messages[:start]):
        return None  # a first question: declining it may be right
    if len(text) <= _LONGEST and _REFUSAL.match(text):
        return "a refusal"
    if earlier:
        last = _words(earlier[-1].text)
        if len(last) >= _SAME and _words(text).startswith(last[:_SAME]):
            return "the previous answer again"
    return None
