"""The paper's 1/T_i aggregation inside verl: a ``flow_grpo`` advantage estimator for turn rows.

With ``emit="turns"`` the agent loop hands verl one row per planner turn. verl's own GRPO then
normalises over the turn rows of a group (a long rollout counts once per turn) and its
``seq-mean-token-mean`` loss weighs every row the same. Flow-GRPO (:mod:`agents.training.objectives`)
normalises over rollouts and weighs each turn of rollout i by 1/T_i. Both are recovered from the advantage
alone, because the clipped surrogate is positively homogeneous in A (``min(r*cA, clip(r)*cA) = c*min(r*A,
clip(r)*A)`` for c > 0):

- A_i is the group-normalised outcome over the G rollouts (one value per rollout, not per row);
- row t of rollout i gets ``A_i * c_i`` with ``c_i = N_rows / (N_rollouts * T_i)``, so verl's mean over rows,
  ``1/N_rows sum_rows c_i L_row``, equals ``sum_i 1/T_i sum_t L_it / sum_i 1`` (the paper's objective,
  each rollout's turns summing to weight 1).

The KL term is not scaled (verl adds it per row), so it keeps the turn weighting; with beta = 0.001 the
difference is small. The estimator needs each row's rollout: the agent loop stamps it in
``extra_fields["agentflow_rollout"]`` and :func:`install` passes it to the estimator. Importing this module
does not import verl; :func:`install` (called by the agent loop module) registers the estimator with verl.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

__all__ = ["ESTIMATOR", "ROLLOUT_KEY", "flow_grpo_row_advantages", "install", "row_scales"]

ESTIMATOR = "flow_grpo"
ROLLOUT_KEY = "agentflow_rollout"


def row_scales(rollout_of_row: Sequence[Hashable]) -> list[float]:
    """``c`` of each row: ``N_rows / (N_rollouts * T_i)`` where T_i counts the rows of the row's rollout."""
    counts: dict[Hashable, int] = {}
    for r in rollout_of_row:
        counts[r] = counts.get(r, 0) + 1
    n_rows, n_rollouts = len(rollout_of_row), len(counts)
    return [n_rows / (n_rollouts * counts[r]) for r in rollout_of_row]


def flow_grpo_row_advantages(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    group_of_row: Sequence[Hashable],
    rollout_of_row: Sequence[Hashable],
    norm_adv_by_std: bool = True,
    eps: float = 1e-6,
) -> tuple[torch.Tensor, torch.Tensor]:
    """verl's estimator contract (``[rows, T]`` advantages and returns) with Flow-GRPO's maths.

    A rollout's outcome is the summed reward of one of its rows (every row carries the outcome). Rollouts
    are normalised within their group (``group_of_row``: verl's ``uid``) with the population std, as
    :func:`agents.training.objectives.group_advantages` does; each row gets its rollout's advantage times
    :func:`row_scales`, on its response tokens.
    """
    import torch

    n_rows = token_level_rewards.shape[0]
    if len(group_of_row) != n_rows or len(rollout_of_row) != n_rows:
        raise ValueError(f"{n_rows} rows but {len(group_of_row)} group ids and {len(rollout_of_row)} rollout ids")
    scores = token_level_rewards.sum(-1)
    outcome: dict[Hashable, float] = {}
    group_of: dict[Hashable, Hashable] = {}
    for row, (g, r) in enumerate(zip(group_of_row, rollout_of_row)):
        if r in group_of and group_of[r] != g:
            raise ValueError(f"rollout {r!r} has rows in two groups ({group_of[r]!r}, {g!r})")
        outcome.setdefault(r, float(scores[row]))
        group_of[r] = g
    members: dict[Hashable, list[Hashable]] = {}
    for r, g in group_of.items():
        members.setdefault(g, []).append(r)
    advantage: dict[Hashable, float] = {}
    for rollouts in members.values():
        values = torch.tensor([outcome[r] for r in rollouts], dtype=torch.float64)
        centered = values - values.mean()
        if norm_adv_by_std and len(rollouts) > 1:
            centered = centered / (values.std(unbiased=False) + eps)
        advantage.update(zip(rollouts, centered.tolist()))
    scale = row_scales(rollout_of_row)
    per_row = torch.tensor([advantage[r] * c for r, c in zip(rollout_of_row, scale)], dtype=torch.float32)
    advantages = per_row.to(response_mask.device).unsqueeze(-1) * response_mask.to(torch.float32)
    return advantages, advantages


def install() -> None:
    """Register ``flow_grpo`` with verl (``algorithm.adv_estimator=flow_grpo``) and let verl's
    ``compute_advantage`` hand it each row's rollout id. Safe to call more than once."""
    from verl.trainer.ppo import core_algos, ray_trainer

    try:
        core_algos.get_adv_estimator_fn(ESTIMATOR)
        registered = True
    except (ValueError, KeyError):
        registered = False
    if not registered:

        @core_algos.register_adv_est(ESTIMATOR)
        def _estimator(token_level_rewards, response_mask, index=None, config=None, rollouts=None, **_: Any):
            if rollouts is None or index is None:
                from agentflow_env.error import ConfigError

                raise ConfigError(
                    f"adv_estimator={ESTIMATOR} needs each row's rollout id (non_tensor_batch[{ROLLOUT_KEY!r}]); "
                    "use the agentflow_agent loop with emit='turns'"
                )
            norm = True if config is None else bool(config.get("norm_adv_by_std_in_grpo", True))
            return flow_grpo_row_advantages(token_level_rewards, response_mask, list(index), list(rollouts), norm)

    original = ray_trainer.compute_advantage
    if getattr(original, "_agentflow", False):
        return

    def compute_advantage(data: Any, adv_estimator: Any, *args: Any, **kwargs: Any) -> Any:
        if str(getattr(adv_estimator, "value", adv_estimator)) != ESTIMATOR:
            return original(data, adv_estimator, *args, **kwargs)
        config = kwargs.get("config")
        norm = True if config is None else bool(config.get("norm_adv_by_std_in_grpo", True))
        rollouts = data.non_tensor_batch.get(ROLLOUT_KEY)
        advantages, returns = core_algos.get_adv_estimator_fn(ESTIMATOR)(
            token_level_rewards=data.batch["token_level_rewards"],
            response_mask=data.batch["response_mask"],
            index=data.non_tensor_batch.get("uid"),
            config={"norm_adv_by_std_in_grpo": norm},
            rollouts=None if rollouts is None else list(rollouts),
        )
        data.batch["advantages"], data.batch["returns"] = advantages, returns
        return data

    compute_advantage._agentflow = True  # type: ignore[attr-defined]
    ray_trainer.compute_advantage = compute_advantage
