"""Two evals on one run folder: the second fails fast, naming the process that holds the folder's lock."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from leaderboards.store import RUN_FILE, TASKS_FILE, RunFolderBusy, load_run, lock_run_dir, read_jsonl

ROOT = Path(__file__).resolve().parents[2]
TINY = """
name = "tiny-lock"
max_turns = 4
seeds = [0]
[env]
executor = "direct"
verifier = "rule"
generator = "planner"
[[benchmarks]]
env_id = "agentflow/Gen-GameOf24-v1"
category = "math"
num_tasks = 20
options = { seed = 1 }
"""


def test_lock_is_exclusive_and_released(tmp_path: Path) -> None:
    run_dir = tmp_path / "p" / "run"
    with lock_run_dir(run_dir) as lock:
        assert lock.name == ".run.lock" and lock.parent == run_dir.parent
        with pytest.raises(RunFolderBusy, match=r"pid \d+"):
            with lock_run_dir(run_dir):
                pass
    with lock_run_dir(run_dir):  # released on exit
        pass


def test_two_real_evals_on_one_folder(tmp_path: Path) -> None:
    protocol = tmp_path / "tiny-lock.toml"
    protocol.write_text(TINY, encoding="utf-8")
    cmd = [
        sys.executable,
        "-m",
        "agentflow_env.cli",
        "eval",
        "--policy",
        "tests.leaderboards.test_leaderboard:SlowScripted",  # 0.1 s per act call
        "--protocol",
        str(protocol),
        "--output-dir",
        str(tmp_path),
        "--concurrency",
        "1",
        "--no-progress",
    ]
    run_dir = tmp_path / "tiny-lock" / "tests.leaderboards.test_leaderboard-SlowScripted"
    gate = tmp_path / "hold-the-first-eval"  # it stays part-way until the second has tried (a busy machine may
    gate.touch()  # take longer to start the second interpreter than the first needs for all 20 episodes)
    env = dict(os.environ, AGENTFLOW_TEST_GATE=str(gate))
    first = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not read_jsonl(run_dir / TASKS_FILE):
            assert first.poll() is None, first.stderr.read() if first.stderr else ""
            time.sleep(0.05)
        started = time.monotonic()
        second = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
        took = time.monotonic() - started
        assert second.returncode == 2, second.stderr
        assert f"pid {first.pid}" in second.stderr and "another eval" in second.stderr
        assert first.poll() is None, "the second eval must not have waited for the first to finish"
        assert took < 30, f"the second eval took {took:.1f} s to refuse"  # fails fast: mostly interpreter start-up
        gate.unlink()
        rc = first.wait(timeout=120)
        assert rc == 0, first.stderr.read() if first.stderr else ""
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    keys = [d["key"] for d in read_jsonl(run_dir / TASKS_FILE)]
    assert len(keys) == 20 == len(set(keys)), "no duplicate or lost task lines"
    result = load_run(run_dir)
    assert result.record.complete and json.loads((run_dir / RUN_FILE).read_text())["sessions"] == 1
    for o in result.outcomes:  # every trajectory offset points at its own record
        from leaderboards.store import read_trajectory

        assert read_trajectory(run_dir, o.trajectory or {})["key"] == o.key
    # once the first is done, the folder is free again: a rerun finds everything stored
    again = subprocess.run(cmd + ["--json"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["episodes"] == 20
