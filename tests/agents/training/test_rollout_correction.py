"""Truncated importance sampling between rollout and learner log-probs: the weights, the loss, the config
switch, and a real learner step that logs the mismatch."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from agentflow_env.error import ConfigError  # noqa: E402
from agents.training.config import FlowGRPOConfig  # noqa: E402
from agents.training.flow_grpo import FlowGRPOLearner  # noqa: E402
from agents.training.objectives import flow_grpo_loss  # noqa: E402
from agents.training.rollout_correction import (  # noqa: E402
    MismatchStats,
    tis_enabled,
    truncated_importance_weights,
)


def test_weights_are_the_capped_ratio_and_zero_on_padding():
    old = torch.tensor([[-1.0, -2.0, -0.5], [-3.0, -1.0, 0.0]])
    rollout = torch.tensor([[-1.5, -0.5, -0.5], [-1.0, -1.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    w, stats = truncated_importance_weights(old, rollout, mask, cap=1.5)
    expected = torch.tensor([[min(math.exp(0.5), 1.5), math.exp(-1.5), 1.0], [math.exp(-2.0), 1.0, 0.0]])
    assert torch.allclose(w, expected)
    assert stats["tokens"] == 5 and stats["capped"] == 1
    assert stats["ratio_max"] == pytest.approx(math.exp(0.5))
    assert stats["abs_dlogp_sum"] == pytest.approx(0.5 + 1.5 + 0 + 2.0 + 0)
    with pytest.raises(ValueError, match="cap"):
        truncated_importance_weights(old, rollout, mask, cap=0.0)


def test_weights_carry_no_gradient_and_scale_the_policy_gradient():
    logp = torch.tensor([[-1.0, -2.0]], requires_grad=True)
    old = logp.detach().clone()
    mask = torch.ones(1, 2)
    adv = torch.tensor([1.0])
    base = flow_grpo_loss(logp, old, adv, mask, beta=0.0)
    (g_plain,) = torch.autograd.grad(base.loss, logp)
    w, _ = truncated_importance_weights(old, old - torch.tensor([[math.log(2.0), 0.0]]), mask, cap=5.0)
    assert not w.requires_grad and torch.allclose(w, torch.tensor([[2.0, 1.0]]))
    weighted = flow_grpo_loss(logp, old, adv, mask, beta=0.0, token_weights=w)
    (g_tis,) = torch.autograd.grad(weighted.loss, logp)
    assert torch.allclose(g_tis, g_plain * torch.tensor([[2.0, 1.0]]))


def test_stats_add_up_over_micro_batches_and_reset():
    acc = MismatchStats()
    assert acc.flush() == {}
    acc.add({"abs_dlogp_sum": 1.0, "tokens": 4.0, "ratio_max": 1.2, "capped": 0.0})
    acc.add({"abs_dlogp_sum": 3.0, "tokens": 4.0, "ratio_max": 3.0, "capped": 2.0})
    out = acc.flush()
    assert out == {
        "rollout/mismatch_abs_dlogp_mean": 0.5,
        "rollout/tis_ratio_max": 3.0,
        "rollout/tis_capped_fraction": 0.25,
    }
    assert acc.flush() == {}


def test_the_switch_is_on_by_default_for_vllm_only():
    assert tis_enabled(FlowGRPOConfig(backend="vllm"))
    assert not tis_enabled(FlowGRPOConfig(backend="hf"))
    assert tis_enabled(FlowGRPOConfig(backend="hf", rollout_correction="tis"))
    assert not tis_enabled(FlowGRPOConfig(backend="vllm", rollout_correction="off"))
    assert not tis_enabled(FlowGRPOConfig(backend="vllm", temperature=0.7))  # rollout log-probs are at T=1
    assert not tis_enabled(FlowGRPOConfig(backend="vllm", algorithm="rft"))
    assert FlowGRPOConfig().tis_imp_ratio_cap == 2.0
    with pytest.raises(ConfigError, match="rollout_correction"):
        FlowGRPOConfig(rollout_correction="sometimes")
    with pytest.raises(ConfigError, match="tis_imp_ratio_cap"):
        FlowGRPOConfig(tis_imp_ratio_cap=0)


def test_a_learner_step_with_tis_logs_the_mismatch(tmp_path):
    """On the HF sampler the rollout log-probs are the learner's own (to float error): ratio ~1, nothing capped."""
    cfg = FlowGRPOConfig(
        output_dir=str(tmp_path / "run"),
        steps=1,
        questions_per_step=2,
        group_size=2,
        max_new_tokens=6,
        env_kwargs={"max_turns": 1},
        eval_every=0,
        checkpoint_every=0,
        progress=False,
        threads=1,
        minibatch_size=2,
        ppo_epochs=2,
        rollout_correction="tis",
        tensorboard=False,
        reward_fn="tests.helpers:length_reward",
    )
    learner = FlowGRPOLearner(cfg)
    metrics = learner.train_step()
    assert metrics["rollout/mismatch_abs_dlogp_mean"] < 1e-3
    assert 0.99 < metrics["rollout/tis_ratio_max"] < 1.01
    assert metrics["rollout/tis_capped_fraction"] == 0.0
