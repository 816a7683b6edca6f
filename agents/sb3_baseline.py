"""A Stable-Baselines3 PPO baseline over the candidate-action bridge, and its random reference.

Candidates come from a mix of planners (e.g. one scripted, several random); PPO learns from the
numeric turn features which candidate to trust.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from agentflow_env.wrappers.sb3 import CandidateActionWrapper
from agents.policies.policy import Policy

__all__ = ["MixedProposer", "evaluate_choice", "make_candidate_env", "train_ppo"]


class MixedProposer:
    """One candidate from each planner (planners see only the observation)."""

    def __init__(self, planners: Sequence[Policy]):
        self.planners = list(planners)

    def __call__(self, obs: dict[str, str], info: dict[str, Any], rng: np.random.Generator) -> list[str]:
        return [p.act([obs])[0] for p in self.planners]


def make_candidate_env(
    env_id: str = "agentflow/Gen-GameOf24-v2", k: int = 4, seed: int = 0, **env_kwargs: Any
) -> CandidateActionWrapper:
    """``env_id`` wrapped for SB3: candidates from its scripted planner plus ``k - 1`` random planners."""
    from agents.policies.baselines import RandomPlanner, ScriptedGameOf24Planner

    try:
        from agents.policies.scripted import scripted_planner_for

        scripted: Policy = scripted_planner_for(env_id)
    except ImportError:
        scripted = ScriptedGameOf24Planner()
    planners: list[Policy] = [scripted] + [RandomPlanner(seed=seed * 100 + i) for i in range(k - 1)]
    env = gym.make(env_id, **env_kwargs)
    return CandidateActionWrapper(env, MixedProposer(planners), k=k)


def train_ppo(
    env: gym.Env, total_timesteps: int = 2048, seed: int = 0, torch_threads: int | None = 1, **ppo_kwargs: Any
) -> Any:
    """Train SB3's PPO (MLP policy) on a bridged env and return the model.

    ``torch_threads=1`` by default: a tiny MLP trains fastest single-threaded, and it leaves the
    other cores to the envs' tools.
    """
    try:
        from stable_baselines3 import PPO
    except ImportError as exc:  # pragma: no cover - depends on the extra
        from agentflow_env.error import DependencyNotInstalled

        raise DependencyNotInstalled("stable-baselines3", "sb3") from exc
    if torch_threads is not None:
        import torch

        torch.set_num_threads(torch_threads)
    defaults: dict[str, Any] = {
        "n_steps": 128,
        "batch_size": 64,
        "n_epochs": 5,
        "learning_rate": 3e-3,
        "gamma": 0.99,
        "ent_coef": 0.01,
        "verbose": 0,
        "device": "cpu",
    }
    defaults.update(ppo_kwargs)
    model = PPO("MlpPolicy", env, seed=seed, **defaults)
    model.learn(total_timesteps=total_timesteps)
    return model


def evaluate_choice(env: gym.Env, choose: Any, episodes: int = 50, seed: int = 10_000) -> float:
    """Mean episode reward of ``choose(features) -> action index`` over ``episodes`` fixed seeds."""
    total = 0.0
    for i in range(episodes):
        features, _ = env.reset(seed=seed + i)
        done = False
        while not done:
            features, reward, terminated, truncated, _ = env.step(choose(features))
            done = terminated or truncated
        total += float(reward)
    return total / episodes
