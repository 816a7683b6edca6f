"""The calculator's symbolic side: sympy, run in a helper process that the calculator kills when it overruns.

:func:`prepare` (no sympy) screens the text in the calling process: known names, numbers and operators only.
:func:`evaluate` runs in the helper: sympy's parser turns the text into Python code, the code's size bounds are
checked without evaluating anything (:mod:`agentflow_env.tools.calculator.bounds`), and only then is it evaluated.
:func:`serve` is the helper's loop; it caps its own memory and, per request, its CPU time, so even a helper
whose parent is gone cannot burn a core for long.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from agentflow_env.tools.calculator.bounds import TooLarge, check_size

__all__ = ["MAX_CHARS", "evaluate", "prepare", "serve"]

MAX_CHARS = 300
MAX_RESULT_CHARS = 2_000
MAX_PRINT_DIGITS = 25_000  # int-to-str in the helper (Python's default, 4300, is below the size bound)
HELPER_MEMORY_BYTES = 1 << 30  # address space a helper may add on top of what it holds after importing sympy

FUNCTIONS = (
    "sqrt cbrt root exp log ln sin cos tan cot sec csc asin acos atan atan2 sinh cosh tanh asinh acosh atanh "
    "factorial binomial gcd lcm floor ceiling Abs abs Min Max min max sign re im conjugate simplify expand factor "
    "cancel apart together nsimplify trigsimp diff integrate limit solve Rational Integer Sum Product Eq"
).split()
CONSTANTS = {"pi": "pi", "E": "E", "e": "E", "I": "I", "oo": "oo", "inf": "oo", "infinity": "oo"}
SYMBOLS = "abcdfghjklmnopqrstuvwxyz"  # one-letter symbols (e is Euler's number, I is i)
NAMES = frozenset([*FUNCTIONS, *CONSTANTS, *SYMBOLS])
_ALIASES = {"ln": "log", "abs": "Abs", "min": "Min", "max": "Max"}
_TYPOGRAPHY = {"^": "**", "×": "*", "÷": "/", "−": "-", "·": "*", "⋅": "*", "π": "pi", "√": "sqrt", "$": ""}
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ALLOWED_CHARS = re.compile(r"^[A-Za-z0-9_+\-*/().,!\s]*$")


def prepare(text: str) -> str | None:
    """The expression sympy should see, or ``None`` when the text has anything but known names and arithmetic.

    Known function and constant names, one-letter symbols, numbers and operators only: no attributes, strings,
    brackets, keywords or dunders. No sympy is imported here.
    """
    expr = text.strip()
    for old, new in _TYPOGRAPHY.items():
        expr = expr.replace(old, new)
    if "=" in expr:  # "sqrt(2)**2 = ?" asks for the left side
        expr = expr.split("=")[0]
    expr = expr.strip()
    if not expr or len(expr) > MAX_CHARS or not _ALLOWED_CHARS.match(expr):
        return None
    if "__" in expr or re.search(r"(?<![0-9])\.|\.(?![0-9])", expr):  # dots only inside numbers
        return None
    if any(name not in NAMES for name in _IDENT.findall(expr)):
        return None
    return expr


_namespace: dict[str, Any] | None = None


def _names() -> dict[str, Any]:
    """The only names sympy's parser may resolve: the whitelisted functions and constants, no builtins."""
    global _namespace
    if _namespace is None:
        import sympy

        table: dict[str, Any] = {"__builtins__": {}}
        for name in FUNCTIONS:
            table[name] = getattr(sympy, _ALIASES.get(name, name))
        for name, target in CONSTANTS.items():
            table[name] = getattr(sympy, target)
        for letter in SYMBOLS:
            table[letter] = sympy.Symbol(letter)
        # what the parser itself emits for number literals
        table.update(Symbol=sympy.Symbol, Float=sympy.Float, Integer=sympy.Integer, Rational=sympy.Rational)
        _namespace = table
    return _namespace


def _format(value: Any) -> str | None:
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
            if len(text) > MAX_RESULT_CHARS:
                text = f"≈ {approx}"
    else:
        text = str(value)
    if len(text) > MAX_RESULT_CHARS:
        raise TooLarge(f"the result has {len(text)} characters (the limit is {MAX_RESULT_CHARS})")
    return text


def evaluate(text: str) -> tuple[str, str]:
    """``("value", answer)``, ``("size", why)`` when a bound refuses it, or ``("invalid", why)``."""
    from sympy.parsing.sympy_parser import (
        auto_number,
        eval_expr,
        factorial_notation,
        implicit_multiplication,
        rationalize,
        stringify_expr,
    )

    expr = prepare(text)
    if expr is None:
        return "invalid", "not an expression the calculator accepts"
    names = _names()
    # no auto_symbol: every name must come from the whitelisted namespace; rationalize keeps 0.1 exact
    transformations = (auto_number, rationalize, factorial_notation, implicit_multiplication)
    try:
        code = stringify_expr(expr, {}, dict(names), transformations)
        check_size(code)  # reads the code only: nothing is computed before every size is bounded
        value = eval_expr(code, {}, dict(names))
        if hasattr(value, "doit"):
            value = value.doit()
        answer = _format(value)
    except TooLarge as exc:
        return "size", str(exc)
    except MemoryError:
        return "size", "the computation ran out of memory"
    except Exception as exc:  # not an expression sympy accepts: the caller reports the arithmetic error
        return "invalid", f"{type(exc).__name__}"
    if answer is None:
        return "invalid", "undefined or too long a result"
    return "value", answer


# ------------------------------------------------------------------------------------------------ the helper


def _limit_memory() -> None:
    import resource

    try:
        with open("/proc/self/statm") as fh:
            held = int(fh.read().split()[0]) * resource.getpagesize()
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        want = held + HELPER_MEMORY_BYTES
        if hard == resource.RLIM_INFINITY or want <= hard:
            resource.setrlimit(resource.RLIMIT_AS, (want, hard))
    except (OSError, ValueError):  # not Linux, or not allowed: the parent's kill still bounds time
        pass


def _limit_cpu(seconds: float) -> None:
    """SIGXCPU ends this helper once this request has used ``seconds`` more CPU (a parent that is gone
    can no longer kill it)."""
    import resource

    try:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        used = usage.ru_utime + usage.ru_stime
        _, hard = resource.getrlimit(resource.RLIMIT_CPU)
        soft = int(used + seconds) + 2
        if hard == resource.RLIM_INFINITY or soft <= hard:
            resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    except (OSError, ValueError):
        pass


def serve() -> None:
    """Helper loop: a ``{"ready": true}`` line once sympy is imported, then one reply line per request line.

    A request is ``{"e": text, "t": seconds}``; a reply is ``{"kind": "value"|"size"|"invalid", "text": ...}``.
    """
    out = sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing else may write to the reply channel
    sys.set_int_max_str_digits(MAX_PRINT_DIGITS)  # sizes are bounded before evaluating; long results are refused
    _names()
    evaluate("1 + 1")  # warms the parser
    _limit_memory()
    out.write(b'{"ready": true}\n')
    out.flush()
    for raw in sys.stdin.buffer:
        try:
            request = json.loads(raw)
            _limit_cpu(float(request.get("t", 10.0)))
            kind, text = evaluate(str(request["e"]))
        except MemoryError:
            kind, text = "size", "the computation ran out of memory"
        except Exception as exc:  # a bad request must not end the helper
            kind, text = "invalid", type(exc).__name__
        out.write(json.dumps({"kind": kind, "text": text}).encode() + b"\n")
        out.flush()
