"""Latency of Python_Coder_Tool per call: this version against an earlier one (from git) and ``python -c``, in one run.

The earlier version (``--before``, default the last commit before per-worker namespaces) is read with ``git show``
into a temporary package and timed in the same process, interleaved round by round with the current one, so
both see the same machine load. Prints JSON: median milliseconds per call for a trivial and a sympy snippet, the
ratio new/old (the goal is at most 2), the time of ``reset()`` plus a first call (a fresh worker; goal: at most
1.2x the earlier version, with ``--episode-ms`` of untimed episode between resets, alike for both), and a fresh
``python -c`` subprocess for scale.

Usage: python perf/python_tool.py [--calls 200] [--rounds 5] [--resets 10] [--episode-ms 200] [--before REV]
       [--sandbox auto]
       python perf/python_tool.py --smoke   # CI: two tiny runs in the shape of perf/results/python_tool.json
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agentflow_env.tools.python.tool import PythonCoderTool

SNIPPETS = {
    "trivial": "x = 6 * 7\nprint(x)",
    "sympy": "import sympy\nx = sympy.symbols('x')\nprint(sympy.factor(x**2 - 5*x + 6))",
}
BEFORE_REV = "72cab45"  # the sandbox before per-worker namespaces, the minimal view and the supervisor
REPO = Path(__file__).resolve().parent.parent


def load_before(rev: str, into: str) -> Any:
    """The PythonCoderTool class of ``rev``, as a package ``agentflow_before`` under ``into``."""
    pkg = Path(into) / "agentflow_before"
    (pkg / "_sandbox").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-tree", "--name-only", rev, "agentflow_env/tools/_sandbox/"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    files = {"agentflow_env/tools/python_tool.py": "python_tool.py"}
    files.update({src: "_sandbox/" + src.rsplit("/", 1)[1] for src in listed if src.endswith(".py")})
    for src, dst in files.items():
        text = subprocess.run(
            ["git", "-C", str(REPO), "show", f"{rev}:{src}"], capture_output=True, text=True, check=True
        ).stdout
        text = text.replace("agentflow_env.tools._sandbox", "agentflow_before._sandbox")
        (pkg / dst).write_text(text)
    os.chmod(into, 0o755)  # the old sandbox binds the zygote's folder back in for dropped uids
    sys.path.insert(0, into)
    return importlib.import_module("agentflow_before.python_tool").PythonCoderTool


def _time_calls(tool: Any, code: str, calls: int) -> list[float]:
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        result = tool.run(code, 30)
        samples.append((time.perf_counter() - start) * 1000)
        if not result.ok:
            raise RuntimeError(f"snippet failed: {result.text}")
    return samples


def _time_resets(tool: Any, count: int, episode_s: float) -> list[float]:
    """reset() plus the first call, timed; then the rest of the episode (``episode_s``, untimed: an agent's turns,
    during which the current version forks the next episode's worker in the background)."""
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        tool.reset()
        tool.run("1", 30)
        samples.append((time.perf_counter() - start) * 1000)
        time.sleep(episode_s)
    return samples


def _subprocess_ms(code: str, calls: int) -> float:
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], capture_output=True, check=True)
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="tool calls per snippet, version and round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds, alternating old and new")
    parser.add_argument("--resets", type=int, default=10, help="reset() + first call, per version and round")
    parser.add_argument("--subprocess-calls", type=int, default=10)
    parser.add_argument(
        "--episode-ms",
        type=float,
        default=200.0,
        help="untimed rest of each episode after its first call (both versions alike; 0: resets back to back)",
    )
    parser.add_argument("--before", default=BEFORE_REV, help="git revision of the earlier version ('' to skip)")
    parser.add_argument("--sandbox", default="auto", help="sandbox mode of the current version")
    parser.add_argument(
        "--smoke", action="store_true", help="two runs of tiny counts, each a fresh process, as the results file"
    )
    args = parser.parse_args()
    if args.smoke:
        from smoke_runs import runs_in_fresh_processes, smoke_envelope

        tiny = ["--calls", "3", "--rounds", "1", "--resets", "2", "--subprocess-calls", "1", "--episode-ms", "0"]
        runs = runs_in_fresh_processes(__file__, [*tiny, "--before", args.before, "--sandbox", args.sandbox])
        json.dump(smoke_envelope("python_tool", "python perf/python_tool.py --smoke", runs), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return

    tools: dict[str, Any] = {"new": PythonCoderTool(sandbox=args.sandbox)}
    with tempfile.TemporaryDirectory(prefix="agentflow-perf-") as tmp:
        if args.before:
            tools["old"] = load_before(args.before, tmp)()
        startup = {}
        for name, tool in tools.items():
            start = time.perf_counter()
            tool.warm_up()
            startup[name] = round(time.perf_counter() - start, 3)
        calls: dict[str, dict[str, list[float]]] = {n: {s: [] for s in SNIPPETS} for n in tools}
        resets: dict[str, list[float]] = {n: [] for n in tools}
        try:
            for tool in tools.values():
                for code in SNIPPETS.values():
                    _time_calls(tool, code, 5)  # warm caches
            for _ in range(args.rounds):
                for name, tool in tools.items():
                    for snippet, code in SNIPPETS.items():
                        calls[name][snippet] += _time_calls(tool, code, args.calls)
                    resets[name] += _time_resets(tool, args.resets, args.episode_ms / 1000)
            info = tools["new"].sandbox_info
        finally:
            for tool in tools.values():
                tool.close()
    results: dict[str, Any] = {}
    for snippet, code in SNIPPETS.items():
        row: dict[str, Any] = {n: round(statistics.median(calls[n][snippet]), 3) for n in tools}
        if "old" in row:
            row["ratio_new_over_old"] = round(row["new"] / row["old"], 2)
            row["meets_goal_2x"] = row["ratio_new_over_old"] <= 2.0
        row["subprocess"] = round(_subprocess_ms(code, args.subprocess_calls), 2)
        results[snippet] = row
    reset_row: dict[str, Any] = {n: round(statistics.median(v), 2) for n, v in resets.items()}
    reset_row["episode_ms_between"] = args.episode_ms
    if "old" in reset_row:
        reset_row["ratio_new_over_old"] = round(reset_row["new"] / reset_row["old"], 2)
        reset_row["meets_goal_1_2x"] = reset_row["ratio_new_over_old"] <= 1.2
    report = {
        "benchmark": "python_tool",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load_avg": os.getloadavg()},
        "sandbox": {
            "mode": info.mode,
            "network_isolated": info.network_isolated,
            "private_uids": info.private_uids,
            "pid_namespace": info.pid_namespace,
            "readonly_root": info.readonly_root,
            "resource_control": info.resource_control,
            "between_calls": info.between_calls,
        },
        "before_rev": args.before or None,
        "startup_s": startup,
        "calls": {"per_snippet_version_round": args.calls, "rounds": args.rounds},
        "median_ms_per_call": results,
        "median_ms_reset_plus_first_call": reset_row,
    }
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
