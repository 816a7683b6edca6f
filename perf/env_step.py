"""Planner turns per second with a no-op tool (parse + execute + memory + render + verify), as JSON.

Runs one env and a ``SyncVectorEnv`` of several envs in the same process, on one core.
Usage: ``python perf/env_step.py [--turns 20000] [--num-envs 8]``.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import gymnasium as gym

from agentflow_env import AgentFlowEnv, Task
from agentflow_env.tools.base import BaseTool
from agentflow_env.types import ToolResult


class NoOpTool(BaseTool):
    name = "NoOp_Tool"
    description = "Does nothing and says so."
    input_spec = "anything"
    examples = ("ping",)

    def _run(self, command: str, timeout: float) -> ToolResult:
        return ToolResult(text="ok")


ACTION = (
    "Justification: The memory has no result yet.\nContext: none\nSub-Goal: Ping the tool.\n"
    "Tool Name: NoOp_Tool\nCommand: ping"
)
FINAL = "Final Answer: 42"


def make_env(max_turns: int) -> AgentFlowEnv:
    tasks = [Task(id=f"q{i}", question=f"What is the answer to question {i}?", answer="42") for i in range(64)]
    return AgentFlowEnv(tasks, lambda p, t: float(p == t.answer), [NoOpTool()], max_turns=max_turns)


def bench_single(turns: int, max_turns: int) -> float:
    env = make_env(max_turns)
    env.reset(seed=0)
    done_turns = 0
    start = time.perf_counter()
    while done_turns < turns:
        t = env.turn
        _, _, term, trunc, _ = env.step(FINAL if t == max_turns - 1 else ACTION)
        done_turns += 1
        if term or trunc:
            env.reset()
    return done_turns / (time.perf_counter() - start)


def bench_vector(turns: int, num_envs: int, max_turns: int) -> float:
    envs = gym.vector.SyncVectorEnv([lambda: make_env(max_turns)] * num_envs)
    envs.reset(seed=0)
    actions = tuple([ACTION] * num_envs)
    done_turns = 0
    start = time.perf_counter()
    while done_turns < turns:
        envs.step(actions)  # truncation at max_turns autoresets
        done_turns += num_envs
    elapsed = time.perf_counter() - start
    envs.close()
    return done_turns / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=20_000)
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--max-turns", type=int, default=10)
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    bench_single(1000, args.max_turns)  # warm-up
    single = bench_single(args.turns, args.max_turns)
    vector = bench_vector(args.turns, args.num_envs, args.max_turns)
    print(
        json.dumps(
            {
                "benchmark": "env_step",
                "what": "planner turns/s with a no-op tool (parse + memory + render + prompt + verify), one core",
                "turns": args.turns,
                "max_turns": args.max_turns,
                "single_env_turns_per_s": round(single),
                f"sync_vector_{args.num_envs}_turns_per_s": round(vector),
                "goal_turns_per_s": 20_000,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
