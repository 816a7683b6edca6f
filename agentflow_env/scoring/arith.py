"""Exact arithmetic on expression trees, with no ``eval``: used by the calculator and the 24 checker.

Expressions are parsed with :mod:`ast` after mapping ``×``/``÷``/``x``/``\\times``/``\\div`` to
``*``/``/``; only numbers, ``+ - * /``, bounded ``**`` and parentheses are allowed.
"""

from __future__ import annotations

import ast
import math
import re
from fractions import Fraction

__all__ = ["ArithmeticError_", "evaluate", "normalize_expression", "parse_numbers_and_ops"]

_MAX_EXPR_CHARS = 2_000
_MAX_POW = 1_000
# digits of numerator and denominator together; below Python's 4300-digit int-to-str limit, so a result always prints
_MAX_DIGITS = 4_000
_LOG10_2 = math.log10(2)

_SYMBOLS = {
    "×": "*",
    "✕": "*",
    "∗": "*",
    "·": "*",
    "⋅": "*",
    "÷": "/",
    "−": "-",
    "–": "-",
    "\\times": "*",
    "\\cdot": "*",
    "\\div": "/",
    "\\left": "",
    "\\right": "",
    "^": "**",
    "[": "(",
    "]": ")",
    "{": "(",
    "}": ")",
}
_SYMBOL_RE = re.compile("|".join(re.escape(k) for k in sorted(_SYMBOLS, key=len, reverse=True)))
# "x" between two operands means multiplication: "3 x 8", "(1+2)x8".
_GLUED_RE = re.compile(r"(?<![\w.])\d+(?:\.\d*)?(?![eE][+-]?\d)[A-Za-z]\w*")
_X_MUL_RE = re.compile(r"(?<=[\d)\s])\s*[xX]\s*(?=[\d(\s])")


class ArithmeticError_(ValueError):
    """The expression is not plain arithmetic, or it cannot be evaluated exactly."""


def normalize_expression(text: str) -> str:
    """Map the usual typographic operators to Python's and drop a trailing ``= value``."""
    expr = _SYMBOL_RE.sub(lambda m: _SYMBOLS[m.group(0)], text.strip())
    expr = _X_MUL_RE.sub("*", expr)
    expr = expr.replace("$", "").strip()
    if "=" in expr:
        expr = expr.split("=")[0].strip()
    return expr


def _parse(text: str) -> ast.expr:
    if len(text) > _MAX_EXPR_CHARS:
        raise ArithmeticError_(f"expression too long ({len(text)} characters; the limit is {_MAX_EXPR_CHARS})")
    expr = normalize_expression(text)
    if not expr:
        raise ArithmeticError_("empty expression")
    if glued := _GLUED_RE.search(expr):  # caught here: ast.parse would print a SyntaxWarning for it
        raise ArithmeticError_(f"a number runs into a name at {glued.group()!r}; put an operator between them")
    try:
        return ast.parse(expr, mode="eval").body
    except SyntaxError as exc:
        raise ArithmeticError_(f"not an arithmetic expression: {expr!r} ({exc.msg})") from None
    except (ValueError, RecursionError, MemoryError):
        raise ArithmeticError_(f"not an arithmetic expression: {expr[:80]!r}") from None


def _digits(value: Fraction) -> int:
    """An upper bound on the decimal digits of numerator and denominator together, without printing them."""
    bits = value.numerator.bit_length() + value.denominator.bit_length()
    return int(bits * _LOG10_2) + 2


def _check_size(value: Fraction) -> Fraction:
    if _digits(value) > _MAX_DIGITS:
        raise ArithmeticError_(f"the result is too large to compute exactly (more than {_MAX_DIGITS} digits)")
    return value


def _number(node: ast.Constant) -> Fraction:
    value = node.value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ArithmeticError_(f"only numbers are allowed, not {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ArithmeticError_(f"the number {value} is out of range; write it as a power of ten, e.g. 10**400")
    return _check_size(Fraction(value) if isinstance(value, int) else Fraction(str(value)))


def _pow(base: Fraction, exp: Fraction) -> Fraction:
    if exp.denominator != 1:
        raise ArithmeticError_("fractional powers are not exact; use the Python tool for them")
    if abs(exp) > _MAX_POW:
        raise ArithmeticError_(f"exponent {exp} is too large (limit {_MAX_POW})")
    if base == 0 and exp < 0:
        raise ArithmeticError_("division by zero")
    if abs(base) != 1 and base != 0 and (_digits(base) - 1) * abs(exp) > _MAX_DIGITS:  # bounded before computing
        raise ArithmeticError_(f"the result is too large to compute exactly (more than {_MAX_DIGITS} digits)")
    return base ** int(exp)


def _eval(node: ast.expr, allow_pow: bool, leaves: list[Fraction] | None, ops: list[str] | None) -> Fraction:
    if isinstance(node, ast.Constant):
        value = _number(node)
        if leaves is not None:
            leaves.append(value)
        return value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        if ops is not None:
            ops.append("neg" if isinstance(node.op, ast.USub) else "pos")
        inner = _eval(node.operand, allow_pow, leaves, ops)
        return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.BinOp):
        left = _eval(node.left, allow_pow, leaves, ops)
        right = _eval(node.right, allow_pow, leaves, ops)
        op = node.op
        if ops is not None:
            ops.append(type(op).__name__)
        if isinstance(op, ast.Add):
            result = left + right
        elif isinstance(op, ast.Sub):
            result = left - right
        elif isinstance(op, ast.Mult):
            result = left * right
        elif isinstance(op, ast.Div):
            if right == 0:
                raise ArithmeticError_("division by zero")
            result = left / right
        elif isinstance(op, ast.Pow) and allow_pow:
            result = _pow(left, right)
        else:
            raise ArithmeticError_(f"operator {type(op).__name__} is not allowed")
        return _check_size(result)
    raise ArithmeticError_(f"{type(node).__name__} is not allowed in arithmetic; use numbers, + - * / and parentheses")


def evaluate(text: str, *, allow_pow: bool = True) -> Fraction:
    """Evaluate ``text`` exactly as a :class:`~fractions.Fraction`; raises :class:`ArithmeticError_`."""
    try:
        return _eval(_parse(text), allow_pow, None, None)
    except RecursionError:
        raise ArithmeticError_("expression is nested too deeply") from None


def parse_numbers_and_ops(text: str) -> tuple[Fraction, list[Fraction], list[str]]:
    """Evaluate ``text`` (no powers) and also return its number leaves and operator names."""
    leaves: list[Fraction] = []
    ops: list[str] = []
    try:
        value = _eval(_parse(text), False, leaves, ops)
    except RecursionError:
        raise ArithmeticError_("expression is nested too deeply") from None
    return value, leaves, ops


def format_fraction(value: Fraction) -> str:
    """``3`` for integers, ``7/2 (= 3.5)`` otherwise."""
    if value.denominator == 1:
        return str(value.numerator)
    return f"{value.numerator}/{value.denominator} (≈ {float(value):.10g})"
