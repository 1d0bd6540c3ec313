"""A bracket that opens a Python-style list of calls (``[get_weather(city="Paris"), …]``): the
calls it holds, the calls written with their keywords shared, or a list that opens with an
offered tool and is no list of calls (a call gone wrong, re-asked, never an answer)."""

from __future__ import annotations

import re

from toolshim.dialects._host import Host
from toolshim.dialects.calls import ParsedCall
from toolshim.dialects.python_calls import (
    call_list_problem,
    interpret_python,
    shared_keyword_calls,
)
from toolshim.dialects.segments import Segment, calls_segment

__all__ = ["read_python_list"]

_PY_LIST = re.compile(r"\[\s*([\w\-][\w.\-]*)\s*\(")


def read_python_list(
    host: Host,
    t: int,
    end: int,
    *,
    cut_off: bool,
    starts_reply: bool,
    python_unknown: bool,
) -> tuple[Segment | None, int] | None:
    """The list at ``buf[t:end]`` read as calls (``cut_off``: the reply ended inside it), or
    False when it does not open like a Python call list (``[name(``)."""
    candidate = host.buf[t:end]
    head = _PY_LIST.match(candidate)
    if head is None:
        return None
    meaning = interpret_python(candidate, host.index, require_known=not python_unknown)
    if meaning.calls:
        return calls_segment(candidate, meaning), end
    if not cut_off:
        shared = shared_keyword_calls(candidate, host.index)
        if shared.calls:
            return calls_segment(candidate, shared), end
        if starts_reply and host.index.resolve(head.group(1)) is not None:
            problem = call_list_problem(candidate)
            if problem is not None:
                call = ParsedCall(head.group(1), None, candidate, problem)
                return Segment("calls", candidate, (call,)), end
    # JSON cannot read ``[name(`` as anything but strings: not worth a repair.
    return None, t + 1
