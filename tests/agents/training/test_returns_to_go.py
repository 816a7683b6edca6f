"""advantage='returns_to_go': per-turn discounted returns of the env's step rewards, group-normalised."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from agentflow_env.error import ConfigError  # noqa: E402
from agents.training.config import FlowGRPOConfig  # noqa: E402
from agents.training.objectives import (  # noqa: E402
    broadcast_to_turns,
    group_advantages,
    returns_to_go,
    returns_to_go_advantages,
)


def test_returns_to_go_by_hand():
    assert returns_to_go([-0.1, 0.0, 1.0], gamma=0.5) == pytest.approx([0.15, 0.5, 1.0])
    assert returns_to_go([-0.1, 0.0], gamma=0.5) == pytest.approx([-0.1, 0.0])
    assert returns_to_go([], gamma=0.9) == []


def test_advantages_by_hand():
    # group of 2: returns-to-go [0.15, 0.5, 1.0] and [-0.1, 0.0] (gamma 0.5, see above)
    # baselines (rollouts still running): b_0 = 0.025, b_1 = 0.25, b_2 = 1.0 (only the first)
    rewards = [[-0.1, 0.0, 1.0], [-0.1, 0.0]]
    centred = returns_to_go_advantages(rewards, group_size=2, gamma=0.5, scale_std=False)
    assert centred[0] == pytest.approx([0.125, 0.25, 0.0])
    assert centred[1] == pytest.approx([-0.125, -0.25])
    # sigma^2 = 1/2 ((0.015625 + 0.0625 + 0) / 3 + (0.015625 + 0.0625) / 2) = 0.0325520833...
    sigma = math.sqrt(0.5 * (0.078125 / 3 + 0.078125 / 2))
    scaled = returns_to_go_advantages(rewards, group_size=2, gamma=0.5, eps=1e-4)
    assert scaled[0] == pytest.approx([a / (sigma + 1e-4) for a in [0.125, 0.25, 0.0]])
    assert scaled[1] == pytest.approx([a / (sigma + 1e-4) for a in [-0.125, -0.25]])


def test_identical_rollouts_get_zero_whatever_gamma_and_penalties():
    # the same three penalised turns in every rollout: no turn is better than another, though the
    # returns-to-go differ along the rollout ([-0.271, -0.19, -0.1] at gamma 0.9)
    same = [[-0.1, -0.1, -0.1]] * 4
    assert returns_to_go_advantages(same, group_size=4, gamma=0.9) == [[0.0] * 3] * 4
    successes = [[0.0, 0.0, 1.0]] * 2
    assert returns_to_go_advantages(successes, group_size=2, gamma=0.5) == [[0.0] * 3] * 2


def test_gamma_one_and_outcome_only_is_the_broadcast_advantage():
    lengths = [3, 3, 3, 2, 2, 2]
    outcomes = [1.0, 0.0, 0.0, 1.0, 0.5, 0.0]
    per_turn = [[0.0] * (n - 1) + [r] for n, r in zip(lengths, outcomes)]
    got = returns_to_go_advantages(per_turn, group_size=3, gamma=1.0)
    want = broadcast_to_turns(group_advantages(torch.tensor(outcomes), 3), lengths).tolist()
    assert [a for adv in got for a in adv] == pytest.approx(want, rel=1e-5, abs=1e-6)


def test_a_group_with_equal_returns_gets_zero_and_others_stay_bounded():
    assert returns_to_go_advantages([[0.0, 0.0], [0.0], [0.0, 0.0, 0.0]], group_size=3) == [
        [0.0, 0.0],
        [0.0],
        [0.0] * 3,
    ]
    adv = returns_to_go_advantages([[0.0] * 9 + [-0.01], [0.0]], group_size=2, gamma=1.0)
    assert max(abs(a) for a in adv[0] + adv[1]) <= math.sqrt(2 * 10)
    with pytest.raises(ValueError, match="groups of 4"):
        returns_to_go_advantages([[1.0]] * 3, group_size=4)


def test_config_checks():
    with pytest.raises(ConfigError, match="gamma"):
        FlowGRPOConfig(advantage="returns_to_go", gamma=0.0)
    with pytest.raises(ConfigError, match="reward_fn"):
        FlowGRPOConfig(advantage="returns_to_go", reward_fn="tests.helpers:length_reward")
    with pytest.raises(ConfigError, match="advantage"):
        FlowGRPOConfig(advantage="gae")


def test_a_training_step_uses_the_env_step_penalties(tmp_path: Path):
    """The env's turn_rewards penalties reach the learner as each turn's reward, and returns_to_go turns
    them into per-turn advantages (different along one rollout)."""
    pytest.importorskip("transformers")
    from agents.training.flow_grpo import FlowGRPOLearner

    cfg = FlowGRPOConfig(
        output_dir=str(tmp_path / "run"),
        steps=1,
        questions_per_step=2,
        group_size=3,
        max_new_tokens=6,
        env_kwargs={"max_turns": 3, "turn_rewards": {"invalid_action": -0.1, "tool_error": -0.05}},
        advantage="returns_to_go",
        gamma=0.9,
        eval_every=0,
        checkpoint_every=0,
        progress=False,
        threads=1,
        tensorboard=False,
    )
    learner = FlowGRPOLearner(cfg)
    seen = {}
    collect = learner.collect

    def recording_collect(*args, **kwargs):
        rollouts = collect(*args, **kwargs)
        seen["env_rewards"] = [list(r) for r in rollouts.turn_rewards]
        seen["returns"] = list(rollouts.rewards)
        # the untrained tiny LM writes an invalid action on every turn (the same -0.1 everywhere, so every
        # advantage would be 0): pretend its first turn in the first rollout was a valid one
        rollouts.turn_rewards[0][0] = 0.0
        seen["rollouts"] = rollouts
        return rollouts

    learner.collect = recording_collect
    metrics = learner.train_step()
    learner.close()
    rollouts = seen["rollouts"]
    assert all(len(r) == len(t) for r, t in zip(rollouts.turn_rewards, rollouts.turns))
    assert [sum(r) for r in seen["env_rewards"]] == pytest.approx(seen["returns"])  # R is the episode return
    assert any(r < 0 for rs in seen["env_rewards"] for r in rs), "the tiny LM made no penalised turn"
    want = returns_to_go_advantages(rollouts.turn_rewards, 3, gamma=0.9)
    got = [[s.advantage for s in turns] for turns in rollouts.turns]
    assert got == [pytest.approx(w, rel=1e-5, abs=1e-6) for w in want]
    assert any(abs(a) > 0.1 for adv in got for a in adv), got
    assert any(len(set(adv)) > 1 for adv in got), "no rollout whose turns differ"
    assert math.isfinite(metrics["losses/loss"])
