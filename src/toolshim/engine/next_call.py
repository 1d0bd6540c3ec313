"""The call a question still needs after results, for an application's agent (not a coding
agent's, which :mod:`.next_step` serves).

After a result small models answer instead of taking the next step of a chain: asked for
alice's orders, the 1.5B called ``find_user("alice")``, got ``u-17`` and answered "alice's
user id is u-17", never calling ``list_orders``; asked for the weather in Egypt's capital, the
0.5B answered "The capital of Egypt is Cairo." A tool the question asks for by name (a word
of its name, ``orders`` of ``list_orders``, ``weather`` of ``get_weather``) that no call since
the question has used, or only with an error for its result, is a step still to take
(:func:`pending_tools`). Where the turn would
end in text, the reply is handed back opened as that tool's call (on an upstream that
continues an assistant message); the call the model writes there is returned when it is
valid and every value it holds was said (by the user or a result), else the answer stands.
One more request, bounded in tokens; asked once a turn.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from toolshim.engine.files_named import request_index
from toolshim.engine.history import is_error_result
from toolshim.types import Message, ToolSpec

__all__ = ["pending_tools"]

_WORD = re.compile(r"[A-Za-z]+")
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")
_GENERIC = frozenset(
    {
        "get", "set", "list", "find", "lookup", "look", "up", "fetch", "search", "query",
        "read", "show", "view", "check", "create", "make", "add", "update", "delete",
        "remove", "do", "run", "call", "tool", "info", "data", "by", "for", "of", "the",
        "a", "an", "to", "from", "in", "on", "and", "or", "with", "all", "current", "new",
    }
)  # fmt: skip


def _name_words(name: str) -> set[str]:
    spaced = _CAMEL.sub(" ", name).replace("_", " ").replace("-", " ").replace(".", " ")
    return {w.lower() for w in _WORD.findall(spaced)} - _GENERIC


def _question_words(text: str) -> tuple[set[str], set[str]]:
    """The question's words, and the singulars of its plurals (weaker: "orders" asks for
    ``list_orders`` before ``get_order``)."""
    words = {w.lower() for w in _WORD.findall(text)}
    return words, {w[:-1] for w in words if w.endswith("s") and len(w) > 3} - words


def pending_tools(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> list[ToolSpec]:
    """The offered tools the last question asks for by a word of their name that no call
    since it has used, when results have come in since it; most words in common first."""
    index = request_index(messages)
    if index is None:
        return []
    after = messages[index + 1 :]
    if not any(m.role in ("tool", "function") for m in after):
        return []
    # A call whose result is an error has not done its job: the 0.5B called
    # list_orders(user_id="alice"), got "user ids look like 'u-17'", then find_user, and
    # answered with alice's id.
    failed = {m.tool_call_id for m in after if m.role == "tool" and is_error_result(m.text)}
    called = {c.name for m in after for c in m.tool_calls if c.id not in failed}
    said, singular = _question_words(messages[index].text)
    ranked = []
    for i, tool in enumerate(tools):
        words = _name_words(tool.name)
        score = 2 * len(words & said) + len(words & singular)
        if score and tool.name not in called:
            ranked.append((-score, i, tool))
    return [tool for *_, tool in sorted(ranked, key=lambda r: (r[0], r[1]))]
