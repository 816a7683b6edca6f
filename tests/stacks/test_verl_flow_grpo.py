"""The verl bridge's Flow-GRPO advantages reproduce the learner's objective (agents.training.objectives):
group normalisation over rollouts and 1/T_i turn weights, on rollouts of unequal length. Runs without verl:
verl's ``seq-mean-token-mean`` aggregation is restated here (mean over a row's tokens, then over rows).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from agents.integrations.verl_flow_grpo import flow_grpo_row_advantages, row_scales  # noqa: E402
from agents.training.objectives import (  # noqa: E402
    broadcast_to_turns,
    clipped_surrogate,
    flow_grpo_loss,
    group_advantages,
    masked_mean,
    turn_weights,
)

EPS = 1e-4
TURNS = [1, 3, 2, 2, 4, 1]  # two groups of 3 rollouts, lengths unequal within each
REWARDS = [1.0, 0.0, 0.5, 0.0, 1.0, 1.0]
GROUP = 3


def _rows():
    g = torch.Generator().manual_seed(0)
    n_rows, width = sum(TURNS), 7
    lengths = torch.randint(2, width + 1, (n_rows,), generator=g)
    mask = (torch.arange(width).unsqueeze(0) < lengths.unsqueeze(1)).float()
    old = -torch.rand(n_rows, width, generator=g) * 3
    new = (old + 0.4 * torch.randn(n_rows, width, generator=g)).requires_grad_(True)
    rollout = [i for i, t in enumerate(TURNS) for _ in range(t)]
    group = [i // GROUP for i in rollout]
    token_rewards = torch.zeros(n_rows, width)
    for row, i in enumerate(rollout):  # verl puts the score on the last response token
        token_rewards[row, int(lengths[row]) - 1] = REWARDS[i]
    return new, old, mask, rollout, group, token_rewards


def _verl_loss(new, old, advantages, mask):
    """verl's policy loss with loss_agg_mode=seq-mean-token-mean (no KL): each row's token mean, then the row mean."""
    per_token, _ = clipped_surrogate((new - old).exp(), advantages, 0.2, 0.3)
    return masked_mean(per_token, mask).mean()


def _learner_loss(new, old, mask):
    adv = broadcast_to_turns(group_advantages(torch.tensor(REWARDS), GROUP, eps=EPS), TURNS)
    weights = torch.tensor(turn_weights(TURNS, "trajectory"))
    return flow_grpo_loss(new, old, adv, mask, beta=0.0, weights=weights).loss


def test_row_scales_give_each_rollout_weight_one():
    scales = row_scales([0, 1, 1, 1, 2, 2])
    assert scales == pytest.approx([2.0, 2 / 3, 2 / 3, 2 / 3, 1.0, 1.0])  # 6 rows / (3 rollouts * T_i)
    assert sum(scales) == pytest.approx(6)


def test_verl_loss_and_gradient_equal_the_learners_on_unequal_lengths():
    new, old, mask, rollout, group, token_rewards = _rows()
    adv, returns = flow_grpo_row_advantages(token_rewards, mask, group, rollout, eps=EPS)
    assert torch.equal(adv, returns) and torch.all(adv[mask == 0] == 0)
    verl = _verl_loss(new, old, adv, mask)
    (g_verl,) = torch.autograd.grad(verl, new)
    learner = _learner_loss(new, old, mask)
    (g_learner,) = torch.autograd.grad(learner, new)
    assert float(verl.detach()) == pytest.approx(float(learner.detach()), abs=1e-6)
    assert torch.allclose(g_verl, g_learner, atol=1e-7)


def test_plain_grpo_over_turn_rows_differs():
    """verl's own GRPO (normalised over turn rows, every row weighing the same) is another objective."""
    new, old, mask, rollout, group, _ = _rows()
    row_rewards = torch.tensor([REWARDS[i] for i in rollout])
    adv = torch.empty_like(row_rewards)
    for g in set(group):
        idx = [r for r, gg in enumerate(group) if gg == g]
        values = row_rewards[idx]
        adv[idx] = (values - values.mean()) / (values.std() + 1e-6)
    (g_plain,) = torch.autograd.grad(_verl_loss(new, old, adv, mask), new)
    (g_learner,) = torch.autograd.grad(_learner_loss(new, old, mask), new)
    assert (g_plain - g_learner).abs().max() > 1e-2 * g_learner.abs().max()


def test_bad_rows_are_refused():
    new, old, mask, rollout, group, token_rewards = _rows()
    with pytest.raises(ValueError, match="rows but"):
        flow_grpo_row_advantages(token_rewards, mask, group[:-1], rollout)
    with pytest.raises(ValueError, match="two groups"):
        flow_grpo_row_advantages(token_rewards, mask, [0, 1] + group[2:], rollout)  # rollout 1 in groups 0 and 1


def test_the_launcher_fills_the_shipped_config(capsys):
    from agents.integrations.verl_launch import CONFIG_DIR, main

    argv = ["--train-files", "data/train.parquet", "--val-files", "data/val.parquet", "--dry-run"]
    assert main([*argv, "trainer.total_epochs=1"]) == 0
    line = capsys.readouterr().out
    assert "verl.trainer.main_ppo" in line and f"--config-path {CONFIG_DIR}" in line
    assert "trainer.n_gpus_per_node=8" in line and line.strip().endswith("trainer.total_epochs=1")
    assert (CONFIG_DIR / "flow_grpo.yaml").is_file()
    with pytest.raises(SystemExit):
        main([*argv, "--bogus"])
