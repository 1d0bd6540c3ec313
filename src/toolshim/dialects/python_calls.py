"""Calls written as Python: ``[f(a=1), g(b="x")]``, ``f(a=1)``, ``print(f(a=1))``, a call quoted
as a string in a list, calls nested as arguments (the inner one first), names that are not
identifiers (``get-weather(...)``), curly quotes; read with :mod:`ast`, else with the
bracket-aware scanner."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from toolshim.dialects._scan import find_close, literal
from toolshim.dialects.calls import NOT_A_CALL, Interpretation, ParsedCall, ToolIndex

__all__ = ["call_list_problem", "interpret_python", "quoted_call", "shared_keyword_calls"]

_CALL_HEAD = re.compile(r"[\w\-][\w.\-]*\s*\(")
"""A call's name and its opening bracket."""


_QUOTED_CALL_MAX = 64 * 1024
"""Longer strings in a list are data, never parsed as Python."""


def quoted_call(text: str, index: ToolIndex) -> Interpretation:
    """A list item that is a Python call written as a string: ``["get_weather(city='Riga')"]``.

    Qwen2.5-Coder-1.5B quotes its calls this way under the pythonic prompt now and then (9 of
    its 300 BFCL replies). Only calls to offered tools count, so a list of strings that merely
    looks like code stays data.
    """
    if "(" not in text or len(text) > _QUOTED_CALL_MAX:
        return NOT_A_CALL
    return interpret_python(text, index, require_known=True)


def interpret_python(source: str, index: ToolIndex, *, require_known: bool) -> Interpretation:
    """Interpret Python-style calls: ``[f(a=1), g(b="x")]``, ``f(a=1)``, ``print(f(a=1))``.

    Names that are not Python identifiers (``get-weather(...)``) are read too. With
    ``require_known`` every called function must be an offered tool (so that code in an answer
    is not mistaken for calls); otherwise unknown names come back for the re-ask.
    """
    found = _ast_calls(source)
    if found is None and (straight := _straight_quoted(source)) is not None:
        source = straight
        found = _ast_calls(source)
    if found is None:
        found = _scanned_calls(source)
    if not found:
        return NOT_A_CALL
    calls = []
    for dotted, node in found:
        if require_known and index.resolve(dotted) is None:
            return NOT_A_CALL
        calls += _nested_first(node, index.canonical(dotted), index, source)
    return Interpretation(tuple(calls))


_NESTED_DEPTH = 4


def _nested_first(
    node: ast.Call, name: str, index: ToolIndex, raw: str, depth: int = 0
) -> list[ParsedCall]:
    """The call, after the calls of offered tools written as its arguments (innermost first):
    ``[convert_currency(amount=get_stock_price("TSLA"), to="BTC")]``, the 1.5B's two steps in
    one, is ``get_stock_price("TSLA")`` and a ``convert_currency`` that waits for it
    (:attr:`ParsedCall.waits_for`)."""
    values = [*node.args, *(k.value for k in node.keywords)]
    inner = [
        (v, tool)
        for v in values
        if isinstance(v, ast.Call)
        and (dotted := _dotted(v.func)) is not None
        and (tool := index.resolve(dotted)) is not None
    ]
    if not inner or depth >= _NESTED_DEPTH:
        return [_python_call(node, name, index, raw)]
    calls: list[ParsedCall] = []
    for value, tool in inner:
        calls += _nested_first(value, index.canonical(tool), index, raw, depth + 1)
    nested = {id(v) for v, _ in inner}
    rest = ast.Call(
        node.func,
        [a for a in node.args if id(a) not in nested],
        [k for k in node.keywords if id(k.value) not in nested],
    )
    # Positional arguments after a nested one would shift: keyword ones only then.
    if any(id(a) in nested for a in node.args):
        rest = ast.Call(node.func, [], rest.keywords)
    waiting = _python_call(rest, name, index, raw)
    calls.append(replace(waiting, waits_for=tuple(index.canonical(t) for _, t in inner)))
    return calls


def shared_keyword_calls(source: str, index: ToolIndex) -> Interpretation:
    """A list of calls closed by arguments meant for all of them: ``[f(show="Friends"),
    f(show="The Office"), sort_by_rating=True]`` (Qwen2.5-Coder-1.5B on BFCL's ``parallel_5``;
    re-asked, it wrote the same list twice more). Each trailing ``name=value`` goes to every
    call whose tool declares ``name`` and that does not set it; it must be declared by a
    called tool, and every call must be to an offered tool. NOT_A_CALL otherwise."""
    text = source.strip()
    if not (text.startswith("[") and text.endswith("]")):
        return NOT_A_CALL
    try:
        node = ast.parse(f"_f({text[1:-1]})", mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return NOT_A_CALL
    if not isinstance(node, ast.Call) or not node.args or not node.keywords:
        return NOT_A_CALL
    named: list[tuple[str, ast.Call]] = []
    for item in node.args:
        dotted = _dotted(item.func) if isinstance(item, ast.Call) else None
        tool = index.resolve(dotted) if dotted is not None else None
        if tool is None or not isinstance(item, ast.Call):
            return NOT_A_CALL
        named.append((tool, item))
    shared = node.keywords
    if any(
        kw.arg is None or all(kw.arg not in index.parameters(t) for t, _ in named) for kw in shared
    ):
        return NOT_A_CALL
    calls = []
    for tool, item in named:
        given = {kw.arg for kw in item.keywords}
        extra = [kw for kw in shared if kw.arg not in given and kw.arg in index.parameters(tool)]
        whole = ast.Call(item.func, item.args, [*item.keywords, *extra])
        calls.append(_python_call(whole, tool, index, source))
    return Interpretation(tuple(calls))


def call_list_problem(source: str) -> str | None:
    """What is wrong with a Python list of calls that did not read as one, for the re-ask: not
    valid Python (a keyword argument outside its call, an apostrophe inside single quotes), or
    an item that is not a call (``[f(x=1), True]``). None when neither is the case."""
    text = source.strip()
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        where = f", line {exc.lineno}" if exc.lineno else ""
        return (
            f"the list of calls is not valid Python ({exc.msg}{where}); write every argument "
            "inside its call's parentheses and strings in double quotes"
        )
    except (ValueError, RecursionError, MemoryError):
        return None
    items = tree.body.elts if isinstance(tree.body, ast.List) else []
    stray = next((item for item in items if not isinstance(item, ast.Call)), None)
    if stray is None:
        return None
    shown = ast.get_source_segment(text, stray) or "a value"
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    return (
        f"the list of calls also holds {shown}, which is not a call; write every argument "
        "inside its call's parentheses, as name=value"
    )


_CURLY_STRING = re.compile(r"“([^“”\"\\\n]*)”|‘([^‘’'\\\n]*)’")
"""A string between typographic quotes: the 1.5B, handed ``[list_orders(`` to continue,
wrote ``[list_orders(“u-17”)]``."""


def _straight_quoted(source: str) -> str | None:
    """``source`` with its strings between typographic quotes in straight ones, or None when
    it has none."""
    straight = _CURLY_STRING.sub(
        lambda m: json.dumps(m.group(1) if m.group(1) is not None else m.group(2)), source
    )
    return straight if straight != source else None


def _ast_calls(source: str) -> list[tuple[str, ast.Call]] | None:
    try:
        tree = ast.parse(source.strip(), mode="exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    nodes: list[ast.expr] = []
    for stmt in tree.body:
        if not isinstance(stmt, ast.Expr):
            return None
        expr = stmt.value
        nodes.extend(expr.elts if isinstance(expr, (ast.List, ast.Tuple)) else [expr])
    out = []
    for node in nodes:
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "print"
            and len(node.args) == 1
            and isinstance(node.args[0], ast.Call)
        ):
            node = node.args[0]  # Gemma's tool_code: print(get_weather(city="Paris"))
        if not isinstance(node, ast.Call):
            return None
        dotted = _dotted(node.func)
        if dotted is None:
            return None
        out.append((dotted, node))
    return out


def _scanned_calls(source: str) -> list[tuple[str, ast.Call]] | None:
    """Calls whose names are not identifiers: ``[get-weather(city="x"), 2fa.check()]``."""
    text = source.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    out: list[tuple[str, ast.Call]] = []
    pos = 0
    while True:
        while pos < len(text) and (text[pos].isspace() or text[pos] in ",;"):
            pos += 1
        if pos >= len(text):
            return out
        head = _CALL_HEAD.match(text, pos)
        if head is None:
            return None
        name = text[pos : head.end() - 1].strip()
        end = find_close(text, head.end() - 1)
        if end < 0:
            return None
        try:
            node = ast.parse(f"_f({text[head.end() : end - 1]})", mode="eval").body
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        if not isinstance(node, ast.Call):
            return None
        out.append((name, node))
        pos = end


def _dotted(node: ast.expr) -> str | None:
    """``a.b.c`` for a chain of attributes on a name (without recursion: chains can be long)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _python_call(node: ast.Call, name: str, index: ToolIndex, raw: str) -> ParsedCall:
    arguments: dict[str, Any] = {}
    problem = None
    order = index.parameter_order(name)
    unquoted = False
    try:
        for i, arg in enumerate(node.args):
            if i >= len(order):
                problem = f"{name!r} got a positional argument it has no parameter for"
                break
            arguments[order[i]], bare = _argument(arg, index.parameter_type(name, order[i]))
            unquoted = unquoted or bare
        for kw in node.keywords:
            if kw.arg is None:
                value = literal(kw.value)
                if not isinstance(value, Mapping):
                    raise ValueError("** must be followed by a dict of arguments")
                arguments.update(value)
                continue
            arguments[kw.arg], bare = _argument(kw.value, index.parameter_type(name, kw.arg))
            unquoted = unquoted or bare
    except ValueError as exc:
        problem = f"the arguments of {name!r} must be literal values: {exc}"
    return ParsedCall(name, arguments, raw, problem, repaired=unquoted and problem is None)


def _argument(node: ast.expr, kind: str | None) -> tuple[Any, bool]:
    """An argument's value, and whether it was a string written without quotes: a bare name
    or dotted name (``workspace``, ``log.txt``) where the parameter takes a string. Re-asked
    as "'workspace' is a name, not a value", the 1.5B wrote ``cd(folder=workspace)`` and
    ``mv(log.txt, archive)`` again on BFCL's file system. Whether the value was said is
    the checks' to judge, as for any value."""
    if kind == "string" and not (
        isinstance(node, ast.Name) and node.id.lower() in ("true", "false", "null", "none")
    ):
        bare = _dotted(node)
        if bare is not None:
            return bare, True
    return literal(node), False
