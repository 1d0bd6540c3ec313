"""The content of the file a coding agent's request asks to write, asked of the model as plain
text; toolshim writes the call.

Through a shell-only agent (Codex), a small model that knows the value fails at the call: the
1.5B ran ``wc -l data.txt`` (``17 data.txt``) and answered "The number of lines in data.txt is
17.", and handed ``cat > count.txt <<'EOF'`` to fill it wrote ``" + count + "`` (Python, in
a shell command); for app.log's errors it answered "3", then wrote ``$(exec_command(…))``.
Asked for the content alone, in plain words, it gives the value it knows. The reply is taken
when it is one line whose every word and number was said (a value the request or a result
holds as it is, not a sentence about it) or a whole file in a code block; it becomes the agent's own write of that file
(:func:`~toolshim.engine.code_answer.writing_call`: ``Write``, or ``cat > FILE <<'EOF'`` in
its shell).
"""

from __future__ import annotations

import re

__all__ = ["CONTENT_QUESTION", "content_of"]

CONTENT_QUESTION = (
    "Reply with only the exact text to write into {name}: no explanation, no quotes, no "
    "command, no code around it."
)
_FENCE = re.compile(r"```[\w+#.-]*[ \t]*\n(.*?)\n?```", re.DOTALL)
_QUOTES = "\"'`"


def content_of(reply: str, said: str) -> str | None:
    """The content a reply to :data:`CONTENT_QUESTION` gives, or None: a fenced block's body,
    or one line that ``said`` (the request's and the results' text) holds as it is: ``8421``
    from ``port = 8421`` passes, "The port is 8421." does not."""
    block = _FENCE.search(reply)
    if block is not None:
        body = block.group(1)
        return body if body.strip() else None
    lines = [line for line in reply.strip().splitlines() if line.strip()]
    if len(lines) != 1:
        return None
    value = lines[0].strip()
    if len(value) > 1 and value[0] == value[-1] and value[0] in _QUOTES:
        value = value[1:-1]
    if not value.strip() or value not in said:
        return None
    return value
