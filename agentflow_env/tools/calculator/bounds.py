"""Size bounds for a calculator expression, read off its syntax tree before anything is evaluated.

The calculator's symbolic side hands sympy the Python code that sympy's parser makes of the input
(``Integer (10 )**(Integer (10 )**Integer (8 ))``). :func:`check_size` walks that code's :mod:`ast`
without evaluating it and gives every node a conservative bound: how many decimal digits its exact value
(or its integer part) can have, and the polynomial degree of its symbolic part. Every power, factorial,
binomial, exponential, product and literal is bounded, wherever it sits: inside ``gcd``, ``Min``,
``floor``, ``Integer``, ``Sum`` limits or a tower. Anything outside the known calls and operators is refused.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass, replace
from fractions import Fraction

__all__ = ["MAX_DIGITS", "MAX_SYMBOLIC_EXP", "TooLarge", "check_size"]

MAX_DIGITS = 20_000  # any value: at most about this many digits (numerator and denominator, or integer part)
MAX_SYMBOLIC_EXP = 200  # (x + 1)**n with symbols: n at most this
MAX_DEGREE = 2_000  # the polynomial degree of a symbolic expression
MAX_TERMS_LOG10 = 6.0  # an expanded polynomial: at most a million terms
MAX_FACTORIAL = 5_000
MAX_DIFF_ORDER = 100
_KNOWN_DIGITS = 60  # exact values are carried while this small (exponents, factorial arguments, limits)
_LN10 = math.log(10)
_LOG10_E = 1 / _LN10
_HUGE = 1e300  # stands for "unbounded" without overflowing float arithmetic

# how a call's bound follows from its arguments' bounds
_PLAIN = frozenset(
    "sqrt cbrt root log ln sin cos tan cot sec csc asin acos atan atan2 asinh acosh atanh tanh Abs abs Min Max "
    "min max sign re im conjugate floor ceiling gcd lcm Integer Rational Eq simplify expand factor cancel apart "
    "together nsimplify trigsimp solve limit".split()
)
_EXPONENTIAL = frozenset({"exp", "sinh", "cosh"})
_CONSTANTS = frozenset({"pi", "E", "I"})
_INFINITY = frozenset({"oo", "inf", "infinity"})


class TooLarge(ValueError):
    """The expression could produce a value too large to compute; the message says which part and why."""


@dataclass(frozen=True)
class Bound:
    """Upper bounds for one node: decimal digits of its numerator and denominator (0 for an integer), polynomial
    degree, log10 of its terms once expanded; and its exact value while that is small."""

    num: float = 1.0
    den: float = 0.0
    degree: float = 0.0
    terms: float = 0.0
    free: bool = False  # holds a symbol whose value is not bounded
    value: Fraction | None = None  # the exact value, when it is a small number known from the text
    top: float | None = None  # a tighter bound on |value| than the digits give (a summation variable's limit)

    @property
    def digits(self) -> float:
        """Digits of the exact value: numerator and denominator together."""
        return self.num + self.den

    @property
    def log_magnitude(self) -> float:
        """An upper bound on ``log10(|value|)`` that does not saturate like :attr:`magnitude`."""
        if self.value is not None:
            return math.log10(abs(self.value)) if self.value else 0.0
        if self.top is not None:
            return math.log10(self.top) if self.top > 0 else 0.0
        return self.num

    @property
    def magnitude(self) -> float:
        """An upper bound on ``|value|`` (``_HUGE`` when it is not bounded)."""
        if self.value is not None:
            return float(abs(self.value))
        if self.top is not None:
            return self.top
        return 10.0**self.num if self.num < 300 else _HUGE


def _known(value: Fraction) -> Bound:
    num = len(str(abs(value.numerator)))
    den = len(str(value.denominator)) if value.denominator != 1 else 0
    return Bound(num=float(num), den=float(den), value=value if num + den <= _KNOWN_DIGITS else None)


def _both(digits: float) -> Bound:
    """A value known only by its size, which may be huge or tiny (so its reciprocal is bounded too)."""
    return Bound(num=digits, den=digits)


def _sum_terms(a: float, b: float) -> float:
    hi, lo = max(a, b), min(a, b)
    return hi + math.log10(1 + 10.0 ** (lo - hi))


def _literal_size(text: str) -> Bound:
    """``Rational('2.5e3')``/``Float('1e400')``: digits of the mantissa plus the exponent, before building it."""
    mantissa, _, exponent = text.lower().partition("e")
    try:
        exp = int(exponent) if exponent else 0
    except ValueError:
        raise TooLarge(f"cannot read the number {text!r}") from None
    digits = sum(ch.isdigit() for ch in mantissa) + abs(exp)
    if digits > MAX_DIGITS:
        raise TooLarge(f"the number {text} has about {digits} digits (the limit is {MAX_DIGITS})")
    if digits <= _KNOWN_DIGITS:
        try:
            return _known(Fraction(text))
        except (ValueError, ZeroDivisionError):
            raise TooLarge(f"cannot read the number {text!r}") from None
    return _both(float(digits))


class _Walker:
    def __init__(self) -> None:
        self.bounded: dict[str, Bound] = {}  # summation / integration variables with numeric limits

    def check(self, bound: Bound, what: str) -> Bound:
        if bound.digits > MAX_DIGITS:
            raise TooLarge(
                f"{what} would have {_fmt(bound.digits)} digits (the limit is {MAX_DIGITS}); "
                "use smaller numbers or ask for an approximation of a smaller expression"
            )
        if bound.degree > MAX_DEGREE:
            raise TooLarge(f"{what} has polynomial degree up to {_fmt(bound.degree)} (the limit is {MAX_DEGREE})")
        if bound.terms > MAX_TERMS_LOG10:
            raise TooLarge(f"{what} could expand to about 10^{bound.terms:.0f} terms (the limit is a million)")
        return bound

    def visit(self, node: ast.AST) -> Bound:
        if isinstance(node, ast.Expression):
            return self.visit(node.body)
        if isinstance(node, ast.Constant):
            return self.constant(node.value)
        if isinstance(node, ast.Name):
            return self.name(node.id)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            inner = self.visit(node.operand)
            if inner.value is not None and isinstance(node.op, ast.USub):
                return replace(inner, value=-inner.value)
            return inner
        if isinstance(node, ast.BinOp):
            return self.binop(node)
        if isinstance(node, ast.Tuple):  # (1,) * 10**9 would repeat a tuple, not multiply a number
            raise TooLarge("a tuple is not a number; tuples only give limits, as in integrate(f, (x, 0, 1))")
        if isinstance(node, ast.Call):
            return self.call(node)
        raise TooLarge(f"{type(node).__name__} is not allowed in a calculator expression")

    def visit_arg(self, node: ast.AST) -> Bound:
        """A function argument: a number or expression, or a tuple of them (limits, a derivative's order)."""
        if isinstance(node, ast.Tuple):
            return self.check(_combine([self.visit(elt) for elt in node.elts]), "a tuple")
        return self.visit(node)

    def constant(self, value: object) -> Bound:
        if isinstance(value, bool):
            raise TooLarge("True/False are not numbers")
        if isinstance(value, int):
            if value.bit_length() > MAX_DIGITS * 3.33:
                raise TooLarge(f"a number literal is longer than {MAX_DIGITS} digits")
            return _known(Fraction(value))
        if isinstance(value, str):
            return _literal_size(value)
        if isinstance(value, float):
            return _known(Fraction(value)) if math.isfinite(value) else Bound()
        raise TooLarge(f"{type(value).__name__} constants are not allowed")

    def name(self, name: str) -> Bound:
        if name in self.bounded:
            return self.bounded[name]
        if name in _CONSTANTS:
            return Bound()
        if name in _INFINITY:  # unbounded: a power or limit with it stays symbolic
            return Bound(free=True)
        if len(name) == 1:  # a symbol
            return Bound(degree=1.0, terms=0.0, free=True)
        return Bound()  # a function used as a value: sympy rejects it, nothing is computed

    def binop(self, node: ast.BinOp) -> Bound:
        a, b = self.visit(node.left), self.visit(node.right)
        op = node.op
        if isinstance(op, (ast.Add, ast.Sub)):
            value = None
            if a.value is not None and b.value is not None:
                value = a.value + b.value if isinstance(op, ast.Add) else a.value - b.value
                return self.check(_known(value), "a sum")
            out = Bound(
                num=max(a.num + b.den, b.num + a.den) + 1,  # p/q + r/s = (ps + rq)/(qs)
                den=a.den + b.den,
                degree=max(a.degree, b.degree),
                terms=_sum_terms(a.terms, b.terms),
                free=a.free or b.free,
            )
            return self.check(out, "a sum")
        if isinstance(op, (ast.Mult, ast.Div, ast.FloorDiv)):
            if a.value is not None and b.value is not None:
                if isinstance(op, ast.Mult):
                    return self.check(_known(a.value * b.value), "a product")
                if b.value != 0:
                    quotient = a.value / b.value
                    if isinstance(op, ast.FloorDiv):
                        quotient = Fraction(math.floor(quotient))
                    return self.check(_known(quotient), "a quotient")
            if isinstance(op, ast.Mult):
                num, den = a.num + b.num, a.den + b.den
            elif isinstance(op, ast.Div):
                num, den = a.num + b.den, a.den + b.num
            else:  # floor((p/q) / (r/s)) is at most ps
                num, den = a.num + b.den, 0.0
            out = Bound(
                num=num,
                den=den,
                degree=a.degree + b.degree,
                terms=a.terms + b.terms,
                free=a.free or b.free,
            )
            return self.check(out, "a product")
        if isinstance(op, ast.Pow):
            return self.power(a, b)
        raise TooLarge(f"the operator {type(op).__name__} is not allowed")

    def power(self, base: Bound, exp: Bound) -> Bound:
        if exp.free:  # 2**x stays symbolic: nothing is computed
            return self.check(_combine([base, exp], degree=base.degree + 1), "a power")
        e = exp.magnitude
        if base.value is not None and abs(base.value) in (0, 1):  # 0**0 is 1, (-1)**n is ±1, 0**-1 is zoo
            if exp.value is not None and exp.value.denominator == 1 and (base.value != 0 or exp.value > 0):
                return _known(base.value ** int(exp.value))
            return Bound()
        if base.free:
            if e > MAX_SYMBOLIC_EXP:
                raise TooLarge(
                    f"a symbolic power with exponent up to {_fmt(e)} is too large (the limit is {MAX_SYMBOLIC_EXP})"
                )
            terms = _power_terms(base.terms, e)
        else:
            terms = 0.0
        if base.value is not None and exp.value is not None and exp.value.denominator == 1:
            if _pow_digits(base.value, int(exp.value)) <= _KNOWN_DIGITS and not base.free:
                return _known(base.value ** int(exp.value))
        if exp.value is not None and exp.value >= 0:
            num, den = base.num * e, base.den * e
        elif exp.value is not None:  # a negative power swaps numerator and denominator
            num, den = base.den * e, base.num * e
        else:
            num = den = max(base.num, base.den) * e
        out = Bound(num=max(num, 1.0), den=den, degree=base.degree * e, terms=terms, free=base.free)
        return self.check(out, "a power")

    def call(self, node: ast.Call) -> Bound:
        if not isinstance(node.func, ast.Name) or node.keywords:
            raise TooLarge("only plain calls of the listed functions are allowed")
        name = node.func.id
        if any(isinstance(arg, ast.Starred) for arg in node.args):
            raise TooLarge("*arguments are not allowed")
        if name in ("Sum", "Product", "integrate"):
            return self.with_limits(name, node.args)
        args = [self.visit_arg(arg) for arg in node.args]
        if name in ("Integer", "Rational", "Float") and len(args) == 1 and args[0].value is not None:
            return args[0]
        if name == "factorial":
            return self.factorial(args)
        if name == "binomial":
            return self.binomial(args)
        if name in _EXPONENTIAL:
            arg = _combine(args)
            if arg.free:
                return self.check(replace(arg, degree=arg.degree + 1), f"{name}(...)")
            return self.check(_both(arg.magnitude * _LOG10_E + 1), f"{name}(...)")
        if name == "diff":
            order = self.diff_order(node.args[1:])
            if order > MAX_DIFF_ORDER:
                raise TooLarge(f"a derivative of order up to {_fmt(order)} (the limit is {MAX_DIFF_ORDER})")
            first = args[0] if args else Bound()
            return self.check(replace(first, num=first.num + order * math.log10(first.degree + 2)), "diff")
        if name in _PLAIN:  # the result is no longer the argument's known value
            return self.check(replace(_combine(args), value=None, top=None), f"{name}(...)")
        raise TooLarge(f"the function {name} is not allowed")

    def diff_order(self, args: list[ast.expr]) -> float:
        """The total order of ``diff(f, x, 3, (y, 2))``: the numbers among the variables."""
        order = 0.0
        for arg in args:
            for item in arg.elts if isinstance(arg, ast.Tuple) else [arg]:
                bound = self.visit(item)
                if not bound.free:
                    order += min(bound.magnitude, _HUGE)
        return order

    def factorial(self, args: list[Bound]) -> Bound:
        n = _combine(args)
        if n.free:
            return n
        top = n.magnitude
        if top > MAX_FACTORIAL:
            raise TooLarge(f"factorial of a number up to {_fmt(top)} (the limit is {MAX_FACTORIAL})")
        return self.check(Bound(num=top * math.log10(top + 1) + 1), "a factorial")

    def binomial(self, args: list[Bound]) -> Bound:
        both = _combine(args)
        if both.free or len(args) != 2:
            return self.check(both, "binomial(...)")
        n, k = args[0].magnitude, args[1].magnitude
        if args[0].den == 0:  # an integer n: |C(n, k)| <= (|n| + k + 1)**k, and <= 2**n when n >= 0
            wide = max(args[0].log_magnitude, args[1].log_magnitude, 0.0) + math.log10(3)
            num, den = k * wide + 1, 0.0
            if args[0].value is not None and args[0].value >= 0:
                num = min(num, n * math.log10(2) + 1)
        else:  # n = p/q: the k factors (p - iq)/q over k!
            grow = math.log10(k + 1)
            num = k * (args[0].num + args[0].den + grow) + 1
            den = k * (args[0].den + grow) + 1
        return self.check(Bound(num=num, den=den), "binomial(...)")

    def with_limits(self, name: str, args: list[ast.expr]) -> Bound:
        """``Sum``/``Product``/``integrate``: a variable with numeric limits is bounded by them inside the body."""
        if not args:
            return Bound()
        saved = dict(self.bounded)
        count = 1.0
        open_range = False
        extra: list[Bound] = []
        try:
            for lim in args[1:]:
                if isinstance(lim, ast.Tuple) and lim.elts and isinstance(lim.elts[0], ast.Name):
                    var = lim.elts[0].id
                    limits = [self.visit(e) for e in lim.elts[1:]]
                    extra.extend(limits)
                    if len(limits) == 2 and not any(e.free for e in limits):
                        top = max(e.magnitude for e in limits)
                        self.bounded[var] = Bound(num=max(e.num for e in limits), top=top)
                        low, high = limits[0].value, limits[1].value
                        span = float(high - low) + 1 if low is not None and high is not None else 2 * top + 1
                        count = min(count * max(span, 1.0), _HUGE)
                    else:  # an open or symbolic range: the variable stays a free symbol
                        self.bounded.pop(var, None)
                        open_range = True
                else:
                    extra.append(self.visit_arg(lim))
            body = self.visit(args[0])
        finally:
            self.bounded = saved
        ends = _combine(extra) if extra else Bound()
        if name == "Product":
            if body.free or open_range:
                return self.check(_combine([body, ends]), "a product")
            if body.value is not None and abs(body.value) == 1:
                return Bound()
            return self.check(Bound(num=body.num * count + 1, den=body.den * count), "a product of many factors")
        if name == "Sum":
            if body.free or open_range:  # a closed form or a limit, not term by term
                return self.check(_combine([body, ends]), "a sum")
            den = body.den * count  # the common denominator of count fractions
            grown = Bound(num=body.num + den + math.log10(count) + 1, den=den)
            return self.check(_combine([grown, ends]), "a sum of many terms")
        # a definite integral: a bounded variable already carries its limits' size into the body's bound, and
        # integrating a polynomial divides by its degree (at most MAX_DEGREE) at each power
        grown = Bound(num=body.num + ends.num + 1, den=body.den + ends.den + math.log10(MAX_DEGREE + 2))
        return self.check(replace(grown, degree=body.degree, terms=body.terms, free=body.free), "an integral")


def _combine(parts: list[Bound], degree: float | None = None) -> Bound:
    if not parts:
        return Bound()
    if len(parts) == 1 and degree is None:
        return parts[0]
    return Bound(
        num=sum(p.num for p in parts),
        den=sum(p.den for p in parts),
        degree=max(p.degree for p in parts) if degree is None else degree,
        terms=max(p.terms for p in parts),
        free=any(p.free for p in parts),
    )


def _pow_digits(base: Fraction, exp: int) -> float:
    size = math.log10(abs(base.numerator) + 1) + math.log10(base.denominator + 1)
    return size * abs(exp) + 1


def _power_terms(terms_log10: float, exp: float) -> float:
    """log10 of the monomials of (t terms)**n expanded: C(n + t - 1, t - 1), computed with log-gamma."""
    t = 10.0**terms_log10 if terms_log10 < 300 else _HUGE
    if t <= 1.0:
        return 0.0
    n = max(exp, 0.0)
    if n >= _HUGE or t >= _HUGE:
        return _HUGE
    return (math.lgamma(n + t) - math.lgamma(n + 1) - math.lgamma(t)) / _LN10


def _fmt(x: float) -> str:
    if x >= _HUGE:
        return "astronomically many"
    return f"about {x:.0f}" if x < 1e7 else f"about {x:.1e}"


def check_size(code: str) -> None:
    """Raise :class:`TooLarge` when the parser's code for an expression could compute a value too large."""
    try:
        tree = ast.parse(code, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise TooLarge("not an expression the calculator can read") from None
    try:
        _Walker().visit(tree)
    except RecursionError:
        raise TooLarge("the expression is nested too deeply") from None
