"""Turns/s of the Ray runner as workers grow, and its per-call overhead against the local threaded runner.

Workloads: a tool that burns CPU for ``--tool-ms`` and one that waits (I/O-like) for the same time;
plus a no-op tool for the per-step overhead. Prints JSON. Usage:
``python perf/ray_scaling.py [--num-envs 8] [--workers 1 2 4] [--turns 400]``.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from agentflow_env import AgentFlowEnv, Task
from agentflow_env.tools.base import BaseTool
from agentflow_env.types import ToolResult
from agentflow_env.vector.threaded import ThreadedVectorEnv

ACTION = "Sub-Goal: work\nTool Name: Work_Tool\nCommand: go"


class WorkTool(BaseTool):
    name = "Work_Tool"
    description = "Burns CPU or waits for a fixed time."
    input_spec = "anything"
    examples = ("go",)

    def __init__(self, seconds: float, busy: bool):
        self.seconds, self.busy = seconds, busy

    def _run(self, command: str, timeout: float) -> ToolResult:
        end = time.perf_counter() + self.seconds
        if self.busy:
            x = 0
            while time.perf_counter() < end:
                x += 1
        elif self.seconds:
            time.sleep(self.seconds)
        return ToolResult(text="done")


def make_env(seconds: float, busy: bool) -> AgentFlowEnv:
    tasks = [Task(id=f"q{i}", question=f"question {i}", answer="x") for i in range(16)]
    return AgentFlowEnv(tasks, lambda p, t: 0.0, [WorkTool(seconds, busy)], max_turns=10)


def run(runner: ThreadedVectorEnv, turns: int) -> float:
    runner.reset(seed=0)
    n = runner.num_envs
    runner.step([ACTION] * n)  # warm-up
    done = 0
    start = time.perf_counter()
    while done < turns:
        runner.step([ACTION] * n)  # next_step autoreset keeps every env busy
        done += n
    return done / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--turns", type=int, default=400)
    parser.add_argument("--tool-ms", type=float, default=10.0)
    args = parser.parse_args()
    import ray

    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    from agentflow_env.vector.ray import RayVectorEnv

    s = args.tool_ms / 1000
    out: dict[str, object] = {
        "benchmark": "ray_scaling",
        "num_envs": args.num_envs,
        "tool_ms": args.tool_ms,
        "cpus": os.cpu_count(),
    }
    for label, busy in (("cpu_bound", True), ("io_bound", False)):
        fns = [lambda b=busy: make_env(s, b)] * args.num_envs
        with ThreadedVectorEnv(fns) as local:
            out[f"{label}_local_threads_turns_per_s"] = round(run(local, args.turns), 1)
        for w in args.workers:
            remote = RayVectorEnv(fns, num_workers=w)
            try:
                out[f"{label}_ray_{w}_workers_turns_per_s"] = round(run(remote, args.turns), 1)
            finally:
                remote.close()
    # per-call overhead with a no-op tool, one env: ms per step
    fns = [lambda: make_env(0.0, False)]
    with ThreadedVectorEnv(fns) as local:
        local_rate = run(local, args.turns)
    remote = RayVectorEnv(fns, num_workers=1)
    try:
        ray_rate = run(remote, args.turns)
    finally:
        remote.close()
    out["noop_local_ms_per_step"] = round(1000 / local_rate, 3)
    out["noop_ray_ms_per_step"] = round(1000 / ray_rate, 3)
    out["ray_overhead_ms_per_call"] = round(1000 / ray_rate - 1000 / local_rate, 3)
    ray.shutdown()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
