"""The bounds of the paper flow's command evaluator: what a block may build, measured before it is built.

A command block is written by an LLM, so it is hostile input. Every value the evaluator holds obeys two
bounds, and every operation is checked against them *before* it runs, from its operands' sizes:

- **size**: the characters of a value's strings plus the elements of its containers, counted deep (a list
  of a million references to one long string counts the string a million times, as its text would);
  at most :data:`MAX_ITEMS`. Integers have at most :data:`MAX_INT_BITS` bits.
- **work**: a block evaluates at most :data:`MAX_STEPS` expression nodes and builds or scans at most
  :data:`MAX_WORK` items in all, so a block's time is bounded too (tens of milliseconds of CPU).

Text conversions (``str(x)``, f-strings, ``str.format``, ``%``) are bounded by an upper bound on the text
they would produce (:func:`text_bound`), format widths by :data:`MAX_ITEMS` and precisions by
:data:`MAX_PRECISION`. Whatever is over a bound is a :class:`CommandError` saying which bound; nothing
is allocated first. ``docs/limits.md`` lists these numbers.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Callable, Iterable
from typing import Any

__all__ = [
    "MAX_BLOCK_CHARS",
    "MAX_INT_BITS",
    "MAX_ITEMS",
    "MAX_PRECISION",
    "MAX_STEPS",
    "MAX_WORK",
    "Budget",
    "CommandError",
]

MAX_ITEMS = 1_000_000  # the largest value a block may build: characters + elements, counted deep
MAX_INT_BITS = 32_768  # the largest integer (about 9,860 decimal digits)
MAX_PRECISION = 1_000  # the largest precision in a format spec or ``%`` conversion
MAX_ROUND_DIGITS = 1_000  # the largest ``ndigits`` of ``round``
MAX_STEPS = 100_000  # expression nodes one block may evaluate
MAX_WORK = 20_000_000  # items one block may build or scan in all
MAX_BLOCK_CHARS = 100_000  # the longest block the evaluator parses

_LOG10_2 = math.log10(2)
_SEQUENCES = (str, bytes, list, tuple)
_PERCENT_RE = re.compile(r"%(?:\([^)]*\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d*))?[hlL]?(.?)", re.DOTALL)
_NUMBER_RE = re.compile(r"\d+")
_BRACKETED_RE = re.compile(r"\[[^\]]*\]")


class CommandError(ValueError):
    """A command form the evaluator does not run, or one that would build more than its bounds allow."""


def _over(what: str, amount: int, limit: int, unit: str = "items") -> CommandError:
    return CommandError(f"{what} would hold {amount:,} {unit}, over the limit of {limit:,}; it was not run")


def check_int(value: Any, what: str = "the integer") -> Any:
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise _over(what, value.bit_length(), MAX_INT_BITS, "bits")
    return value


class Budget:
    """The steps and the work one block has left; every operation charges it before it runs."""

    def __init__(self) -> None:
        self.steps = 0
        self.work = 0

    def step(self) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise CommandError(f"the block evaluates more expressions than the limit of {MAX_STEPS:,}; it was stopped")

    def charge(self, amount: int) -> None:
        self.work += max(int(amount), 1)
        if self.work > MAX_WORK:
            raise CommandError(f"the block builds or scans more items than the limit of {MAX_WORK:,}; it was stopped")

    # ------------------------------------------------------------------ measures
    def size(self, value: Any, cap: int = MAX_ITEMS) -> int:
        """The deep size of ``value`` (characters + elements), exact up to ``cap``; above it, some number > cap."""
        total, stack, visited = 0, [value], 0
        while stack and total <= cap:
            item = stack.pop()
            visited += 1
            if isinstance(item, (str, bytes, bytearray)):
                total += len(item)
            elif isinstance(item, (list, tuple, set, frozenset)):
                total += len(item)
                stack.extend(item)
            elif isinstance(item, dict):
                total += len(item)
                stack.extend(item.keys())
                stack.extend(item.values())
            else:
                total += 1
        self.charge(visited)
        return total

    def text_bound(self, value: Any, as_repr: bool, cap: int = MAX_ITEMS) -> int:
        """An upper bound on ``len(repr(value))`` (``as_repr``) or ``len(str(value))``; some number > cap above it."""
        total, stack, visited = 0, [(value, as_repr)], 0
        while stack and total <= cap:
            item, quoted = stack.pop()
            visited += 1
            if isinstance(item, str):
                total += 10 * len(item) + 2 if quoted else len(item)  # ascii() writes a character in <= 10
            elif isinstance(item, (bytes, bytearray)):
                total += 4 * len(item) + 14
            elif isinstance(item, bool) or item is None:
                total += 5
            elif isinstance(item, int):
                total += int(item.bit_length() * _LOG10_2) + 3
            elif isinstance(item, float):
                total += 32
            elif isinstance(item, complex):
                total += 68
            elif isinstance(item, (list, tuple, set, frozenset)):
                total += 2 * len(item) + 12
                stack.extend((x, True) for x in item)
            elif isinstance(item, dict):
                total += 4 * len(item) + 2
                stack.extend((x, True) for x in item.keys())
                stack.extend((x, True) for x in item.values())
            else:  # an object a tool returned: its own text (tools are not model-written)
                total += len(repr(item) if quoted else str(item))
        self.charge(visited)
        return total

    def checked(self, value: Any, what: str = "the command") -> Any:
        """``value``, once its size is within :data:`MAX_ITEMS` (for results bounded by their operands)."""
        if isinstance(value, int):
            return check_int(value)
        if isinstance(value, (str, bytes)):
            if len(value) > MAX_ITEMS:
                raise _over(what, len(value), MAX_ITEMS)
            self.charge(len(value))
            return value
        size = self.size(value)
        if size > MAX_ITEMS:
            raise _over(what, size, MAX_ITEMS)
        return value

    def need(self, amount: int, what: str) -> None:
        """Refuse an operation whose result would be ``amount`` items, before it runs; charge it otherwise."""
        if amount > MAX_ITEMS:
            raise _over(what, amount, MAX_ITEMS)
        self.charge(amount)

    # ------------------------------------------------------------------ operations
    def before_binop(self, name: str, left: Any, right: Any) -> None:
        """Refuse ``left <op> right`` when its result would be over a bound (``name``: the ast operator's)."""
        lint = isinstance(left, int)
        rint = isinstance(right, int)
        if name == "Mult":
            if isinstance(left, _SEQUENCES) and rint:
                self.need(self.size(left) * max(right, 0), "the repetition")
            elif isinstance(right, _SEQUENCES) and lint:
                self.need(self.size(right) * max(left, 0), "the repetition")
            elif lint and rint:
                _int_result(left.bit_length() + right.bit_length(), "the product")
        elif name == "Add":
            if isinstance(left, _SEQUENCES) and isinstance(right, _SEQUENCES):
                self.need(self.size(left) + self.size(right), "the concatenation")
        elif name == "Pow":  # floats overflow with an error; a negative integer exponent gives a float
            if lint and rint and right > 0 and left not in (0, 1, -1):
                _int_result((left.bit_length() - 1) * right + 1, "the power")
        elif name == "LShift" and lint and rint and right > 0:
            _int_result(left.bit_length() + right, "the shift")
        elif name == "Mod" and isinstance(left, (str, bytes)):
            if isinstance(left, bytes):
                raise CommandError("%-formatting of bytes is not run; format a string")
            self.before_percent(left, right)

    def before_percent(self, fmt: str, args: Any) -> None:
        """Refuse ``fmt % args`` when its text could be over :data:`MAX_ITEMS`."""
        specs = 0
        padding = 0
        for match in _PERCENT_RE.finditer(fmt):
            width, precision, kind = match.groups()
            if kind == "%" and not width and precision is None:
                continue
            if width == "*" or precision == "*":
                raise CommandError("a '*' width or precision in %-formatting is not run; write the number")
            specs += 1
            width_n = int(width) if width else 0
            precision_n = int(precision) if precision else 0
            _check_width(width_n)
            _check_precision(precision_n)
            padding += width_n + precision_n + 400  # a float's %f writes up to 309 digits before the point
        arg_text = self.text_bound(args, True)
        # positional arguments are each used once; one mapping may be used by every conversion
        per_spec = arg_text if isinstance(args, dict) or not isinstance(args, tuple) else 0
        self.need(len(fmt) + padding + (arg_text if per_spec == 0 else specs * per_spec), "the %-formatted text")

    def format_value(self, value: Any, spec: str) -> str:
        """``format(value, spec)``, refused first when the spec's width or precision is over its bound."""
        for number in _NUMBER_RE.findall(spec):
            _check_width(_int_of(number))
        dot = spec.rfind(".")
        if dot >= 0:
            digits = _NUMBER_RE.match(spec, dot + 1)
            if digits:
                _check_precision(_int_of(digits.group()))
        widest = max((_int_of(n) for n in _NUMBER_RE.findall(spec)), default=0)
        text = self.text_bound(value, False)
        if isinstance(value, str):  # padded to the width, or cut to the precision: never longer than both
            bound = max(widest, text)
        else:  # a number: digit grouping adds a third, a precision adds its digits (a float has <= 309 more)
            bound = max(widest, 2 * text + widest + 400)
        self.need(bound, "the formatted value")
        return format(value, spec)

    def convert(self, value: Any, conversion: str | None) -> Any:
        """An f-string's or ``str.format``'s ``!r``/``!s``/``!a`` conversion, bounded before it runs."""
        if conversion is None:
            return value
        self.need(self.text_bound(value, conversion != "s"), "the converted text")
        if conversion == "r":
            return repr(value)
        if conversion == "a":
            return ascii(value)
        if conversion == "s":
            return str(value)
        raise ValueError(f"Unknown conversion specifier {conversion}")

    def format_string(self, fmt: str, args: list[Any], kwargs: dict[str, Any]) -> str:
        """``fmt.format(*args, **kwargs)`` with every field bounded (no attribute access in field names)."""
        return _BoundedFormatter(self).vformat(fmt, args, kwargs)

    def join(self, sep: str, items: Iterable[Any]) -> str:
        parts = list(items)
        self.charge(len(parts))
        if all(isinstance(p, str) for p in parts):
            self.need(sum(len(p) for p in parts) + len(sep) * max(len(parts) - 1, 0), "the joined text")
        return sep.join(parts)

    def replace(self, text: str, old: Any, new: Any, count: Any = -1) -> str:
        if isinstance(old, str) and isinstance(new, str) and isinstance(count, int):
            self.charge(len(text))
            hits = text.count(old) if old else len(text) + 1
            if count >= 0:
                hits = min(hits, count)
            self.need(len(text) + hits * max(len(new) - len(old), 0), "the replaced text")
        return text.replace(old, new, count)

    def sum(self, items: Any, start: Any = 0) -> Any:
        """``sum``, linear for lists and tuples (Python's is quadratic there) and bounded before it runs."""
        items = list(items)
        self.charge(len(items))
        if isinstance(start, (list, tuple)):
            kind = type(start)
            for item in items:
                if type(item) is not kind:
                    raise TypeError(
                        f'can only concatenate {kind.__name__} (not "{type(item).__name__}") to {kind.__name__}'
                    )
            self.need(self.size(start) + sum(self.size(item) for item in items), "the sum of sequences")
            joined: list[Any] = list(start)
            for item in items:
                joined.extend(item)
            return joined if kind is list else tuple(joined)
        if isinstance(start, (str, bytes)):
            return sum(items, start)  # Python's own TypeError (it refuses strings)
        widest = max((x.bit_length() for x in (start, *items) if isinstance(x, int)), default=0)
        self.charge(len(items) * (widest // 64 + 1))
        return check_int(sum(items, start), "the sum")

    def round(self, number: Any, ndigits: Any = None) -> Any:
        if isinstance(ndigits, int) and abs(ndigits) > MAX_ROUND_DIGITS:
            raise CommandError(
                f"round(..., {ndigits}) is over the limit of {MAX_ROUND_DIGITS:,} digits; it was not run"
            )
        return round(number, ndigits)

    def text_of(self, value: Any) -> str:
        """``str(value)``, refused first when the text could be over :data:`MAX_ITEMS`."""
        self.need(self.text_bound(value, False), "the text of the value")
        return str(value)

    def counted(self, func: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]) -> Any:
        """A builtin whose work grows with its operands (``sorted``, ``min``, ``list``...): charge it, run it."""
        for arg in args:
            if isinstance(arg, (str, bytes, list, tuple, set, frozenset, dict)):
                self.charge(len(arg) * (20 if func is sorted else 1))
        return func(*args, **kwargs)


def _int_of(digits: str) -> int:
    return int(digits) if len(digits) <= 12 else 10**12  # a longer number is over every bound anyway


def _int_result(bits: int, what: str) -> None:
    if bits > MAX_INT_BITS:
        raise _over(what, bits, MAX_INT_BITS, "bits")


def _check_width(width: int) -> None:
    if width > MAX_ITEMS:
        raise CommandError(f"a format width of {width:,} is over the limit of {MAX_ITEMS:,}; it was not run")


def _check_precision(precision: int) -> None:
    if precision > MAX_PRECISION:
        raise CommandError(
            f"a format precision of {precision:,} is over the limit of {MAX_PRECISION:,}; it was not run"
        )


class _BoundedFormatter(string.Formatter):
    """``str.format`` with each field measured before it is formatted, and the text kept within bounds."""

    def __init__(self, budget: Budget):
        self.budget = budget
        self.total = 0

    def get_field(self, field_name: str, args: Any, kwargs: Any) -> Any:
        if "." in _BRACKETED_RE.sub("", field_name):
            raise CommandError(f"attribute access in a format field ({field_name[:40]!r}) is not run")
        return super().get_field(field_name, args, kwargs)

    def convert_field(self, value: Any, conversion: str | None) -> Any:
        return self.budget.convert(value, conversion)

    def format_field(self, value: Any, format_spec: str) -> Any:
        text = self.budget.format_value(value, format_spec)
        self.total += len(text)
        if self.total > MAX_ITEMS:
            raise _over("the formatted text", self.total, MAX_ITEMS)
        return text
