"""A repeated seed restores the generator instead of rebuilding it: the draws are those of a fresh seeding."""

from __future__ import annotations

import copy

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


def test_the_generator_attribute_is_in_its_seeded_state_whoever_reads_it():
    """gymnasium's env checker reads ``unwrapped._np_random`` directly: a state left pending is applied there too."""
    env, fresh = _env(), _env()
    fresh.reset(seed=7)
    want = fresh._np_random.bit_generator.state
    env.reset(seed=7)
    env.np_random.integers(10, size=3)  # the generator moves on
    env.reset()
    for _ in range(2):
        env.reset(seed=7)  # the cached draw: no state is set until the generator is read
        assert copy.deepcopy(env.unwrapped._np_random).bit_generator.state == want  # as the checker reads it
    env.reset(seed=7)
    assert env.np_random.integers(1 << 30, size=3).tolist() == fresh.np_random.integers(1 << 30, size=3).tolist()


def test_a_subclass_task_choice_is_asked_on_every_seeded_reset():
    class LastTask(AgentFlowEnv):
        def _choose_task(self, options):
            return self.tasks[len(self.tasks) - 1]

    base = _env()
    env = LastTask(list(base.tasks), base.scorer, [], max_turns=3)
    assert [env.reset(seed=7)[1]["task_id"] for _ in range(2)] == ["q49", "q49"]
