"""Episodes spread over a local 2-worker Ray cluster give the same results as the local run.

``eval --ray``: the envs live in Ray actors, the planner and the result files stay in this process; the env's
LLM modules call the loopback latency server of ``perf/eval_throughput.py`` from the actors. Rollouts over a
``RayVectorEnv`` run on the same scheduler and match the local vector env.
"""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest

from leaderboards.runner import EvalConfig, evaluate
from perf.eval_throughput import LatencyServer

ray = pytest.importorskip("ray")

PROTOCOL = """
name = "ray-test"
mode = "offline"
max_turns = 4
seeds = [0]

[env]
executor = "llm"
verifier = "llm"
generator = "llm"
engine = "openai:modules@{url}"

[[benchmarks]]
env_id = "agentflow/Gen-Math-v1"
category = "math"
num_tasks = 12
options = {{ seed = 0 }}

[[benchmarks]]
env_id = "agentflow/Gen-GameOf24-v1"
category = "math"
num_tasks = 6
options = {{ seed = 0 }}
"""


def _outcomes(result) -> dict[str, tuple]:
    return {o.key: (o.score, o.turns, o.answer, o.terminated) for o in result.outcomes}


def test_eval_and_rollouts_on_a_local_2_worker_ray_cluster_match_the_local_run(tmp_path: Path) -> None:
    from agentflow_env.vector.ray import RayVectorEnv
    from agentflow_env.vector.threaded import ThreadedVectorEnv
    from agents.training.rollout import collect_group_rollouts
    from tests.helpers import ConcurrentScripted, flat_groups

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)  # this test's own local cluster
    try:
        with LatencyServer(0.05) as server:
            protocol = tmp_path / "ray-test.toml"
            protocol.write_text(PROTOCOL.format(url=server.url), encoding="utf-8")
            policy = f"openai:planner@{server.url}"
            common = {"policy": policy, "protocol": str(protocol), "name": "run", "concurrency": 6, "progress": False}
            local = evaluate(EvalConfig(out=tmp_path / "local", **common))
            spread = evaluate(EvalConfig(out=tmp_path / "ray", ray="local", ray_workers=2, **common))
            assert len(local.outcomes) == 18
            assert _outcomes(spread) == _outcomes(local)
            assert sum(o.turns for o in local.outcomes) > 18, "episodes take several turns"

        env_id = "agentflow/Gen-GameOf24-v1"
        fns = [lambda: gym.make(env_id, split="train") for _ in range(4)]
        ids = [gym.make(env_id, split="train").unwrapped.tasks[i].id for i in range(3)]
        with ThreadedVectorEnv(fns, autoreset_mode="disabled") as vec:
            here = collect_group_rollouts(vec, ConcurrentScripted(), ids, group_size=2, seed=0)
        remote = RayVectorEnv(fns, num_workers=2, autoreset_mode="disabled")
        try:
            there = collect_group_rollouts(remote, ConcurrentScripted(), ids, group_size=2, seed=0)
        finally:
            remote.close()
        assert flat_groups(there) == flat_groups(here)
    finally:
        ray.shutdown()
