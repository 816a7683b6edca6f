"""A repeated seed restores the generator instead of rebuilding it: the draws are those of a fresh seeding."""

from __future__ import annotations

import numpy as np

from agentflow_env import AgentFlowEnv, Task


def _env() -> AgentFlowEnv:
    tasks = [Task(id=f"q{i}", question=f"question {i}?", answer=str(i)) for i in range(50)]
    return AgentFlowEnv(tasks, lambda prediction, task: float(prediction == task.answer), [], max_turns=3)


def _draws(env: AgentFlowEnv, seed: int | None) -> tuple[str, list[int]]:
    _, info = env.reset(seed=seed)
    return info["task_id"], env.np_random.integers(1 << 30, size=5).tolist()


def test_repeated_seed_gives_the_draws_of_a_fresh_env():
    env = _env()
    first = _draws(env, 7)
    assert _draws(env, 7) == first  # restored, after draws that moved the generator on
    assert _draws(env, None)[1] != first[1]  # no seed: the generator goes on
    assert _draws(env, 7) == first
    assert _draws(_env(), 7) == first
    assert env.np_random_seed == 7
    other = _draws(env, 8)
    assert other == _draws(_env(), 8) and other != first
    assert _draws(env, 7) == first


def test_a_generator_set_by_the_caller_is_not_overwritten_by_the_cache():
    env = _env()
    _draws(env, 7)
    mine = np.random.default_rng(123)
    env.np_random = mine
    assert _draws(env, 7) == _draws(_env(), 7)  # seeded afresh, as gymnasium does
    assert env.np_random is not mine
