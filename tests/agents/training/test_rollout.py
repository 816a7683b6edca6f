"""Tests of the threaded vector env (autoreset modes) and rollout collection (counts, groups, JSONL).

Most use the scripted and random planners (no torch); one group test uses the tiny LM planner.
"""

from __future__ import annotations

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

import agentflow_env  # noqa: F401
from agentflow_env.error import ConfigError
from agentflow_env.vector.threaded import ThreadedVectorEnv, VectorRunner, make_vector_env
from agents.policies.baselines import RandomPlanner, ScriptedGameOf24Planner
from agents.training.rollout import (
    RolloutStats,
    Trajectory,
    Turn,
    collect_group_rollouts,
    collect_rollouts,
    load_jsonl,
    save_jsonl,
)
from tests.helpers import ConcurrentScripted, flat_groups

ENV_ID = "agentflow/Gen-GameOf24-v1"
TOOL = "Tool Name: Calculator_Tool\nCommand: 1+1"


def _fns(n: int, max_turns: int = 10):
    return [lambda: gym.make(ENV_ID, split="train", max_turns=max_turns) for _ in range(n)]


class CountingPolicy:
    """Wraps a policy and records the size of every batched call."""

    def __init__(self, inner):
        self.inner = inner
        self.batches: list[int] = []

    def act(self, observations):
        self.batches.append(len(observations))
        return self.inner.act(observations)


def test_import_stays_torch_free():
    code = "import agentflow_env, agentflow_env.vector.threaded, sys; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_next_step_autoreset():
    with ThreadedVectorEnv(_fns(2, max_turns=2), autoreset_mode="next_step") as vec:
        assert isinstance(vec, VectorRunner)
        obs, infos = vec.reset(seed=0)
        assert len(obs) == 2 and all("prompt" in o for o in obs) and infos[0]["turn"] == 0
        _, rew, term, trunc, infos = vec.step(["Final Answer: 1", TOOL])
        assert term.tolist() == [True, False] and trunc.tolist() == [False, False]
        assert "score" in infos[0] and "trajectory" in infos[0]
        # env 0 resets instead of acting; env 1 hits its turn budget
        obs, rew, term, trunc, infos = vec.step(["ignored", TOOL])
        assert infos[0]["autoreset"] and infos[0]["turn"] == 0 and rew[0] == 0.0 and not term[0]
        assert trunc.tolist() == [False, True]
        assert vec.episode_done == [False, True]


def test_same_step_autoreset():
    with ThreadedVectorEnv(_fns(2), autoreset_mode="same_step") as vec:
        vec.reset(seed=[3, 4])
        obs, rew, term, trunc, infos = vec.step(["Final Answer: 1", TOOL])
        assert term[0] and "final_obs" in infos[0] and "score" in infos[0]["final_info"]
        assert infos[0]["turn"] == 0 and infos[0]["final_info"]["trajectory"][0]["action"] == "Final Answer: 1"
        assert "prompt" in infos[0]["final_obs"] and "Turns left: 10" in obs[0]["prompt"]
        assert vec.episode_done == [False, False]
        assert infos[1]["turn"] == 1


def test_disabled_autoreset_masks_and_skips():
    with ThreadedVectorEnv(_fns(3), autoreset_mode="disabled", max_workers=0) as vec:
        obs, _ = vec.reset(seed=0)
        _, _, term, _, infos = vec.step(["Final Answer: 1", None, TOOL])
        assert term.tolist() == [True, False, False] and infos[1] == {"skipped": True}
        with pytest.raises(RuntimeError, match="reset it"):
            vec.step(["Final Answer: 2", None, None])
        first_task = infos[0]["task_id"]
        obs, infos = vec.reset(options=[{"task_id": first_task}, None, None], mask=[True, False, False])
        assert infos[0]["task_id"] == first_task and infos[1] == {"reset": False}
        assert vec.episode_done == [False, False, False]
        with pytest.raises(ValueError, match="one per env"):
            vec.step([TOOL])


def test_bad_autoreset_mode():
    with pytest.raises(ConfigError, match="autoreset_mode"):
        ThreadedVectorEnv(_fns(1), autoreset_mode="sometimes")


def test_rollouts_count_every_episode_once():
    policy = CountingPolicy(RandomPlanner(seed=1))
    stats = RolloutStats()
    trajs = collect_rollouts(_fns(3, max_turns=4), policy, num_episodes=7, seed=10, stats=stats)
    assert [t.episode for t in trajs] == list(range(7))
    assert all(t.terminated or t.truncated for t in trajs)
    assert all(1 <= t.num_turns <= 4 for t in trajs)
    assert len({t.num_turns for t in trajs}) > 1  # episodes of different lengths overlapped
    # one batched act per turn over the active envs, and every row became a turn
    assert stats.policy_calls == len(policy.batches) and max(policy.batches) == 3
    assert sum(policy.batches) == sum(t.num_turns for t in trajs) == stats.turns
    assert stats.episodes == 7
    for t in trajs:
        assert [turn.turn for turn in t.turns] == list(range(1, t.num_turns + 1))
        assert sum(turn.reward for turn in t.turns) == pytest.approx(t.reward)
        if t.truncated:
            assert all(turn.action for turn in t.turns)


def test_rollouts_do_not_depend_on_the_number_of_envs():
    a = collect_rollouts(_fns(1), ScriptedGameOf24Planner(), num_episodes=5, seed=3)
    b = collect_rollouts(_fns(4), ScriptedGameOf24Planner(), num_episodes=5, seed=3)
    assert [t.task_id for t in a] == [t.task_id for t in b]
    assert [t.to_dict() | {"seconds": 0} for t in a] == [t.to_dict() | {"seconds": 0} for t in b]
    assert all(t.success and t.num_turns == 2 for t in a)
    assert a[0].turns[0].tool == "Calculator_Tool" and a[0].turns[0].result


def test_rollouts_by_task_id_and_bad_arguments():
    vec = make_vector_env(ENV_ID, 2, autoreset_mode="disabled", split="train")
    ids = [t.task_id for t in collect_rollouts(vec, ScriptedGameOf24Planner(), num_episodes=3, seed=0)]
    again = collect_rollouts(vec, ScriptedGameOf24Planner(), task_ids=ids[::-1])
    assert [t.task_id for t in again] == ids[::-1]
    vec.close()
    with pytest.raises(ConfigError, match="exactly one"):
        collect_rollouts(_fns(1), ScriptedGameOf24Planner())
    with ThreadedVectorEnv(_fns(1)) as wrong_mode, pytest.raises(ConfigError, match="disabled"):
        collect_rollouts(wrong_mode, ScriptedGameOf24Planner(), num_episodes=1)


def test_group_rollouts_give_g_per_task():
    ids = [t.task_id for t in collect_rollouts(_fns(2), ScriptedGameOf24Planner(), num_episodes=3, seed=5)]
    policy = CountingPolicy(RandomPlanner(seed=2))
    groups = collect_group_rollouts(_fns(4, max_turns=3), policy, ids, group_size=4, seed=0)
    assert len(groups) == 3
    for g, (task_id, group) in enumerate(zip(ids, groups)):
        assert len(group) == 4
        assert {t.task_id for t in group} == {task_id}
        assert [t.sample for t in group] == [0, 1, 2, 3] and {t.group for t in group} == {g}
    assert max(policy.batches) == 4


def test_jsonl_round_trip(tmp_path):
    trajs = collect_rollouts(_fns(2), ScriptedGameOf24Planner(), num_episodes=3, seed=0)
    trajs[0].turns[0].prompt_ids, trajs[0].turns[0].response_ids = [1, 2], [3]
    trajs[0].turns[0].logprobs = [-0.5]
    path = save_jsonl(trajs, tmp_path / "sub" / "rollouts.jsonl")
    back = load_jsonl(path)
    assert back == trajs
    assert back[0].num_turns == trajs[0].num_turns
    assert Trajectory.from_dict({"task_id": "x", "env_id": "y", "turns": [Turn(1, "p", "a").to_dict()]}).num_turns == 1
    (tmp_path / "bad.jsonl").write_text('{"not": "a trajectory"}\n')
    with pytest.raises(ValueError, match=r"bad\.jsonl:1"):
        load_jsonl(tmp_path / "bad.jsonl")


def test_group_rollouts_record_tokens_with_the_tiny_lm():
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from agentflow_env.engines.base import SamplingParams
    from agents.policies.hf_policy import HFPlanner
    from agents.tiny_lm import load_tiny_lm, tiny_lm_path

    torch.set_num_threads(1)
    model, tokenizer = load_tiny_lm(tiny_lm_path())
    planner = HFPlanner(model, tokenizer, sampling=SamplingParams(temperature=1.0, max_tokens=6, seed=0))
    ids = [t.task_id for t in collect_rollouts(_fns(1), ScriptedGameOf24Planner(), num_episodes=2, seed=1)]
    groups = collect_group_rollouts(_fns(4, max_turns=2), planner, ids, group_size=2, seed=0)
    assert [len(g) for g in groups] == [2, 2]
    for traj in (t for g in groups for t in g):
        assert traj.num_turns == 2 and traj.truncated  # random text never answers
        for turn in traj.turns:
            assert turn.prompt_ids and len(turn.response_ids) == len(turn.logprobs) <= 6
            assert all(np.isfinite(turn.logprobs))


def test_scheduled_group_rollouts_match_lock_step_turns():
    ids = [t.task_id for t in collect_rollouts(_fns(2), ScriptedGameOf24Planner(), num_episodes=6, seed=1)]
    stats = RolloutStats()
    scheduled = collect_group_rollouts(_fns(5), ConcurrentScripted(), ids, group_size=3, seed=0, stats=stats)
    turns = collect_group_rollouts(_fns(5), ConcurrentScripted(), ids, group_size=3, seed=0, scheduler="turns")
    assert flat_groups(scheduled) == flat_groups(turns)
    assert stats.episodes == 18 and stats.turns == sum(len(t.turns) for g in scheduled for t in g)
    assert all(len(t.turns) >= 2 for g in scheduled for t in g), "the scripted planner checks with the calculator"
    with pytest.raises(ConfigError, match="scheduler"):
        collect_group_rollouts(_fns(1), ConcurrentScripted(), ids, group_size=1, scheduler="lockstep")
    with pytest.raises(ConfigError, match="concurrency"):
        collect_group_rollouts(_fns(1), ConcurrentScripted(), ids, group_size=1, concurrency=0)
