"""The Stable-Baselines3 bridge: SB3's env checker passes, and PPO beats a random choice."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from stable_baselines3.common.env_checker import check_env

import agentflow_env  # noqa: F401
from agentflow_env.wrappers.sb3 import ToolChoiceWrapper, TurnFeatures
from agents.sb3_baseline import evaluate_choice, make_candidate_env, train_ppo


def test_candidate_wrapper_passes_sb3_check_env():
    env = make_candidate_env(k=4)
    check_env(env, warn=True)
    features, _ = env.reset(seed=0)
    assert features.shape == (TurnFeatures.EPISODE_DIM + 4 * TurnFeatures.CANDIDATE_DIM,)
    assert features.dtype == np.float32 and 0.0 <= features.min() and features.max() <= 1.0
    assert len(env.candidates) == 4 and all(isinstance(c, str) for c in env.candidates)


def test_tool_choice_wrapper_passes_sb3_check_env():
    import gymnasium as gym

    from agents.policies.baselines import numbers_in_question

    env = ToolChoiceWrapper(
        gym.make("agentflow/Gen-GameOf24-v1"),
        command_fn=lambda obs, tool: "+".join(map(str, numbers_in_question(obs["question"]))),
        answer_fn=lambda obs: "*".join(map(str, numbers_in_question(obs["question"]))),
    )
    check_env(env, warn=True)
    assert env.action_space.n == 2
    env.reset(seed=0)
    _, _, _, _, info = env.step(0)
    assert info["memory_steps"][-1]["tool"] == "Calculator_Tool"


def test_ppo_beats_random_choice():
    env = make_candidate_env(k=4, seed=0)
    rng = np.random.default_rng(0)
    random_score = evaluate_choice(env, lambda f: int(rng.integers(4)), episodes=40)
    model = train_ppo(env, total_timesteps=1024, seed=0)
    ppo_score = evaluate_choice(env, lambda f: int(model.predict(f, deterministic=True)[0]), episodes=40)
    assert ppo_score >= random_score + 0.3, (ppo_score, random_score)
