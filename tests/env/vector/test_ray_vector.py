"""Distributed rollouts on a local Ray: same results as the local runner; a killed actor costs one truncated episode."""

from __future__ import annotations

import pytest

ray = pytest.importorskip("ray")

import agentflow_env  # noqa: E402,F401
from agentflow_env.vector.ray import make_ray_vector_env  # noqa: E402
from agentflow_env.vector.threaded import VectorRunner, make_vector_env  # noqa: E402
from agents.policies.baselines import ScriptedGameOf24Planner  # noqa: E402

ENV = "agentflow/Gen-GameOf24-v1"


def _play(runner, policy, tasks):
    """One episode per task id, with the runner's autoreset disabled-style driving via reset(mask=...)."""
    n = runner.num_envs
    obs, _ = runner.reset(options=[{"task_id": t} for t in tasks[:n]])
    results, active = {}, list(tasks[:n])
    queue = list(tasks[n:])
    while any(a is not None for a in active):
        actions = [policy.act([obs[i]])[0] if active[i] is not None else None for i in range(n)]
        obs, rewards, term, trunc, infos = runner.step(actions)
        for i in range(n):
            if active[i] is not None and (term[i] or trunc[i]):
                results[active[i]] = (float(rewards[i]), bool(trunc[i]), bool(infos[i].get("worker_lost")))
                active[i] = queue.pop(0) if queue else None
                if active[i] is not None:
                    new_obs, _ = runner.reset(
                        options=[{"task_id": active[i]} if j == i else None for j in range(n)],
                        mask=[j == i for j in range(n)],
                    )
                    obs[i] = new_obs[i]
    return results


def test_ray_runner_matches_local_and_survives_a_killed_actor():
    from benchmarks.synthetic.game24 import load_tasks

    tasks = [t.id for t in list(load_tasks(split="test"))[:8]]
    policy = ScriptedGameOf24Planner()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        with make_vector_env(ENV, 4, autoreset_mode="disabled") as local:
            expected = _play(local, policy, tasks)
        remote = make_ray_vector_env(ENV, 4, num_workers=2, autoreset_mode="disabled")
        try:
            assert isinstance(remote, VectorRunner)
            assert _play(remote, policy, tasks) == expected
            assert all(r == (1.0, False, False) for r in expected.values())

            # kill the actor hosting env 0 in the middle of an episode
            obs, _ = remote.reset(options=[{"task_id": t} for t in tasks[:4]])
            victim = remote.workers[0]
            ray.kill(victim.actor, no_restart=True)
            actions = [policy.act([o])[0] for o in obs]
            obs, rewards, term, trunc, infos = remote.step(actions)
            lost = [i for i in range(4) if infos[i].get("worker_lost")]
            assert lost == [0, 2]  # env i lives in worker i % 2
            assert all(trunc[i] and rewards[i] == 0.0 for i in lost)
            assert remote.restarts == 1
            # the replacement actor serves new episodes
            assert _play(remote, policy, tasks[:4]) == {t: expected[t] for t in tasks[:4]}
        finally:
            remote.close()
    finally:
        ray.shutdown()
