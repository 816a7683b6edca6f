"""Interval statistics for leaderboard scores: Wilson intervals and the paper's category averages.

Pure functions on counts and per-benchmark accuracies; no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agentflow_env.scoring.intervals import Z95, wilson_interval

__all__ = [
    "Z95",
    "BenchmarkScore",
    "category_averages",
    "guard_power",
    "guard_size",
    "score_of",
    "wilson_interval",
]


@dataclass(frozen=True)
class BenchmarkScore:
    """Accuracy on one benchmark over ``n`` episodes (``total`` is the sum of scores in [0, 1])."""

    n: int
    total: float

    @property
    def accuracy(self) -> float:
        return self.total / self.n if self.n else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        return wilson_interval(self.total, self.n)


def score_of(scores: Sequence[float]) -> BenchmarkScore:
    return BenchmarkScore(n=len(scores), total=float(sum(scores)))


def category_averages(
    accuracies: Mapping[str, float | None],
    categories: Mapping[str, str],
    order: Sequence[str] = ("search", "agentic", "math", "science"),
) -> dict[str, float]:
    """Mean of the per-benchmark accuracies within each category, as the paper's Avg. columns.

    A category is absent when any of its benchmarks has no value (``None``): a partial mean would
    not be comparable with the other rows.
    """
    out: dict[str, float] = {}
    for cat in order:
        vals = [a for b, a in accuracies.items() if categories.get(b) == cat]
        if vals and all(a is not None for a in vals):
            out[cat] = sum(vals) / len(vals)  # type: ignore[arg-type]
    return out


def guard_power(reference: float, dropped: float, n: int) -> float:
    """Probability that the score guard fails a policy whose true accuracy is ``dropped``.

    The guard fails when ``reference`` lies outside the new run's 95% Wilson interval; with ``n`` episodes
    the new run's successes are Binomial(n, ``dropped``), summed here exactly (no normal approximation).
    """
    if n <= 0:
        return 0.0
    q = min(max(dropped, 0.0), 1.0)
    power = 0.0
    for k in range(n + 1):
        lo, hi = wilson_interval(k, n)
        if not lo - 1e-12 <= reference <= hi + 1e-12:
            power += math.comb(n, k) * q**k * (1 - q) ** (n - k)
    return min(power, 1.0)


def guard_size(reference: float, drop: float, power: float = 0.8, max_n: int = 2000) -> tuple[int, float]:
    """The fewest episodes (at most ``max_n``) with which the guard detects a fall from ``reference`` to
    ``reference - drop`` with probability ``power``; returns ``(n, power reached)``.

    When even ``max_n`` episodes fall short, ``(max_n, its power)``: the caller says what it cannot detect.
    A reference below ``drop`` is checked against a fall to 0.
    """
    dropped = max(reference - drop, 0.0)
    if reference <= 0.0:
        return 1, 0.0  # nothing can fall below 0: any size detects nothing
    best = 0.0
    for n in range(1, max_n + 1):
        best = guard_power(reference, dropped, n)
        if best >= power:
            return n, best
    return max_n, best
