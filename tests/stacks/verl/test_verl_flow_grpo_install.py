"""``install()`` registers the flow_grpo estimator with verl's real registry and wraps its ``compute_advantage``
(verl's own env: ``tox -e verl``). The maths are tested against agents.training.objectives in
tests/stacks/test_verl_flow_grpo.py."""

from __future__ import annotations

import pytest

pytest.importorskip("verl")
torch = pytest.importorskip("torch")

from verl import DataProto  # noqa: E402
from verl.trainer.ppo import core_algos, ray_trainer  # noqa: E402

from agents.integrations.verl_flow_grpo import ESTIMATOR, ROLLOUT_KEY, flow_grpo_row_advantages, install  # noqa: E402


def test_install_registers_the_estimator_and_feeds_it_rollout_ids():
    import numpy as np

    install()
    install()  # twice is harmless
    rewards = torch.zeros(4, 3)
    rewards[:, -1] = torch.tensor([1.0, 1.0, 0.0, 0.0])
    mask = torch.ones(4, 3)
    data = DataProto.from_dict(
        tensors={"token_level_rewards": rewards, "response_mask": mask},
        non_tensors={
            "uid": np.array(["q", "q", "q", "q"], dtype=object),
            ROLLOUT_KEY: np.array(["a", "a", "b", "c"], dtype=object),
        },
    )
    out = ray_trainer.compute_advantage(data, ESTIMATOR)
    expected, _ = flow_grpo_row_advantages(rewards, mask, ["q"] * 4, ["a", "a", "b", "c"])
    assert torch.allclose(out.batch["advantages"], expected)
    assert core_algos.get_adv_estimator_fn(ESTIMATOR) is not None


def test_verl_own_loss_on_the_registered_estimator_is_the_learners():
    """All through verl: ``compute_advantage`` with ``flow_grpo`` on a DataProto of turn rows (rollouts of 1 to 4
    turns), then verl's registered ``vanilla`` policy loss with ``seq-mean-token-mean``: its loss and gradient are
    the Flow-GRPO loss of agents.training.objectives (1/T_i per rollout, advantages normalised over rollouts)."""
    import numpy as np
    from verl.workers.config import ActorConfig

    from agents.training.objectives import broadcast_to_turns, flow_grpo_loss, group_advantages, turn_weights

    install()
    turns, rewards, group = [1, 3, 2, 2, 4, 1], [1.0, 0.0, 0.5, 0.0, 1.0, 1.0], 3
    g = torch.Generator().manual_seed(0)
    rollout = [i for i, t in enumerate(turns) for _ in range(t)]
    n_rows, width = len(rollout), 7
    lengths = torch.randint(2, width + 1, (n_rows,), generator=g)
    mask = (torch.arange(width).unsqueeze(0) < lengths.unsqueeze(1)).float()
    old = -torch.rand(n_rows, width, generator=g) * 3
    new = (old + 0.2 * torch.randn(n_rows, width, generator=g)).requires_grad_(True)  # ratios < 3: no dual clip
    token_rewards = torch.zeros(n_rows, width)
    for row, i in enumerate(rollout):  # verl puts the score on the last response token
        token_rewards[row, int(lengths[row]) - 1] = rewards[i]
    data = DataProto.from_dict(
        tensors={"token_level_rewards": token_rewards, "response_mask": mask},
        non_tensors={
            "uid": np.array([f"q{i // group}" for i in rollout], dtype=object),
            ROLLOUT_KEY: np.array([f"r{i}" for i in rollout], dtype=object),
        },
    )
    advantages = ray_trainer.compute_advantage(data, ESTIMATOR).batch["advantages"]
    actor = ActorConfig(
        strategy="fsdp",
        clip_ratio=0.2,
        clip_ratio_low=0.2,
        clip_ratio_high=0.3,
        loss_agg_mode="seq-mean-token-mean",
        ppo_mini_batch_size=1,
        ppo_micro_batch_size_per_gpu=1,
        rollout_n=1,
    )
    verl_loss, _ = core_algos.get_policy_loss_fn("vanilla")(
        old, new, advantages, mask, loss_agg_mode="seq-mean-token-mean", config=actor
    )
    adv = broadcast_to_turns(group_advantages(torch.tensor(rewards), group, eps=1e-6), turns)
    weights = torch.tensor(turn_weights(turns, "trajectory"))
    learner_loss = flow_grpo_loss(new, old, adv, mask, beta=0.0, eps_low=0.2, eps_high=0.3, weights=weights).loss
    (g_verl,) = torch.autograd.grad(verl_loss, new)
    (g_learner,) = torch.autograd.grad(learner_loss, new)
    assert float(verl_loss.detach()) == pytest.approx(float(learner_loss.detach()), abs=1e-6)
    assert torch.allclose(g_verl, g_learner, atol=1e-7) and g_learner.abs().max() > 1e-3
