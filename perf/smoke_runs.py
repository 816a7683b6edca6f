"""The perf scripts' ``--smoke`` mode for results files that gather several runs: each run in a fresh process.

A committed results file such as ``perf/results/python_tool.json`` holds ``runs``, each the JSON one invocation
of its script printed. ``--smoke`` reruns the script that way with tiny counts and prints the same envelope, so
CI (``tests/perf/test_perf_smoke.py``) can check that every value a documented figure reads is still produced.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any


def runs_in_fresh_processes(script: str, args: list[str], count: int = 2, timeout_s: float = 120) -> list[Any]:
    """``count`` runs of ``python script *args``, each a fresh process, as the JSON each printed on stdout."""
    runs = []
    for _ in range(count):
        proc = subprocess.run(
            [sys.executable, script, *args], capture_output=True, text=True, timeout=timeout_s, check=False
        )
        if proc.returncode != 0:
            raise SystemExit(f"{script} {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
        runs.append(json.loads(proc.stdout))
    return runs


def smoke_envelope(benchmark: str, command: str, runs: list[Any]) -> dict[str, Any]:
    """The committed results file's shape around ``runs``: the benchmark, the command that made it, the runs."""
    return {
        "benchmark": benchmark,
        "command": command,
        "note": "smoke mode: tiny counts, not a measurement",
        "runs": runs,
    }
