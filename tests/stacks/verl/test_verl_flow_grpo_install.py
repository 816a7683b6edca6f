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
