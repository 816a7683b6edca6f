"""Paired tests of two runs on the same tasks: exact McNemar, a paired bootstrap over tasks, and the minimum
detectable effect (MDE) at 80% power and alpha 0.05. Pure functions on scores; no I/O.

A *task* is one (benchmark, task index); its *trials* are the (seed, sample) episodes both runs played of it.
Single-trial binary outcomes get McNemar's exact test (the binomial on the discordant pairs) with an interval
exact conditional on their number; anything else (several trials, fractional scores) gets a bootstrap that
resamples tasks, each task's trials kept together and paired, so the interval reflects the tasks drawn.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

__all__ = [
    "ALPHA",
    "POWER",
    "PairedTest",
    "binomial_cdf",
    "bootstrap_test",
    "clopper_pearson",
    "mcnemar_mde",
    "mcnemar_test",
    "normal_mde",
    "paired_test",
]

ALPHA = 0.05
POWER = 0.80
_Z = NormalDist()


@dataclass(frozen=True)
class PairedTest:
    """B minus A on ``tasks`` shared tasks: the mean difference, its 95% interval, the two-sided p-value and the
    smallest true difference this many tasks detects with 80% power at alpha 0.05 (``None``: not estimable)."""

    method: str  # "mcnemar-exact" or "paired-bootstrap"
    tasks: int
    trials: int  # paired episodes in all
    mean_a: float
    mean_b: float
    difference: float
    interval: tuple[float, float]
    p_value: float
    mde: float | None
    a_only: int | None = None  # McNemar: tasks A passed and B failed
    b_only: int | None = None  # McNemar: tasks B passed and A failed

    def to_dict(self) -> dict[str, object]:
        return {
            "method": self.method,
            "tasks": self.tasks,
            "trials": self.trials,
            "mean_a": self.mean_a,
            "mean_b": self.mean_b,
            "difference": self.difference,
            "ci95": list(self.interval),
            "p_value": self.p_value,
            "mde80": self.mde,
            **({"a_only": self.a_only, "b_only": self.b_only} if self.a_only is not None else {}),
        }


def binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), summed exactly."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return min(1.0, sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1)))


def clopper_pearson(k: int, n: int, alpha: float = ALPHA) -> tuple[float, float]:
    """The exact (Clopper-Pearson) interval of a binomial proportion, by bisection on the binomial tails."""
    if n <= 0:
        return 0.0, 1.0

    def solve(f_increasing: bool, target: float, fn: object) -> float:
        lo, hi = 0.0, 1.0
        for _ in range(100):
            mid = (lo + hi) / 2
            value = fn(mid)  # type: ignore[operator]
            if (value < target) == f_increasing:
                lo = mid
            else:
                hi = mid
        return (lo + hi) / 2

    # lower: P(X >= k | p) = alpha/2, increasing in p; upper: P(X <= k | p) = alpha/2, decreasing in p
    lower = 0.0 if k == 0 else solve(True, alpha / 2, lambda p: 1 - binomial_cdf(k - 1, n, p))
    upper = 1.0 if k == n else solve(False, alpha / 2, lambda p: binomial_cdf(k, n, p))
    return lower, upper


def mcnemar_test(a: Sequence[float], b: Sequence[float]) -> PairedTest:
    """McNemar's exact test of paired 0/1 outcomes (one per task): p = 2 P(X <= min(n10, n01)), X ~ Bin(n10 + n01,
    1/2), capped at 1; the interval of B - A is ``(n10 + n01)/n (2 theta - 1)`` over the Clopper-Pearson interval
    of ``theta = n01 / (n10 + n01)`` (exact conditional on the discordant count)."""
    n = len(a)
    a_only = sum(1 for x, y in zip(a, b) if x >= 0.5 > y)
    b_only = sum(1 for x, y in zip(a, b) if y >= 0.5 > x)
    discordant = a_only + b_only
    difference = (b_only - a_only) / n if n else 0.0
    if discordant == 0:
        p_value, interval = 1.0, (0.0, 0.0)
    else:
        p_value = min(1.0, 2 * binomial_cdf(min(a_only, b_only), discordant, 0.5))
        lo, hi = clopper_pearson(b_only, discordant)
        share = discordant / n
        interval = (share * (2 * lo - 1), share * (2 * hi - 1))
    return PairedTest(
        method="mcnemar-exact",
        tasks=n,
        trials=n,
        mean_a=sum(a) / n if n else 0.0,
        mean_b=sum(b) / n if n else 0.0,
        difference=difference,
        interval=interval,
        p_value=p_value,
        mde=mcnemar_mde(n, discordant / n if n else 0.0),
        a_only=a_only,
        b_only=b_only,
    )


def mcnemar_mde(n: int, discordance: float, alpha: float = ALPHA, power: float = POWER) -> float | None:
    """The smallest difference ``delta`` that McNemar's test on ``n`` pairs detects with ``power`` when a share
    ``discordance`` of the pairs disagree (Connor 1987): it solves
    ``n delta^2 = (z_{1-alpha/2} sqrt(pd) + z_power sqrt(pd - delta^2))^2``. ``None`` with no discordance."""
    if n <= 0 or discordance <= 0:
        return None
    za, zb = _Z.inv_cdf(1 - alpha / 2), _Z.inv_cdf(power)

    def gap(delta: float) -> float:
        return n * delta * delta - (za * math.sqrt(discordance) + zb * math.sqrt(max(discordance - delta**2, 0))) ** 2

    top = min(discordance, 1.0)
    if gap(top) < 0:  # even the largest possible difference at this discordance is not detectable
        return None
    lo, hi = 0.0, top
    for _ in range(200):
        mid = (lo + hi) / 2
        if gap(mid) < 0:
            lo = mid
        else:
            hi = mid
    return hi


def normal_mde(sd: float, n: int, alpha: float = ALPHA, power: float = POWER) -> float | None:
    """``(z_{1-alpha/2} + z_power) sd / sqrt(n)``: the MDE of a mean of ``n`` paired task differences whose
    standard deviation is ``sd`` (``None`` when ``n < 2`` or ``sd`` is 0)."""
    if n < 2 or sd <= 0:
        return None
    return (_Z.inv_cdf(1 - alpha / 2) + _Z.inv_cdf(power)) * sd / math.sqrt(n)


def bootstrap_test(
    a: Sequence[Sequence[float]], b: Sequence[Sequence[float]], resamples: int = 10_000, seed: int = 0
) -> PairedTest:
    """A paired bootstrap over tasks: ``a[i]`` and ``b[i]`` are task i's trial scores, in the same trial order.

    Each task's difference is the mean over its trials of B - A; the statistic is the mean over tasks. Tasks are
    resampled with replacement ``resamples`` times (seeded); the interval is the 2.5th to 97.5th percentile and
    the two-sided p-value the share of resampled differences at least as far from the observed one as the
    observed one is from 0 (the resampled distribution shifted to the null), counting the observed one.
    """
    n = len(a)
    diffs = [sum(y - x for x, y in zip(ta, tb)) / len(ta) for ta, tb in zip(a, b)]
    difference = sum(diffs) / n if n else 0.0
    rng = random.Random(seed)
    stats = []
    for _ in range(resamples if n else 0):
        stats.append(sum(diffs[rng.randrange(n)] for _ in range(n)) / n)
    stats.sort()
    if stats:
        interval = (_percentile(stats, 0.025), _percentile(stats, 0.975))
        extreme = sum(1 for s in stats if abs(s - difference) >= abs(difference) - 1e-12)
        p_value = min(1.0, (extreme + 1) / (len(stats) + 1))
    else:
        interval, p_value = (0.0, 0.0), 1.0
    sd = math.sqrt(sum((d - difference) ** 2 for d in diffs) / (n - 1)) if n > 1 else 0.0
    trials = sum(len(t) for t in a)
    return PairedTest(
        method="paired-bootstrap",
        tasks=n,
        trials=trials,
        mean_a=sum(sum(t) / len(t) for t in a) / n if n else 0.0,
        mean_b=sum(sum(t) / len(t) for t in b) / n if n else 0.0,
        difference=difference,
        interval=interval,
        p_value=p_value,
        mde=normal_mde(sd, n),
    )


def _percentile(ordered: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default)."""
    pos = q * (len(ordered) - 1)
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def paired_test(
    a: Sequence[Sequence[float]], b: Sequence[Sequence[float]], resamples: int = 10_000, seed: int = 0
) -> PairedTest:
    """McNemar when every task has one trial and every score is 0 or 1; else the paired bootstrap."""
    binary = all(s in (0.0, 1.0) for t in (*a, *b) for s in t)
    if binary and all(len(t) == 1 for t in a):
        return mcnemar_test([t[0] for t in a], [t[0] for t in b])
    return bootstrap_test(a, b, resamples=resamples, seed=seed)
