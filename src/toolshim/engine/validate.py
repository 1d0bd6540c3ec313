"""Validation of parsed calls against the offered tools, their JSON Schemas and ``tool_choice``.

A verdict is data: the calls that may be returned and a list of problems, each a sentence
that names exactly what was wrong and what is allowed. :func:`reask_message` turns the
problems into the correction sent back to the model.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolshim.dialects.base import Dialect, PromptOptions
from toolshim.dialects.interpret import ParsedCall
from toolshim.schema_quirks import as_meant
from toolshim.schemas import checker, inspect_tool
from toolshim.types import ToolChoice, ToolSpec

__all__ = ["Verdict", "coerce_arguments", "reask_message", "validate_calls"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """The calls that passed, and what was wrong (empty when the reply may be returned)."""

    calls: tuple[ParsedCall, ...]
    problems: tuple[str, ...]
    warnings: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems


def validate_calls(
    calls: Sequence[ParsedCall],
    tools: Sequence[ToolSpec],
    choice: ToolChoice,
    *,
    parallel: bool = True,
    max_calls: int | None = None,
    truncated: bool = False,
) -> Verdict:
    """Check names, arguments and the tool_choice/parallel rules; coerce obvious scalar drift.

    ``truncated`` says the reply stopped at ``max_tokens``: a call that only parsed after
    repair may have lost the end of an argument, so it is not trusted. A tool schema that is
    not safe to check (:mod:`toolshim.schemas`) raises :class:`InvalidRequestError`.
    """
    by_name = {t.name: t for t in tools if t.is_function}
    available = ", ".join(repr(n) for n in by_name) or "(none)"
    problems: list[str] = []
    warnings: list[str] = []
    good: list[ParsedCall] = []
    for call in calls:
        if call.problem:
            problems.append(call.problem if not call.name else f"{call.name!r}: {call.problem}")
            continue
        tool = by_name.get(call.name)
        if tool is None:
            problems.append(
                f"there is no tool named {call.name!r}; the available tools are {available}"
            )
            continue
        if not isinstance(call.arguments, Mapping):
            problems.append(f"the arguments of {call.name!r} must be a JSON object")
            continue
        arguments = coerce_arguments(call.arguments, tool.parameters)
        errors, schema_ok = _schema_errors(arguments, tool)
        if not schema_ok:
            warnings.append(f"the schema of {tool.name!r} is not a valid JSON Schema; not checked")
        if errors:
            problems.append(
                f"the arguments of {call.name!r} do not match its schema: {'; '.join(errors)}. "
                f"Its arguments schema is {json.dumps(tool.parameters, ensure_ascii=False)}"
            )
            continue
        good.append(ParsedCall(call.name, arguments, call.raw, None, call.repaired))

    if truncated and any(c.repaired for c in calls):
        problems.append("the reply was cut off by max_tokens in the middle of a tool call")
    limit = 1 if not parallel else max_calls
    if choice.kind == "none" and calls:
        problems.append("no tool may be called now (tool_choice is 'none'); answer in text")
    elif choice.kind == "required" and not calls:
        problems.append(
            f"you must call at least one tool (tool_choice is 'required'); "
            f"the available tools are {available}"
        )
    elif choice.kind == "function":
        others = sorted({c.name for c in calls if c.name != choice.name})
        if others:
            problems.append(
                f"only the tool {choice.name!r} may be called now, not "
                + ", ".join(repr(o) for o in others)
            )
        elif not calls:
            problems.append(f"you must call the tool {choice.name!r} now")
        limit = 1
    if limit is not None and len(calls) > limit and not problems:
        # Every call is valid, there are just too many: keep the first ones rather than spend
        # a re-ask (small models add a second call even after being corrected).
        why = (
            "tool_choice names one function"
            if choice.kind == "function"
            else ("parallel_tool_calls is false" if not parallel else f"the dialect allows {limit}")
        )
        warnings.append(f"kept the first {limit} of {len(calls)} calls ({why})")
        good = good[:limit]
    return Verdict(tuple(good), tuple(problems), tuple(warnings))


def reask_message(
    problems: Sequence[str],
    tools: Sequence[ToolSpec],
    dialect: Dialect,
    options: PromptOptions,
    *,
    reminder: bool = True,
) -> str:
    """The correction sent back to the model: what was wrong, and how to answer instead
    (``reminder``: with the dialect's format reminder)."""
    lines = ["Your last reply could not be used:"]
    lines += [f"- {p}" for p in problems]
    lines.append("")
    if reminder:
        lines.append(dialect.format_reminder(tools, options))
    if options.choice.kind == "auto":
        lines.append("If no tool is needed, answer in plain text instead.")
    lines.append("Reply again, correctly.")
    return "\n".join(lines)


# -- schema checking ----------------------------------------------------------------------------


def _schema_errors(arguments: Mapping[str, Any], tool: ToolSpec) -> tuple[list[str], bool]:
    """The first problems of ``arguments`` against the tool's schema, and whether the schema
    could be checked at all (False: not a valid JSON Schema)."""
    inspect_tool(tool)
    try:
        check = checker(tool.schema_text, as_meant)
    except (TypeError, ValueError):
        return [], False
    if check is None:
        return [], False
    try:
        errors = check.errors(dict(arguments), name=tool.name)
    except RecursionError:
        return ["the arguments are nested too deeply to be checked"], True
    errors.sort(key=lambda e: [str(p) for p in e.absolute_path])
    out = []
    for error in errors[:3]:
        where = "/".join(str(p) for p in error.absolute_path)
        out.append(f"{error.message} (at {where})" if where else error.message)
    return out, True


_TRUE = {"true", "yes", "1"}
_FALSE = {"false", "no", "0"}


def coerce_arguments(arguments: Mapping[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    """Fix the scalar drift small models make: ``"5"`` for an integer, ``"true"`` for a boolean.

    Only values whose conversion is exact are changed; everything else is left for the schema
    check to report.
    """
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return dict(arguments)
    out = dict(arguments)
    for key, value in arguments.items():
        spec = props.get(key)
        if isinstance(spec, Mapping):
            out[key] = _coerce(value, spec)
    return out


def _coerce(value: Any, spec: Mapping[str, Any]) -> Any:
    kind = spec.get("type")
    kinds = set(kind) if isinstance(kind, list) else {kind}
    if isinstance(value, str):
        text = value.strip()
        if "string" in kinds:
            return value
        if "integer" in kinds and _is_int(text):
            return int(text)
        if "number" in kinds:
            try:
                number = float(text)
            except ValueError:
                return value
            return int(number) if number.is_integer() and "." not in text else number
        if "boolean" in kinds and text.lower() in _TRUE | _FALSE:
            return text.lower() in _TRUE
        if ("array" in kinds or "object" in kinds) and text[:1] in "[{":
            try:
                return json.loads(text)
            except ValueError:
                return value
        return value
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and "string" in kinds and not kinds & {"integer", "number"}:
        return str(value)
    if isinstance(value, float) and "integer" in kinds and value.is_integer():
        return int(value)
    if isinstance(value, Mapping) and "object" in kinds:
        return coerce_arguments(value, spec)
    return value


def _is_int(text: str) -> bool:
    return text.lstrip("-+").isdigit()
