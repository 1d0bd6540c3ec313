"""A safe arithmetic evaluator: walks the expression's syntax tree, never calls ``eval``.

Allowed: numbers, ``+ - * / // % **``, unary ``+``/``-``, parentheses, the constants ``pi``,
``e``, ``tau`` and a few functions (:data:`FUNCTIONS`). Everything else (names, attributes,
subscripts, comprehensions, keyword arguments, strings) is rejected with a message that says
what was found and what is allowed. Results are bounded: an integer may have at most
:data:`MAX_INT_BITS` bits (``10**100000`` is refused before it is computed) and a float must
be finite.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

__all__ = ["CONSTANTS", "FUNCTIONS", "MAX_EXPRESSION_LENGTH", "MAX_INT_BITS", "evaluate"]

Number = int | float

MAX_INT_BITS = 10_000
"""The largest integer result, in bits (about 3,000 decimal digits)."""

MAX_EXPRESSION_LENGTH = 2_000
"""The longest expression accepted, in characters."""

_MAX_FACTORIAL = 1_000

CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "tau": math.tau}


def _factorial(n: Number) -> int:
    if isinstance(n, float):
        if not n.is_integer():
            raise ValueError(f"factorial needs a whole number, not {n!r}")
        n = int(n)
    if n < 0:
        raise ValueError(f"factorial needs a number of at least 0, not {n}")
    if n > _MAX_FACTORIAL:
        raise ValueError(f"factorial of {n} is too large (at most {_MAX_FACTORIAL}!)")
    return math.factorial(n)


def _log(x: Number, base: Number | None = None) -> float:
    return math.log(x) if base is None else math.log(x, base)


def _round(x: Number, digits: Number | None = None) -> Number:
    if digits is None:
        return round(x)
    if not isinstance(digits, int):
        raise ValueError(f"round's number of digits must be a whole number, not {digits!r}")
    return round(x, digits)


FUNCTIONS: dict[str, tuple[Callable[..., Number], int, int]] = {
    # name: (function, fewest arguments, most arguments)
    "abs": (abs, 1, 1),
    "round": (_round, 1, 2),
    "min": (min, 1, 64),
    "max": (max, 1, 64),
    "sqrt": (math.sqrt, 1, 1),
    "exp": (math.exp, 1, 1),
    "log": (_log, 1, 2),
    "log10": (math.log10, 1, 1),
    "log2": (math.log2, 1, 1),
    "sin": (math.sin, 1, 1),
    "cos": (math.cos, 1, 1),
    "tan": (math.tan, 1, 1),
    "asin": (math.asin, 1, 1),
    "acos": (math.acos, 1, 1),
    "atan": (math.atan, 1, 1),
    "atan2": (math.atan2, 2, 2),
    "hypot": (math.hypot, 1, 64),
    "degrees": (math.degrees, 1, 1),
    "radians": (math.radians, 1, 1),
    "floor": (math.floor, 1, 1),
    "ceil": (math.ceil, 1, 1),
    "factorial": (_factorial, 1, 1),
}

_BINARY: dict[type[ast.operator], tuple[str, Callable[[Any, Any], Any]]] = {
    ast.Add: ("+", operator.add),
    ast.Sub: ("-", operator.sub),
    ast.Mult: ("*", operator.mul),
    ast.Div: ("/", operator.truediv),
    ast.FloorDiv: ("//", operator.floordiv),
    ast.Mod: ("%", operator.mod),
    ast.Pow: ("**", operator.pow),
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
_NOT_ARITHMETIC = {
    ast.BitXor: "'^' (write powers as '**', e.g. 2**10)",
    ast.BitAnd: "'&'",
    ast.BitOr: "'|'",
    ast.LShift: "'<<'",
    ast.RShift: "'>>'",
    ast.MatMult: "'@'",
}
_ALLOWED = (
    "numbers, + - * / // % **, parentheses, the constants "
    + ", ".join(CONSTANTS)
    + " and the functions "
    + ", ".join(FUNCTIONS)
)
_TYPOGRAPHIC = str.maketrans({"×": "*", "÷": "/", "−": "-", "·": "*"})


def evaluate(expression: str) -> Number:
    """The value of an arithmetic ``expression``; ValueError says what is wrong with it.

    >>> evaluate("(2 + 3) * 4 ** 2 / 8")
    10.0
    >>> evaluate("sqrt(16) + 7 // 2")
    7.0
    """
    if not isinstance(expression, str):
        raise ValueError(f"the expression must be text, not {type(expression).__name__}")
    text = expression.translate(_TYPOGRAPHIC).strip()
    if not text:
        raise ValueError("the expression is empty; send arithmetic such as '17 * 23'")
    if len(text) > MAX_EXPRESSION_LENGTH:
        raise ValueError(
            f"the expression is {len(text)} characters long; at most {MAX_EXPRESSION_LENGTH}"
        )
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ValueError(
            f"{expression!r} is not an arithmetic expression ({exc.msg}); allowed: {_ALLOWED}"
        ) from None
    except (ValueError, MemoryError, RecursionError) as exc:
        raise ValueError(f"{expression!r} cannot be read: {exc}") from None
    try:
        return _Evaluator(expression).visit(tree.body)
    except RecursionError:
        raise ValueError(f"{expression!r} is nested too deeply") from None


class _Evaluator:
    def __init__(self, expression: str) -> None:
        self.expression = expression

    def visit(self, node: ast.AST) -> Number:
        if isinstance(node, ast.Constant):
            return self._constant(node.value)
        if isinstance(node, ast.BinOp):
            return self._binary(node)
        if isinstance(node, ast.UnaryOp):
            operation = _UNARY.get(type(node.op))
            if operation is None:
                raise self._refuse(f"the operator {_describe(node.op)}")
            return self._checked(operation(self.visit(node.operand)))
        if isinstance(node, ast.Name):
            if node.id in CONSTANTS:
                return CONSTANTS[node.id]
            raise self._refuse(f"the name {node.id!r}")
        if isinstance(node, ast.Call):
            return self._call(node)
        raise self._refuse(_describe(node))

    def _constant(self, value: Any) -> Number:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self._refuse(f"the value {value!r}")
        return self._checked(value)

    def _binary(self, node: ast.BinOp) -> Number:
        known = _BINARY.get(type(node.op))
        if known is None:
            raise self._refuse(
                f"the operator {_NOT_ARITHMETIC.get(type(node.op), _describe(node.op))}"
            )
        symbol, operation = known
        left, right = self.visit(node.left), self.visit(node.right)
        if symbol == "**":
            _check_power(left, right)
        try:
            result = operation(left, right)
        except ZeroDivisionError:
            raise ValueError(f"division by zero in {self.expression!r}") from None
        except OverflowError:
            raise ValueError(f"the result of {self.expression!r} is too large") from None
        if isinstance(result, complex):
            raise ValueError(
                f"{left!r} {symbol} {right!r} has no real result (a negative number to a "
                "fractional power)"
            )
        return self._checked(result)

    def _call(self, node: ast.Call) -> Number:
        if not isinstance(node.func, ast.Name):
            raise self._refuse(f"calling {_describe(node.func)}")
        name = node.func.id
        if name not in FUNCTIONS:
            raise self._refuse(f"the function {name!r}")
        if node.keywords:
            raise self._refuse(f"keyword arguments in {name}()")
        function, fewest, most = FUNCTIONS[name]
        if not fewest <= len(node.args) <= most:
            wanted = str(fewest) if fewest == most else f"{fewest} to {most}"
            raise ValueError(f"{name}() takes {wanted} argument(s), not {len(node.args)}")
        args = [self.visit(arg) for arg in node.args]
        try:
            return self._checked(function(*args))
        except (ValueError, ArithmeticError) as exc:
            shown = ", ".join(repr(a) for a in args)
            raise ValueError(f"{name}({shown}) is undefined: {exc}") from None

    def _checked(self, value: Any) -> Number:
        if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
            raise ValueError(
                f"the result of {self.expression!r} is too large (more than {MAX_INT_BITS} bits)"
            )
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"the result of {self.expression!r} is not finite ({value})")
        return int(value) if isinstance(value, bool) else value

    def _refuse(self, what: str) -> ValueError:
        return ValueError(f"{what} is not allowed in {self.expression!r}; allowed: {_ALLOWED}")


def _check_power(base: Number, exponent: Number) -> None:
    """Refuse a power whose result would exceed the bounds, before computing it."""
    if abs(base) <= 1 or exponent <= 0:
        return
    bits = float(exponent) * math.log2(abs(base))
    if bits > MAX_INT_BITS:
        raise ValueError(
            f"{base!r} ** {exponent!r} is too large (about {bits:,.0f} bits; at most "
            f"{MAX_INT_BITS})"
        )


def _describe(node: ast.AST) -> str:
    names = {
        ast.Attribute: "an attribute access",
        ast.Subscript: "indexing",
        ast.Lambda: "a lambda",
        ast.Compare: "a comparison",
        ast.BoolOp: "'and'/'or'",
        ast.IfExp: "'if … else'",
        ast.Not: "'not'",
        ast.Invert: "'~'",
        ast.List: "a list",
        ast.Tuple: "a tuple",
        ast.Dict: "a dict",
        ast.Set: "a set",
        ast.JoinedStr: "an f-string",
        ast.NamedExpr: "an assignment",
    }
    for kind, text in names.items():
        if isinstance(node, kind):
            return text
    return type(node).__name__
