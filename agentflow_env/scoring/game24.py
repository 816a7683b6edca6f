"""The exact Game-of-24 checker: exactly one expression, every number once, only + - * / and parentheses, value 24.

One expression means (the single-commitment rule, :mod:`agentflow_env.scoring.commitment`): one ``<answer>``
or ``\\boxed{}`` content, no alternative marker (``or``, ``either``, ...), one line that holds digits, no
``,``/``;`` list, and in ``expr = a = b`` every later side equal in value to the expression (``= 24``,
``= 26 - 2 = 24``). ``(13+13)-(1+1)=24 or 13*2-2`` scores 0.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from fractions import Fraction

from agentflow_env.scoring.arith import ArithmeticError_, evaluate, parse_numbers_and_ops
from agentflow_env.scoring.commitment import alternative_marker
from agentflow_env.scoring.extract import extract_answer
from agentflow_env.types import Task

_ALLOWED_OPS = {"Add", "Sub", "Mult", "Div"}


def check_24(expression: str, numbers: Sequence[int | float | str], target: int = 24) -> tuple[bool, str]:
    """Return ``(ok, reason)``: ``ok`` only if ``expression`` uses each number once and equals 24.

    Division by zero, unary minus, powers, reused, missing or extra numbers, and more than one expression
    all give ``False``.
    """
    expression, several = _one_expression(expression)
    if several:
        return False, several
    expression, *later_sides = expression.split("=")
    try:
        value, leaves, ops = parse_numbers_and_ops(expression)
    except ArithmeticError_ as exc:
        return False, str(exc)
    bad = [op for op in ops if op not in _ALLOWED_OPS]
    if bad:
        return False, f"only + - * / and parentheses are allowed (found {bad[0]})"
    want = Counter(Fraction(str(n)) for n in numbers)
    got = Counter(leaves)
    if got != want:
        missing = sorted(str(k) for k in (want - got).elements())
        extra = sorted(str(k) for k in (got - want).elements())
        parts = []
        if missing:
            parts.append(f"missing {', '.join(missing)}")
        if extra:
            parts.append(f"extra or reused {', '.join(extra)}")
        return False, "each given number must be used exactly once: " + "; ".join(parts)
    if value != target:
        return False, f"the expression equals {value}, not {target}"
    for side in later_sides:
        try:
            if evaluate(side) != value:
                return False, f"more than one expression: {side.strip()!r} is not equal to the first"
        except ArithmeticError_:
            return False, f"more than one expression: {side.strip()!r} after '=' is not arithmetic"
    return True, "correct"


def _one_expression(text: str) -> tuple[str, str | None]:
    """The one expression of an answer, and why not when it holds several (see the module doc)."""
    span = extract_answer(text)
    answer, checked, hedge = span.text, span.text, span.hedge
    if hedge is not None:
        return answer, f"more than one expression ({hedge})"
    checked = checked.replace("–", "-").replace("—", "-")  # dashes are minus signs here, not ranges
    marker = alternative_marker(checked)
    if marker is not None:
        return answer, f"more than one expression ({marker})"
    # prose lines without numbers may come first; the expression is the one line with digits
    lines = [ln.strip().strip("`").strip() for ln in checked.splitlines() if any(ch.isdigit() for ch in ln)]
    if len(lines) > 1:
        return answer, "more than one expression (several lines with numbers)"
    line = lines[0] if lines else answer.strip().strip("`").strip()
    if re.search(r"[,;]", line):
        return answer, "more than one expression (a list)"
    return line, None


def game24_numbers(task: Task) -> list[int]:
    nums = task.metadata.get("numbers")
    if nums is None:
        raise KeyError(f"task {task.id} has no metadata['numbers'] for the 24 checker")
    return list(nums)


class Game24Scorer:
    """Scorer: 1.0 when the prediction is a valid 24 expression over ``task.metadata['numbers']``."""

    def __call__(self, prediction: str, task: Task) -> float:
        ok, _ = check_24(prediction, game24_numbers(task))
        return 1.0 if ok else 0.0
