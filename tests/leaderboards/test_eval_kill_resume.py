"""An eval with 64 episodes in flight, killed with SIGKILL at random points, resumes without duplicates or losses.

The eval runs as a subprocess (`agentflow-env eval --concurrency 64`) against the loopback latency server of
``perf/eval_throughput.py`` (an HTTP planner and the llm modes' executor, verifier and generator). It is killed
three times once a random number of episodes is stored, then run to the end. Every unit is stored exactly once,
each outcome points at its own trajectory, and the outcomes equal those of a run never interrupted (in process).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

from leaderboards.runner import EvalConfig, evaluate
from leaderboards.store import TASKS_FILE, TRAJECTORIES_FILE, load_run
from perf.eval_throughput import LatencyServer

ROOT = Path(__file__).resolve().parents[2]
TASKS = 96

PROTOCOL = """
name = "kill-test"
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
num_tasks = {tasks}
options = {{ seed = 0 }}
"""


def _eval(url: str, protocol: Path, out: Path) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "agentflow_env.cli", "eval", "--policy", f"openai:planner@{url}"]
    command += ["--protocol", str(protocol), "--output-dir", str(out), "--concurrency", "64", "--no-progress"]
    command += ["--name", "run"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _stored(run_dir: Path) -> list[dict]:
    path = run_dir / TASKS_FILE
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.endswith("}")]


def test_sigkill_at_random_points_loses_and_repeats_nothing(tmp_path: Path) -> None:
    rng = random.Random(24)
    with LatencyServer(0.2) as server:
        protocol = tmp_path / "kill-test.toml"
        protocol.write_text(PROTOCOL.format(url=server.url, tasks=TASKS), encoding="utf-8")
        run_dir = tmp_path / "killed" / "kill-test" / "run"
        kills = 0
        for _ in range(3):
            before = len(_stored(run_dir))
            target = before + rng.randint(1, 30)
            proc = _eval(server.url, protocol, tmp_path / "killed")
            deadline = time.monotonic() + 120
            while proc.poll() is None and len(_stored(run_dir)) < target and time.monotonic() < deadline:
                time.sleep(0.02)
            if proc.poll() is None:
                proc.kill()  # SIGKILL, this test's own child only
                kills += 1
            proc.wait(timeout=30)
        final = _eval(server.url, protocol, tmp_path / "killed")
        _, err = final.communicate(timeout=300)
        assert final.returncode == 0, err.decode()[-2000:]
        policy, out = f"openai:planner@{server.url}", tmp_path / "clean"
        clean = evaluate(EvalConfig(policy, str(protocol), out, name="run", concurrency=64, progress=False))
    assert kills >= 2, "the run ended before it could be killed mid-flight"
    stored = _stored(run_dir)
    keys = [d["key"] for d in stored]
    assert len(keys) == len(set(keys)) == TASKS, f"{len(keys)} lines, {len(set(keys))} distinct units"
    blob = (run_dir / TRAJECTORIES_FILE).read_bytes()
    for d in stored:
        ref = d["trajectory"]
        assert json.loads(blob[ref["offset"] : ref["offset"] + ref["length"]])["key"] == d["key"]
    resumed = {o.key: (o.score, o.turns, o.answer) for o in load_run(run_dir).outcomes}
    fresh = {o.key: (o.score, o.turns, o.answer) for o in clean.outcomes}
    assert resumed == fresh
