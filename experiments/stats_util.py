"""Statistics of the learning proof: paired per-task tests and intervals, in pure Python (no scipy).

- ``mcnemar_exact``: McNemar's exact test on paired binary outcomes (a two-sided binomial test on the
  discordant pairs).
- ``wilson_interval``: the leaderboard's Wilson score interval for one proportion (re-exported).
- ``t_interval``: mean and Student-t confidence interval over a few seeds.
- ``paired_bootstrap_diff``: a seeded bootstrap interval of the difference of two paired success rates.
- ``majority_vote``: one outcome per task from several seeds; ``holm``: Holm's step-down adjustment.
- ``detectable_gain``: the smallest gain over a base rate a test on n tasks finds with 80% power, so a
  null result says how large an effect it rules out.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from statistics import NormalDist

from leaderboards.stats import wilson_interval

__all__ = [
    "McNemar",
    "detectable_gain",
    "holm",
    "majority_vote",
    "mcnemar_exact",
    "paired_bootstrap_diff",
    "t_interval",
    "t_quantile_975",
    "wilson_interval",
]

# two-sided 95% quantiles of Student's t, t_{0.975, df} for df = 1..30
_T975 = (
    12.706204736,
    4.302652730,
    3.182446305,
    2.776445105,
    2.570581836,
    2.446911851,
    2.364624252,
    2.306004135,
    2.262157163,
    2.228138852,
    2.200985160,
    2.178812830,
    2.160368656,
    2.144786688,
    2.131449546,
    2.119905299,
    2.109815578,
    2.100922040,
    2.093024054,
    2.085963447,
    2.079613845,
    2.073873068,
    2.068657610,
    2.063898562,
    2.059538553,
    2.055529439,
    2.051830516,
    2.048407142,
    2.045229642,
    2.042272456,
)
_Z975 = 1.959963984540054


def t_quantile_975(df: int) -> float:
    """t_{0.975, df}: exact table up to 30 degrees of freedom, then the first Cornish-Fisher term."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be at least 1, got {df}")
    if df <= len(_T975):
        return _T975[df - 1]
    z = _Z975
    return z + (z**3 + z) / (4 * df)


@dataclass(frozen=True)
class McNemar:
    """Paired comparison of methods A and B on the same tasks."""

    n: int  # tasks
    a_only: int  # tasks A solves and B does not
    b_only: int  # tasks B solves and A does not
    both: int
    neither: int
    p_value: float  # two-sided exact

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def _binom_two_sided(k: int, n: int) -> float:
    """Two-sided exact p of ``k`` successes in ``n`` fair coin flips: 2 * P(X <= min(k, n-k)), capped at 1."""
    if n == 0:
        return 1.0
    k = min(k, n - k)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2.0 * tail)


def mcnemar_exact(a: Sequence[bool], b: Sequence[bool]) -> McNemar:
    """McNemar's exact test: under H0 each discordant task is A-only or B-only with probability 1/2."""
    if len(a) != len(b):
        raise ValueError(f"paired outcomes need equal lengths, got {len(a)} and {len(b)}")
    a_only = sum(1 for x, y in zip(a, b) if x and not y)
    b_only = sum(1 for x, y in zip(a, b) if y and not x)
    both = sum(1 for x, y in zip(a, b) if x and y)
    neither = len(a) - a_only - b_only - both
    return McNemar(len(a), a_only, b_only, both, neither, _binom_two_sided(a_only, a_only + b_only))


def t_interval(values: Sequence[float]) -> dict[str, float | None]:
    """Mean, sample standard deviation and the 95% Student-t interval of the mean (``n == 1``: None, no interval)."""
    n = len(values)
    if n == 0:
        raise ValueError("no values")
    mean = sum(values) / n
    if n == 1:
        return {"n": 1, "mean": mean, "sd": None, "lo": None, "hi": None}  # JSON null, not NaN
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = t_quantile_975(n - 1) * sd / math.sqrt(n)
    return {"n": n, "mean": mean, "sd": sd, "lo": mean - half, "hi": mean + half}


def paired_bootstrap_diff(
    a: Sequence[bool], b: Sequence[bool], *, resamples: int = 10_000, seed: int = 0
) -> dict[str, float]:
    """Success rate of A minus B on the same tasks, with a 95% percentile interval from resampling tasks."""
    if len(a) != len(b) or not a:
        raise ValueError("paired outcomes need equal, non-zero lengths")
    n = len(a)
    diffs = [int(bool(x)) - int(bool(y)) for x, y in zip(a, b)]
    rng = random.Random(seed)
    stats = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    lo = stats[int(0.025 * (resamples - 1))]
    hi = stats[math.ceil(0.975 * (resamples - 1))]
    return {"diff": sum(diffs) / n, "lo": lo, "hi": hi, "resamples": resamples, "seed": seed}


def majority_vote(per_seed: Sequence[Sequence[bool]]) -> list[bool]:
    """A task counts as solved when more than half of the seeds solved it (2 of 3, 3 of 5, ...)."""
    if not per_seed:
        raise ValueError("no seeds")
    n = len(per_seed[0])
    if any(len(s) != n for s in per_seed):
        raise ValueError("every seed must cover the same tasks")
    return [2 * sum(bool(s[i]) for s in per_seed) > len(per_seed) for i in range(n)]


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (same order as given), controlling the family-wise error rate."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def detectable_gain(p0: float, n: int, *, alpha: float = 0.05, power: float = 0.8) -> float:
    """Smallest d > 0 such that a two-sided test at ``alpha`` tells p0 + d from p0 on n tasks per arm with
    probability ``power`` (two-proportion normal approximation). For paired tasks whose outcomes correlate
    positively, as here, McNemar's test needs somewhat less, so this errs on the large side."""
    if not 0.0 <= p0 < 1.0 or n < 1:
        raise ValueError("need 0 <= p0 < 1 and n >= 1")
    z_a = NormalDist().inv_cdf(1 - alpha / 2)
    z_b = NormalDist().inv_cdf(power)

    def reached(d: float) -> bool:
        p1 = p0 + d
        pooled = (p0 + p1) / 2
        null_sd = math.sqrt(2 * pooled * (1 - pooled) / n)
        alt_sd = math.sqrt((p0 * (1 - p0) + p1 * (1 - p1)) / n)
        return d >= z_a * null_sd + z_b * alt_sd

    lo, hi = 0.0, 1.0 - p0
    if not reached(hi):
        return math.inf  # not even p1 = 1 is detectable with so few tasks
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if reached(mid) else (mid, hi)
    return hi
