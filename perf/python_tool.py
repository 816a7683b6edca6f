"""Latency of Python_Coder_Tool per call, side by side with a fresh ``python -c`` subprocess, in one run.

Prints JSON: median milliseconds for a trivial snippet and a sympy snippet, both ways, and the speed-up ratios.
Usage: python perf/python_tool.py [--calls 200] [--subprocess-calls 20]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

from agentflow_env.tools.python_tool import PythonCoderTool

SNIPPETS = {
    "trivial": "x = 6 * 7\nprint(x)",
    "sympy": "import sympy\nx = sympy.symbols('x')\nprint(sympy.factor(x**2 - 5*x + 6))",
}
GOALS_MS = {"trivial": 1.0, "sympy": 10.0}
GOALS_SPEEDUP = {"trivial": 10.0, "sympy": 30.0}


def _median_ms(fn, calls: int) -> float:
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def _subprocess_call(code: str) -> None:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ))
    if proc.returncode != 0:
        raise RuntimeError(f"python -c failed: {proc.stderr[-300:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="tool calls per snippet")
    parser.add_argument("--subprocess-calls", type=int, default=20, help="subprocess calls per snippet")
    args = parser.parse_args()

    tool = PythonCoderTool()
    start = time.perf_counter()
    tool.warm_up()
    startup_s = time.perf_counter() - start
    results: dict[str, dict[str, float | bool]] = {}
    try:
        for name, code in SNIPPETS.items():
            first = tool.run(code, 30)
            if not first.ok:
                raise RuntimeError(f"{name} snippet failed in the tool: {first.text}")
            for _ in range(5):  # warm caches on both sides before timing
                tool.run(code, 30)
            tool_ms = _median_ms(lambda code=code: tool.run(code, 30), args.calls)
            _subprocess_call(code)
            sub_ms = _median_ms(lambda code=code: _subprocess_call(code), args.subprocess_calls)
            results[name] = {
                "tool_median_ms": round(tool_ms, 3),
                "subprocess_median_ms": round(sub_ms, 2),
                "speedup": round(sub_ms / tool_ms, 1),
                "goal_ms": GOALS_MS[name],
                "goal_speedup": GOALS_SPEEDUP[name],
                "meets_goal_ms": tool_ms <= GOALS_MS[name],
                "meets_goal_speedup": sub_ms / tool_ms >= GOALS_SPEEDUP[name],
            }
        info = tool.sandbox_info
    finally:
        tool.close()
    report = {
        "benchmark": "python_tool",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load_avg": os.getloadavg()},
        "sandbox": {
            "mode": info.mode,
            "network_isolated": info.network_isolated,
            "private_uids": info.private_uids,
            "pid_namespace": info.pid_namespace,
        },
        "zygote_startup_s": round(startup_s, 3),
        "calls": {"tool": args.calls, "subprocess": args.subprocess_calls},
        "results": results,
    }
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
