"""Sampler/learner mismatch correction: truncated importance sampling (TIS) between the rollout engine's
log-probs and the learner's own "old" log-probs of the same tokens.

A fast sampler (vLLM: other kernels, other precision) does not draw tokens from exactly the policy the
learner scores. The PPO ratio is taken against the learner's old log-probs, so the samples are off-policy by
``pi_old / pi_rollout``; TIS weights each token's policy-gradient loss by that ratio, capped from above
(``min(exp(old - rollout), cap)``, verl's ``tis_imp_ratio_cap``) so a rare token cannot blow up the update.
The weights carry no gradient.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

    from agents.training.config import FlowGRPOConfig

__all__ = ["MismatchStats", "tis_enabled", "truncated_importance_weights"]

logger = logging.getLogger(__name__)


def truncated_importance_weights(
    old_logprobs: torch.Tensor, rollout_logprobs: torch.Tensor, mask: torch.Tensor, cap: float
) -> tuple[torch.Tensor, dict[str, float]]:
    """Per-token weights ``min(exp(old - rollout), cap)`` (detached, 0 on padding) and mismatch figures.

    All tensors are ``[N, T]``; ``mask`` is 1 on response tokens. The figures are over the masked tokens:
    ``abs_dlogp_sum`` and ``tokens`` (for a mean |old - rollout|), ``ratio_max`` (before the cap) and
    ``capped`` (how many tokens hit the cap).
    """
    import torch

    if cap <= 0:
        raise ValueError(f"cap={cap} must be > 0")
    with torch.no_grad():
        m = mask.to(torch.bool)
        delta = (old_logprobs.detach().float() - rollout_logprobs.float()).masked_fill(~m, 0.0)
        ratio = delta.exp()
        weights = ratio.clamp(max=cap) * m
        n = int(m.sum())
        stats = {
            "abs_dlogp_sum": float(delta.abs().sum()),
            "tokens": float(n),
            "ratio_max": float(ratio[m].max()) if n else 0.0,
            "capped": float(((ratio > cap) & m).sum()),
        }
    return weights.to(old_logprobs.dtype), stats


@dataclass
class MismatchStats:
    """Mismatch figures added up over one training step's micro-batches, then logged and reset."""

    abs_dlogp_sum: float = 0.0
    tokens: float = 0.0
    ratio_max: float = 0.0
    capped: float = 0.0

    def add(self, stats: dict[str, float]) -> None:
        self.abs_dlogp_sum += stats["abs_dlogp_sum"]
        self.tokens += stats["tokens"]
        self.capped += stats["capped"]
        self.ratio_max = max(self.ratio_max, stats["ratio_max"])

    def flush(self) -> dict[str, float]:
        """The step's metrics (empty when no token was corrected), and a fresh start."""
        if not self.tokens:
            return {}
        out = {
            "rollout/mismatch_abs_dlogp_mean": self.abs_dlogp_sum / self.tokens,
            "rollout/tis_ratio_max": self.ratio_max,
            "rollout/tis_capped_fraction": self.capped / self.tokens,
        }
        self.abs_dlogp_sum = self.tokens = self.ratio_max = self.capped = 0.0
        return out


def tis_enabled(config: FlowGRPOConfig) -> bool:
    """Whether the loss carries the truncated importance-sampling correction (``rollout_correction``).

    The samplers' log-probs are of the raw (temperature 1) policy, so the correction needs temperature 1.
    """
    wanted = config.rollout_correction == "tis" or (config.rollout_correction == "auto" and config.backend == "vllm")
    if not wanted or config.algorithm != "flow_grpo":
        return False
    if config.temperature != 1.0:
        logger.warning("rollout_correction off: rollout log-probs are at temperature 1, not %g", config.temperature)
        return False
    return True
