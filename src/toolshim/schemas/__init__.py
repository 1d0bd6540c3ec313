"""Caller JSON Schemas made safe to check: local references only, bounded size, nesting and work.

A tool's ``parameters`` schema comes from whoever calls the proxy, so it is data, never an
instruction to fetch or compute without bound:

* ``$ref`` (and ``$dynamicRef``/``$recursiveRef``) may only point inside the schema itself
  (``#...``: ``#/$defs/...``, ``#/definitions/...``, an anchor); nothing is ever fetched —
  the :class:`referencing.Registry` behind the validator refuses every retrieval;
* a schema holds at most :data:`MAX_NODES` JSON values nested at most :data:`MAX_DEPTH`
  deep, and a chain of references that applies to the same value without consuming any of
  it (``{"$ref": "#"}``) is refused;
* ``pattern`` and ``patternProperties`` run on RE2, in linear time. A pattern RE2 cannot run
  (backreferences, lookaround, ``\\Z``) is *not enforced*: it is never the reason a call is
  rejected, and the turn carries a warning naming it. ``unevaluatedProperties`` in a schema
  that also uses ``patternProperties`` is not enforced either (jsonschema would run those
  patterns on Python's backtracking engine);
* one check of a call against a schema evaluates at most :data:`MAX_STEPS` keywords.

:func:`inspect_tools` runs when a request is assembled (before any upstream call) and raises
:class:`~toolshim.errors.InvalidRequestError` (HTTP 400) naming the tool and the limit or
reference; :func:`checker` builds the bounded validator that checks calls.
"""

from toolshim.schemas.checker import Checker, checker
from toolshim.schemas.inspect import (
    TOOL_NAME,
    check_tool_names,
    inspect_schema,
    inspect_tool,
    inspect_tools,
)
from toolshim.schemas.limits import MAX_DEPTH, MAX_NODES, MAX_STEPS

__all__ = [
    "MAX_DEPTH",
    "MAX_NODES",
    "MAX_STEPS",
    "TOOL_NAME",
    "Checker",
    "check_tool_names",
    "checker",
    "inspect_schema",
    "inspect_tool",
    "inspect_tools",
]
