"""The exact Game-of-24 checker: every number once, only + - * / and parentheses, value 24."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from fractions import Fraction

from agentflow_env.arith import ArithmeticError_, parse_numbers_and_ops
from agentflow_env.types import Task

_ALLOWED_OPS = {"Add", "Sub", "Mult", "Div"}


def check_24(expression: str, numbers: Sequence[int | float | str], target: int = 24) -> tuple[bool, str]:
    """Return ``(ok, reason)``: ``ok`` only if ``expression`` uses each number once and equals 24.

    Division by zero, unary minus, powers, reused, missing or extra numbers all give ``False``.
    """
    expression = _strip_answer_text(expression)
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
    return True, "correct"


_LATEX_WRAP = re.compile(r"\\boxed\{(.*)\}|<answer>(.*?)</answer>", re.S)


def _strip_answer_text(text: str) -> str:
    text = text.strip()
    m = _LATEX_WRAP.search(text)
    if m:
        text = next(g for g in m.groups() if g is not None)
    # keep the last line that looks like an expression (models sometimes add prose first)
    lines = [ln for ln in text.splitlines() if any(ch.isdigit() for ch in ln)]
    text = lines[-1] if lines else text
    return text.strip().strip("`").strip()


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
