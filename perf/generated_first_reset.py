"""Seconds to the first observation of a generated family's env, in a fresh process, as JSON.

A first reset draws the split's tasks up to the one it picks, so its cost is the cost of drawing tasks
(including the draws the split filter throws away). Two cases per family: ``reset(seed=0)`` and the
worst case, ``options={"index": num_tasks - 1}``. Each case runs ``--repeats`` times in new
processes; the median and the range are printed.
Usage: ``python perf/generated_first_reset.py [--families Gen-Science Gen-Math] [--repeats 5]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

_CHILD = """
import json, sys, time
import gymnasium as gym
import agentflow_env
name, options = sys.argv[1], json.loads(sys.argv[2])
t0 = time.perf_counter()
env = gym.make(f"agentflow/{name}-v1", split="test", num_tasks=500)
t1 = time.perf_counter()
env.reset(seed=0, options=options)
t2 = time.perf_counter()
print(json.dumps({"make_s": t1 - t0, "reset_s": t2 - t1, "task": env.unwrapped.task.id}))
"""


def _once(name: str, options: dict | None) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, name, json.dumps(options)], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="+", default=["Gen-Science", "Gen-Math", "Gen-MultiHop", "Gen-Agentic"])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    results = {}
    for name in args.families:
        for case, options in (("seed0", None), ("last_of_500", {"index": 499})):
            runs = [_once(name, options) for _ in range(args.repeats)]
            resets = [r["reset_s"] for r in runs]
            results[f"{name}/{case}"] = {
                "reset_s_median": round(statistics.median(resets), 3),
                "reset_s_min": round(min(resets), 3),
                "reset_s_max": round(max(resets), 3),
                "make_s_median": round(statistics.median(r["make_s"] for r in runs), 3),
                "task": runs[0]["task"],
            }
    print(json.dumps({"repeats": args.repeats, "results": results}, indent=1))


if __name__ == "__main__":
    main()
