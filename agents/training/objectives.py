"""The pure maths of Flow-GRPO (verl's ``core_algos`` role): group advantages, their broadcast to turns,
the 1/T_i turn weights, the clipped token loss and the k3 KL. Tensors in, tensors out; each has hand-computed tests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = [
    "LossOutput",
    "broadcast_to_turns",
    "clipped_surrogate",
    "flow_grpo_loss",
    "group_advantages",
    "importance_ratio",
    "k3_kl",
    "masked_mean",
    "returns_to_go",
    "returns_to_go_advantages",
    "rft_loss",
    "turn_weights",
]


def group_advantages(rewards: torch.Tensor, group_size: int, scale_std: bool = True, eps: float = 1e-4) -> torch.Tensor:
    """A_i = (R_i - mean_G) / (std_G + eps) within consecutive groups of ``group_size`` rollouts.

    ``std_G`` is the population standard deviation of the group. With ``scale_std=False``,
    A_i = R_i - mean_G. A group whose rewards are all equal gets exactly zero advantage.
    """
    if rewards.numel() % group_size:
        raise ValueError(f"{rewards.numel()} rewards do not split into groups of {group_size}")
    grouped = rewards.reshape(-1, group_size).float()
    centered = grouped - grouped.mean(dim=1, keepdim=True)
    if scale_std:
        centered = centered / (grouped.std(dim=1, unbiased=False, keepdim=True) + eps)
    return centered.reshape(-1)


def broadcast_to_turns(advantages: torch.Tensor, turns_per_rollout: Sequence[int]) -> torch.Tensor:
    """Every planner turn of rollout i gets A_i: ``[A_0]*t_0 + [A_1]*t_1 + ...``."""
    import torch

    counts = torch.as_tensor(list(turns_per_rollout), dtype=torch.long, device=advantages.device)
    if counts.numel() != advantages.numel():
        raise ValueError(f"{advantages.numel()} advantages but {counts.numel()} turn counts")
    return torch.repeat_interleave(advantages, counts)


def returns_to_go(rewards: Sequence[float], gamma: float = 1.0) -> list[float]:
    """G_t = r_t + gamma * G_{t+1}: the discounted return from each turn of one rollout on."""
    out, acc = [0.0] * len(rewards), 0.0
    for t in range(len(rewards) - 1, -1, -1):
        acc = float(rewards[t]) + gamma * acc
        out[t] = acc
    return out


def returns_to_go_advantages(
    turn_rewards: Sequence[Sequence[float]],
    group_size: int,
    gamma: float = 1.0,
    scale_std: bool = True,
    eps: float = 1e-4,
) -> list[list[float]]:
    """Per-turn advantages A_{i,t} = (G_{i,t} - b_t) / (sigma + eps) from each rollout's step rewards.

    G_{i,t} is :func:`returns_to_go` of rollout i's step rewards. The baseline b_t is the mean G_{j,t} of
    the rollouts j of the group that are still running at turn t (T_j > t), so a turn is compared with the
    other rollouts at the same turn: identical rollouts get zero whatever gamma and the penalties, and an
    early turn is not blamed for being far from the reward. sigma is the population std of the residuals
    G_{i,t} - b_t over the group with every rollout weighing the same (each of its T_i turns weighs 1/T_i):
    sigma^2 = 1/G sum_i 1/T_i sum_t (G_{i,t} - b_t)^2. ``scale_std=False`` leaves out the division.
    With gamma = 1, outcome-only rewards and rollouts of equal length this is :func:`group_advantages`
    broadcast to every turn. A group whose residuals are all 0 gets 0; otherwise |A| <= sqrt(G * max_i T_i).
    """
    if len(turn_rewards) % group_size:
        raise ValueError(f"{len(turn_rewards)} rollouts do not split into groups of {group_size}")
    returns = [returns_to_go(r, gamma) for r in turn_rewards]
    out: list[list[float]] = []
    for start in range(0, len(returns), group_size):
        group = returns[start : start + group_size]
        longest = max(len(g) for g in group)
        running = [[g[t] for g in group if len(g) > t] for t in range(longest)]
        baseline = [sum(values) / len(values) for values in running]
        residuals = [[x - baseline[t] for t, x in enumerate(g)] for g in group]
        var = sum(sum(r * r for r in res) / len(res) for res in residuals if res) / group_size
        top = max((abs(x) for g in group for x in g), default=0.0)
        if math.sqrt(var) <= 1e-12 * (1.0 + top):  # every turn did as well as the others at its turn
            out += [[0.0] * len(g) for g in group]
            continue
        scale = math.sqrt(var) + eps if scale_std else 1.0
        out += [[r / scale for r in res] for res in residuals]
    return out


def importance_ratio(logprobs: torch.Tensor, old_logprobs: torch.Tensor) -> torch.Tensor:
    """Token-level ratio pi_theta / pi_rollout = exp(log pi_theta - log pi_rollout)."""
    return (logprobs - old_logprobs).exp()


def clipped_surrogate(
    ratio: torch.Tensor, advantages: torch.Tensor, eps_low: float = 0.2, eps_high: float = 0.3
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token loss ``-min(r*A, clip(r, 1-eps_low, 1+eps_high)*A)`` and where the clip was binding.

    ``advantages`` is per sample ([N]) or per token ([N, T]); it broadcasts over the tokens.
    """
    import torch

    adv = advantages.unsqueeze(-1) if advantages.dim() == ratio.dim() - 1 else advantages
    unclipped = ratio * adv
    clipped = ratio.clamp(1.0 - eps_low, 1.0 + eps_high) * adv
    binding = ((ratio < 1.0 - eps_low) & (adv < 0)) | ((ratio > 1.0 + eps_high) & (adv > 0))
    return -torch.minimum(unclipped, clipped), binding


def k3_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """The k3 estimator of KL(pi_theta || pi_ref) per token: exp(d) - d - 1 with d = log pi_ref - log pi_theta.

    Always >= 0, unbiased for samples drawn from pi_theta, and exactly 0 where the two agree.
    """
    d = ref_logprobs - logprobs
    return d.exp() - d - 1.0


def masked_mean(values: torch.Tensor, mask: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Mean over ``dim`` of the entries where ``mask`` is 1; 0 where a row has no such entry."""
    mask = mask.to(values.dtype)
    return (values * mask).sum(dim) / mask.sum(dim).clamp(min=1.0)


@dataclass
class LossOutput:
    """The scalar loss and its parts (detached scalars for logging)."""

    loss: torch.Tensor
    policy_loss: float
    kl: float
    clip_fraction: float
    ratio_mean: float
    num_samples: int


def flow_grpo_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    ref_logprobs: torch.Tensor | None = None,
    *,
    eps_low: float = 0.2,
    eps_high: float = 0.3,
    beta: float = 0.001,
    weights: torch.Tensor | None = None,
    token_weights: torch.Tensor | None = None,
) -> LossOutput:
    """The Flow-GRPO objective on ``[N, T]`` token log-probs of N turn samples (padding has mask 0).

    Per token: clipped surrogate + beta * k3 KL. It is averaged over each turn's own tokens, then
    over the turns that have at least one token, so neither padding nor long turns tip the balance.
    ``weights`` (``[N]``, default all 1) turns the mean over turns into a weighted mean: with
    ``1 / T_i`` for every turn of rollout i it is the paper's ``1/G sum_i 1/T_i sum_t``.
    """
    mask = mask.to(logprobs.dtype)
    ratio = importance_ratio(logprobs, old_logprobs)
    surrogate, binding = clipped_surrogate(ratio, advantages, eps_low, eps_high)
    if token_weights is not None:  # ``[N, T]`` off-policy correction of the sampled tokens (rollout_correction)
        surrogate = surrogate * token_weights
    per_token = surrogate
    kl = None
    if ref_logprobs is not None and beta > 0:
        kl = k3_kl(logprobs, ref_logprobs)
        per_token = per_token + beta * kl
    has_tokens = mask.sum(-1) > 0
    count = int(has_tokens.sum())
    turn_weight = has_tokens.to(mask.dtype) * (1.0 if weights is None else weights.to(mask.dtype))
    denom = turn_weight.sum().clamp(min=1e-12) if count else turn_weight.new_tensor(1.0)
    loss = (masked_mean(per_token, mask) * turn_weight).sum() / denom

    def turn_avg(x: torch.Tensor) -> float:
        return float((masked_mean(x.detach().to(mask.dtype), mask) * turn_weight).sum() / denom)

    return LossOutput(
        loss=loss,
        policy_loss=turn_avg(surrogate),
        kl=turn_avg(kl) if kl is not None else 0.0,
        clip_fraction=turn_avg(binding),
        ratio_mean=turn_avg(ratio),
        num_samples=count,
    )


def rft_loss(logprobs: torch.Tensor, mask: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
    """Rejection-sampling fine-tuning: the negative log-likelihood of the kept turns, averaged over
    each turn's own tokens, then over the turns that have tokens (the same weighting as Flow-GRPO,
    ``weights`` included)."""
    has_tokens = (mask.sum(-1) > 0).to(logprobs.dtype)
    turn_weight = has_tokens * (1.0 if weights is None else weights.to(logprobs.dtype))
    per_turn = masked_mean(-logprobs, mask)
    return (per_turn * turn_weight).sum() / turn_weight.sum().clamp(min=1e-12)


def turn_weights(turns_per_rollout: Sequence[int], aggregation: str) -> list[float]:
    """The weight of each turn sample in the loss, rollouts in order.

    ``trajectory`` (the paper's 1/G sum_i 1/T_i sum_t): every turn of rollout i weighs 1/T_i, so each
    rollout weighs the same whatever its length. ``turn``: every turn weighs 1.
    """
    if aggregation == "turn":
        return [1.0 for n in turns_per_rollout for _ in range(n)]
    if aggregation != "trajectory":
        raise ValueError(f"loss aggregation {aggregation!r}: choose trajectory or turn")
    return [1.0 / n for n in turns_per_rollout for _ in range(n)]
