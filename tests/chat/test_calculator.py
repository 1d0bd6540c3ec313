"""The calculator demo tool: agrees with Python's arithmetic, refuses everything else."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from toolshim.builtins.calculator import MAX_INT_BITS, evaluate

NUMBERS = st.one_of(
    st.integers(min_value=-1000, max_value=1000),
    st.floats(min_value=-1000, max_value=1000, allow_nan=False, allow_infinity=False).map(
        lambda x: round(x, 3)
    ),
)
OPERATORS = st.sampled_from(["+", "-", "*", "/", "//", "%"])


@st.composite
def expressions(draw: st.DrawFn, depth: int = 3) -> str:
    """Random arithmetic: numbers, the six operators, unary minus, parentheses, small powers."""
    if depth == 0 or draw(st.booleans()):
        number = draw(NUMBERS)
        text = repr(number)
        return f"({text})" if number < 0 else text
    kind = draw(st.sampled_from(["binary", "binary", "unary", "power", "paren"]))
    if kind == "unary":
        return f"-{draw(expressions(depth - 1))}"
    if kind == "paren":
        return f"({draw(expressions(depth - 1))})"
    if kind == "power":
        base = draw(st.integers(min_value=-20, max_value=20))
        exponent = draw(st.integers(min_value=0, max_value=6))
        return f"({base}) ** {exponent}"
    left, right = draw(expressions(depth - 1)), draw(expressions(depth - 1))
    return f"({left}) {draw(OPERATORS)} ({right})"


@settings(max_examples=300, deadline=None)
@given(expressions())
def test_agrees_with_python_on_random_arithmetic(expression: str) -> None:
    try:
        expected = eval(expression, {"__builtins__": {}}, {})  # the reference, in the test only
    except ZeroDivisionError:
        with pytest.raises(ValueError, match="division by zero"):
            evaluate(expression)
        return
    except OverflowError:
        with pytest.raises(ValueError, match=r"too large|not finite"):
            evaluate(expression)
        return
    assume(not isinstance(expected, complex))
    assume(not (isinstance(expected, float) and not math.isfinite(expected)))
    result = evaluate(expression)
    assert type(result) is type(expected)
    assert result == expected or (math.isnan(result) and math.isnan(expected))


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("17 * 23", 391),
        ("2 ** 10", 1024),
        ("-2 ** 2", -4),
        ("(1 + 2) * 3", 9),
        ("7 // 2 + 7 % 2", 4),
        ("10 / 4", 2.5),
        ("sqrt(16)", 4.0),
        ("max(3, 9, 4) - min(2, 8)", 7),
        ("round(pi, 2)", 3.14),
        ("log(8, 2)", 3.0),
        ("factorial(5)", 120),
        ("3 × 4 ÷ 2", 6.0),
        ("2 ** -1", 0.5),
    ],
)
def test_evaluates_arithmetic_and_functions(expression: str, value: float) -> None:
    assert evaluate(expression) == pytest.approx(value)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("__import__('os')", "the function '__import__' is not allowed"),
        ("__import__('os').system('true')", "calling an attribute access is not allowed"),
        ("open('/etc/passwd')", "the function 'open' is not allowed"),
        ("x + 1", "the name 'x' is not allowed"),
        ("(1).__class__", "an attribute access is not allowed"),
        ("math.sqrt(4)", "calling an attribute access is not allowed"),
        ("[1, 2][0]", "indexing is not allowed"),
        ("'a' * 3", "the value 'a' is not allowed"),
        ("True + 1", "the value True is not allowed"),
        ("1 if 2 else 3", "'if … else' is not allowed"),
        ("(lambda: 1)()", "calling a lambda is not allowed"),
        ("2 ^ 3", "write powers as '**'"),
        ("1 < 2", "a comparison is not allowed"),
        ("sqrt(x=4)", "keyword arguments"),
        ("9 ** 9 ** 9", "too large"),
        ("2 ** 100000", "too large"),
        ("10 ** 5000", "too large"),
        ("factorial(100000)", "too large"),
        ("1e308 * 10", "not finite"),
        ("1 / 0", "division by zero"),
        ("5 % 0", "division by zero"),
        ("sqrt(-1)", "is undefined"),
        ("(-8) ** 0.5", "no real result"),
        ("sqrt(1, 2)", "takes 1 argument"),
        ("", "empty"),
        ("1 +", "not an arithmetic expression"),
        ("1" * 3000, "characters long"),
    ],
)
def test_rejects_everything_but_arithmetic(expression: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        evaluate(expression)


def test_a_large_but_allowed_integer_is_exact() -> None:
    value = evaluate("2 ** 9000 + 1")
    assert value == 2**9000 + 1
    assert value.bit_length() <= MAX_INT_BITS


@given(st.integers(min_value=2, max_value=10**6), st.integers(min_value=1, max_value=10**6))
def test_powers_are_refused_exactly_when_they_exceed_the_bound(base: int, exponent: int) -> None:
    bits = exponent * math.log2(base)
    if bits > MAX_INT_BITS + 1:
        with pytest.raises(ValueError, match="too large"):
            evaluate(f"{base} ** {exponent}")
    elif bits < MAX_INT_BITS - 1:
        assert evaluate(f"{base} ** {exponent}") == base**exponent
