"""The calculator tool: exact rational arithmetic without ``eval``; sympy for symbolic input."""

from __future__ import annotations

import math
import re
import threading
from typing import Any

from agentflow_env.arith import ArithmeticError_, evaluate, format_fraction
from agentflow_env.tools.base import BaseTool
from agentflow_env.types import ToolResult


class CalculatorTool(BaseTool):
    """Evaluates arithmetic exactly (fractions, not floats); several expressions may be given, one per line."""

    name = "Calculator_Tool"
    description = (
        "Evaluates arithmetic exactly with fractions: numbers, + - * / ** and parentheses "
        "(also x, ×, ÷), and symbolic maths with sympy (sqrt, log, pi, factorial, simplify, solve). "
        "Several expressions may be given, one per line or separated by ';'."
    )
    input_spec = "one or more arithmetic expressions"
    examples = ("(13 - 1) * (8 / 4)",)
    max_expressions = 64

    def _run(self, command: str, timeout: float) -> ToolResult:
        exprs = [e.strip() for e in command.replace(";", "\n").splitlines() if e.strip()]
        if not exprs:
            return ToolResult(
                text="Error: empty command; give an arithmetic expression such as 3*(4+4)",
                ok=False,
                error="empty command",
            )
        if len(exprs) > self.max_expressions:
            return ToolResult(
                text=f"Error: {len(exprs)} expressions; give at most {self.max_expressions} per call",
                ok=False,
                error="too many expressions",
            )
        lines, errors = [], []
        for expr in exprs:
            try:
                lines.append(f"{expr} = {format_fraction(evaluate(expr))}")
            except ArithmeticError_ as exc:
                symbolic = self._symbolic(expr)
                if symbolic is not None:
                    lines.append(f"{expr} = {symbolic}")
                else:
                    lines.append(f"{expr} -> Error: {exc}")
                    errors.append(str(exc))
        ok = len(errors) < len(exprs)
        return ToolResult(text="\n".join(lines), ok=ok, error="; ".join(errors) or None)

    @staticmethod
    def _symbolic(expr: str) -> str | None:
        """Symbolic fallback (sqrt, log, pi, simplify, ...) with sympy; None when the input is not accepted.

        The text is first checked against a whitelist (known function and constant names, one-letter symbols,
        numbers and operators: no attributes, strings, brackets or dunders), then parsed by sympy's parser with
        a namespace holding only those names and no builtins. Size guards reject power towers, huge factorials
        and long inputs before anything is computed, and the evaluation runs under a wall-clock limit.
        """
        return _symbolic_eval(expr)


# ------------------------------------------------------------------------------- the symbolic fallback (sympy)

_SYM_MAX_CHARS = 300
_SYM_MAX_RESULT_CHARS = 2_000
_SYM_TIMEOUT_S = 3.0
_SYM_MAX_DIGITS = 20_000  # a numeric power may produce at most this many digits
_SYM_MAX_SYMBOLIC_EXP = 200  # (x + 1)**n with symbols: n at most this
_SYM_MAX_FACTORIAL = 5_000
_SYM_FUNCTIONS = (
    "sqrt cbrt root exp log ln sin cos tan cot sec csc asin acos atan atan2 sinh cosh tanh asinh acosh atanh "
    "factorial binomial gcd lcm floor ceiling Abs abs Min Max min max sign re im conjugate simplify expand factor "
    "cancel apart together nsimplify trigsimp diff integrate limit solve Rational Integer Sum Product Eq"
).split()
_SYM_CONSTANTS = {"pi": "pi", "E": "E", "e": "E", "I": "I", "oo": "oo", "inf": "oo", "infinity": "oo"}
_SYM_TYPOGRAPHY = {"^": "**", "×": "*", "÷": "/", "−": "-", "·": "*", "⋅": "*", "π": "pi", "√": "sqrt", "$": ""}
_SYM_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SYM_ALLOWED_CHARS = re.compile(r"^[A-Za-z0-9_+\-*/().,!\s]*$")
# computed eagerly by sympy even when parsing with evaluate=False, so the guard pass sees inert placeholders
# instead; the arguments of the first two are bounded, the others are checked through their arguments
_SYM_EAGER = ("factorial", "binomial")
_SYM_INERT = (
    *_SYM_EAGER,
    "expand",
    "simplify",
    "factor",
    "cancel",
    "apart",
    "together",
    "nsimplify",
    "trigsimp",
    "diff",
    "integrate",
    "limit",
    "solve",
    "Sum",
    "Product",
)
_sym_namespace: dict[str, Any] | None = None


def _sym_names() -> dict[str, Any]:
    """The only names sympy's parser may resolve: the whitelisted functions and constants, no builtins."""
    global _sym_namespace
    if _sym_namespace is None:
        import sympy

        table: dict[str, Any] = {"__builtins__": {}}
        aliases = {"ln": "log", "abs": "Abs", "min": "Min", "max": "Max"}
        for name in _SYM_FUNCTIONS:
            table[name] = getattr(sympy, aliases.get(name, name))
        for name, target in _SYM_CONSTANTS.items():
            table[name] = getattr(sympy, target)
        for letter in "abcdfghjklmnopqrstuvwxyz":  # one-letter symbols (e is Euler's number, I is i)
            table[letter] = sympy.Symbol(letter)
        # what the parser itself emits (number literals; operators when evaluate=False)
        table.update(
            Symbol=sympy.Symbol,
            Float=sympy.Float,
            Integer=sympy.Integer,
            Rational=sympy.Rational,
            Add=sympy.Add,
            Mul=sympy.Mul,
            Pow=sympy.Pow,
        )
        _sym_namespace = table
    return _sym_namespace


def _sym_prepare(text: str) -> str | None:
    expr = text.strip()
    for old, new in _SYM_TYPOGRAPHY.items():
        expr = expr.replace(old, new)
    if "=" in expr:  # "sqrt(2)**2 = ?" asks for the left side
        expr = expr.split("=")[0]
    expr = expr.strip()
    if not expr or len(expr) > _SYM_MAX_CHARS or not _SYM_ALLOWED_CHARS.match(expr):
        return None
    if "__" in expr or re.search(r"(?<![0-9])\.|\.(?![0-9])", expr):  # dots only inside numbers
        return None
    names = _sym_names()
    if any(name not in names for name in _SYM_IDENT.findall(expr)):
        return None
    return expr


def _sym_number(expr: Any) -> complex | None:
    import sympy

    try:
        return complex(sympy.N(expr, 15))
    except (TypeError, ValueError, OverflowError):
        return None


def _sym_pow_ok(base: Any, exp: Any) -> bool:
    """A power is allowed when its exact value has a bounded number of digits (or a small symbolic degree)."""
    if exp.free_symbols:
        return True
    e = _sym_number(exp)
    if e is None or abs(e) > 1e6:
        return False
    if base.free_symbols:
        return abs(e) <= _SYM_MAX_SYMBOLIC_EXP
    b = _sym_number(base)
    if b is None:  # holds a bounded factorial placeholder: allow only small powers of it
        return abs(e) <= 16
    return abs(b) <= 1 or abs(e.real) * math.log10(abs(b)) <= _SYM_MAX_DIGITS


def _sym_magnitude_ok(node: Any) -> bool:
    """Reject, before evaluating, the inputs whose exact value would be astronomically large."""
    import sympy

    if isinstance(node, dict):
        node = [*node.keys(), *node.values()]
    if isinstance(node, (list, tuple)):  # eager functions (solve, ...) already produced a collection
        return all(_sym_magnitude_ok(item) for item in node)
    if not isinstance(node, sympy.Basic):
        return True
    for sub in sympy.postorder_traversal(node):
        if isinstance(sub, sympy.Integer) and abs(int(sub)) > 10**200:
            return False
        if isinstance(sub, sympy.Pow) and not _sym_pow_ok(*sub.args):
            return False
        if getattr(sub.func, "__name__", "") in _SYM_EAGER and not sub.args[0].free_symbols:
            n = _sym_number(sub.args[0])
            if n is None or abs(n) > _SYM_MAX_FACTORIAL:
                return False
    return True


def _sym_format(value: Any) -> str | None:
    import sympy

    if isinstance(value, (bool, sympy.logic.boolalg.BooleanAtom)):
        return str(bool(value))
    if isinstance(value, sympy.Basic) and value.has(sympy.zoo, sympy.nan):
        return None  # division by zero or an undefined form
    if isinstance(value, (list, tuple, dict)):
        text = str(value)
    elif isinstance(value, sympy.Basic) and value.is_number and not value.free_symbols:
        if isinstance(value, sympy.Integer):
            text = str(value)
        elif isinstance(value, sympy.Rational):
            text = f"{value.p}/{value.q} (≈ {float(value):.10g})"
        else:
            approx = sympy.N(value, 15)
            text = str(value) if str(value) == str(approx) else f"{value} (≈ {approx})"
            if len(text) > _SYM_MAX_RESULT_CHARS:
                text = f"≈ {approx}"
    else:
        text = str(value)
    return text if len(text) <= _SYM_MAX_RESULT_CHARS else None


def _symbolic_eval(text: str, timeout: float = _SYM_TIMEOUT_S) -> str | None:
    expr = _sym_prepare(text)  # imports sympy outside the time limit
    if expr is None:
        return None
    box: dict[str, Any] = {}

    def work() -> None:
        import sympy
        from sympy.parsing.sympy_parser import (
            auto_number,
            factorial_notation,
            implicit_multiplication,
            parse_expr,
            rationalize,
        )

        # no auto_symbol: every name must come from the whitelisted namespace; rationalize keeps 0.1 exact
        transformations = (auto_number, rationalize, factorial_notation, implicit_multiplication)
        try:
            names = dict(_sym_names())
            guard = {**names, **{f: sympy.Function(f) for f in _SYM_INERT}}
            tree = parse_expr(expr, global_dict=guard, local_dict={}, transformations=transformations, evaluate=False)
            if not _sym_magnitude_ok(tree):
                return
            value = parse_expr(expr, global_dict=names, local_dict={}, transformations=transformations)
            if hasattr(value, "doit"):
                value = value.doit()
            box["out"] = _sym_format(value)
        except Exception:  # not an expression sympy accepts: the caller reports the arithmetic error
            return

    worker = threading.Thread(target=work, name="calculator-sympy", daemon=True)
    worker.start()
    worker.join(timeout)
    return box.get("out") if not worker.is_alive() else None
