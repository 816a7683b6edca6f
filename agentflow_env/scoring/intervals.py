"""The Wilson score interval of a success rate: one formula for the leaderboards, the learner's validation
log and the experiments (they must agree to the last digit)."""

from __future__ import annotations

import math

__all__ = ["Z95", "wilson_interval"]

Z95 = 1.959963984540054  # two-sided 95% normal quantile


def wilson_interval(successes: float, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a proportion (``successes`` may be fractional for partial credit).

    With ``n == 0`` it is the uninformative ``(0, 1)``.
    """
    if n <= 0:
        return 0.0, 1.0
    p = min(max(successes / n, 0.0), 1.0)
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    # at p = 0 or 1 one bound is exact; rounding must not push the observed value outside its interval
    lo = 0.0 if p <= 0.0 else max(0.0, min(p, centre - half))
    hi = 1.0 if p >= 1.0 else min(1.0, max(p, centre + half))
    return lo, hi
