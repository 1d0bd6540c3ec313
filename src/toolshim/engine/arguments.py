"""Arguments an emulated call loses rather than being re-asked.

An argument the tool's schema does not declare (its ``properties`` list every parameter and
``additionalProperties`` does not allow others) is dropped, with a warning: small models add
the schema's own keywords (``"required": ["symbol"]``) or invent parameters (``"phone":
"098-765-4321"``, the answer they were meant to look up), a strict tool would reject the
call, and a re-ask at temperature 0 gets the same call back (measured on the agent suite:
six two-call tasks lost that way). So is an optional argument given as ``null`` where its
schema does not admit null (``country: null``: "not said", the tool's default). An
undeclared argument that is plainly a parameter the call lacks, written shorter, longer or
in another case (``company`` for ``company_name``, ``companyName`` for ``company_name``),
is renamed to it instead, with a warning — only where exactly one parameter fits. What
remains is validated like any call.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from toolshim.dialects.interpret import ParsedCall
from toolshim.types import ToolSpec

__all__ = ["drop_undeclared_arguments"]


def drop_undeclared_arguments(
    calls: Sequence[ParsedCall], tools: Sequence[ToolSpec]
) -> tuple[list[ParsedCall], list[str]]:
    """The calls less the arguments their tool's schema does not declare (renamed instead
    where one names a missing parameter: :func:`_renames`), and less the optional ones given
    as ``null`` where that parameter's schema does not admit null; a warning for each kind of
    change to a call.

    Undeclared: only where the schema lists every parameter (``properties`` given,
    ``additionalProperties`` absent or false, no ``patternProperties``): such a tool would
    reject them, and re-asking a small model rarely helps — at temperature 0 it writes the same
    made-up ``"phone"`` again. ``null`` for an optional parameter (``country: null`` for "not
    said"; BFCL's own answers count it as not given) means the tool's default: left out, the
    call says that in the schema's terms, where a re-ask got the same ``null`` back twice
    (three of BFCL's ``live_simple`` cases lost so, on both Qwen models). The call that remains
    is validated as usual (a misspelt required parameter is still a missing one, and
    re-asked; a required one given as ``null`` too)."""
    by_name = {t.name: t for t in tools}
    kept: list[ParsedCall] = []
    warnings: list[str] = []
    for call in calls:
        tool = by_name.get(call.name)
        extra, nulls = _undeclared(call, tool), _null_optionals(call, tool)
        if not extra and not nulls:
            kept.append(call)
            continue
        renamed = _renames(call, tool, extra)
        extra = [k for k in extra if k not in renamed]
        dropped = {*extra, *nulls}
        arguments = {renamed.get(k, k): v for k, v in call.arguments.items() if k not in dropped}
        kept.append(replace(call, arguments=arguments, repaired=True))
        if renamed:
            shown = ", ".join(f"{k!r} to {p!r}" for k, p in renamed.items())
            warnings.append(
                f"renamed argument(s) {shown} of {call.name!r}: its schema declares the "
                "second, not the first"
            )
        if extra:
            warnings.append(
                f"dropped argument(s) {', '.join(repr(k) for k in extra)} of {call.name!r}, "
                "which its schema does not declare"
            )
        if nulls:
            warnings.append(
                f"left out optional argument(s) {', '.join(repr(k) for k in nulls)} of "
                f"{call.name!r}, given as null, which its schema does not admit: the tool's "
                "default applies"
            )
    return kept, warnings


def _null_optionals(call: ParsedCall, tool: ToolSpec | None) -> list[str]:
    if tool is None or call.problem is not None or not isinstance(call.arguments, Mapping):
        return []
    declared = tool.parameters.get("properties")
    if not isinstance(declared, Mapping):
        return []
    needed = set(tool.required)
    return [
        key
        for key, value in call.arguments.items()
        if value is None
        and key not in needed
        and isinstance(declared.get(key), Mapping)
        and not _admits_null(declared[key])
    ]


def _admits_null(schema: Mapping[str, Any]) -> bool:
    """Whether a parameter's schema plainly admits ``null``: a ``type`` that includes it (or
    no ``type`` at all), ``nullable`` (OpenAPI), ``null`` in its ``enum`` or ``const``, or a
    branch of ``anyOf``/``oneOf`` that does. A ``$ref`` is not followed: it is taken to admit
    null, so that the call is validated (and re-asked) as it was written."""
    if "$ref" in schema or schema.get("nullable") is True:
        return True
    for keyword in ("anyOf", "oneOf"):
        branches = schema.get(keyword)
        if isinstance(branches, list):
            return any(isinstance(b, Mapping) and _admits_null(b) for b in branches)
    if "enum" in schema:
        return isinstance(schema["enum"], list) and None in schema["enum"]
    if "const" in schema:
        return schema["const"] is None
    kind = schema.get("type")
    if kind is None:
        return True
    return kind == "null" or (isinstance(kind, list) and "null" in kind)


def _undeclared(call: ParsedCall, tool: ToolSpec | None) -> list[str]:
    if tool is None or call.problem is not None or not isinstance(call.arguments, Mapping):
        return []
    declared = tool.parameters.get("properties")
    others = tool.parameters.get("additionalProperties")
    if not isinstance(declared, Mapping) or not declared or others not in (None, False):
        return []  # a tool that declares no parameter says nothing about which it takes
    if tool.parameters.get("patternProperties"):
        return []
    return [key for key in call.arguments if key not in declared]


def _renames(call: ParsedCall, tool: ToolSpec | None, extra: Sequence[str]) -> dict[str, str]:
    """Undeclared keys that name one parameter the call lacks: the same words in another
    case or spelling (``companyName``, ``company-name``), or the parameter's first or last
    words (``company`` for ``company_name``, ``name`` for ``company_name``), or the parameter
    plus words (``city_name`` for ``city``). A key that fits several parameters, or a
    parameter that several keys fit, is left to be dropped."""
    if tool is None or not extra:
        return {}
    declared = tool.parameters.get("properties")
    if not isinstance(declared, Mapping):
        return {}
    absent = [p for p in declared if p not in call.arguments]
    fits = {k: [p for p in absent if _same_parameter(_split(k), _split(p))] for k in extra}
    chosen = {k: ps[0] for k, ps in fits.items() if len(ps) == 1}
    taken = list(chosen.values())
    return {k: p for k, p in chosen.items() if taken.count(p) == 1}


def _split(name: str) -> list[str]:
    """The words of a parameter name: ``companyName``, ``company_name`` and ``company-name``
    are ``["company", "name"]``."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    return [w for w in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if w]


def _same_parameter(key: list[str], parameter: list[str]) -> bool:
    if not key or not parameter:
        return False
    if key == parameter:
        return True
    short, long = sorted((key, parameter), key=len)
    return long[: len(short)] == short or long[-len(short) :] == short
