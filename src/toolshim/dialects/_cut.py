"""A reply that ends inside the opening of a JSON call: ``{"name": "`` and no more.

The 0.5B, asked for an answer without tools in BFCL's multi-turn (``multi_turn_base_12``),
wrote a call, then began another, ``{"name": "``, and was cut off there; the call was taken out
of the answer and those nine characters were the answer the user got. An object cut off by the
end of the reply is read as a call when it is: one whose name has arrived (``{"name":
"get_weather", "argu``) is that call, repaired. One cut off before its name is complete could
only be data by its name, so it is a call's opening when the name so far (its closing quote
not yet written) is empty or begins an offered tool's name (``{"name": "get_w``); a name
written whole is read as that call (``{"tool":"getWeather"``), and ``{"name": "Ada", "age``
is data, and stays prose.
Reported as a call with a problem, as a cut-off ``<tool_call>`` is: it is never prose, and a
turn that wanted a call re-asks (or reports the cut by ``max_tokens``).
"""

from __future__ import annotations

import re

from toolshim.dialects.calls import Interpretation, ParsedCall, ToolIndex
from toolshim.dialects.segments import Segment, calls_segment

__all__ = ["cut_call_opening"]

_NAME = r'"(?:name|tool_name|tool|function)"\s*:\s*(?:\{\s*"name"\s*:\s*)?(?:"(?P<name>[^"\\]*))?'
_OPENING = re.compile(
    rf'\{{\s*(?:"tool_calls"\s*:\s*\[?\s*(?:\{{\s*(?:{_NAME.replace("?P<name>", "?P<listed>")})?)?|{_NAME})\s*',
    re.IGNORECASE,
)


def cut_call_opening(candidate: str, index: ToolIndex) -> Segment | None:
    """``candidate`` (an object the reply's end cut off) as a call with a problem when it is
    only the opening of a call (see the module docstring), else None."""
    opening = _OPENING.fullmatch(candidate)
    if opening is None:
        return None
    name = (opening.group("name") or opening.group("listed") or "").strip().lower()
    if name and not any(n.lower().startswith(name) for n in index.names):
        return None
    problem = f"the reply ended inside the opening of a tool call ({candidate.strip()!r})"
    return calls_segment(candidate, Interpretation((ParsedCall("", None, candidate, problem),)))
