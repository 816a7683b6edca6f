"""Tests of ``python -m leaderboards.train_reference_rows``: the offline-v2 rows ``tiny-sft`` and ``tiny-flow-grpo``.

The commands are the project's own (sft over every protocol family, train, eval); --smoke runs each phase for real
with tiny budgets from a temp directory, and the shipped checkpoints are real models that load and act.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from leaderboards.train_reference_rows import CHECKPOINTS, ROWS, main, protocol_env_ids

ROOT = Path(__file__).resolve().parents[2]


def _script(*args: str, cwd: Path, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}
    cmd = [sys.executable, "-m", "leaderboards.train_reference_rows", *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


def test_dry_run_names_one_sft_over_every_family_then_flow_grpo_and_two_evals(tmp_path, capsys):
    assert main(["--dry-run", "--work", str(tmp_path / "w"), "--output-dir", str(tmp_path / "o")]) == 0
    sft, train, eval_sft, eval_rl = capsys.readouterr().out.strip().splitlines()
    families = protocol_env_ids()
    assert len(families) == 5 and all(f"--env-id {env_id}" in sft for env_id in families)
    assert sft.startswith("agentflow-env sft ") and "--seed 0" in sft
    assert train.startswith("agentflow-env train --env-id agentflow/Gen-Science-v2 --init-from ")
    assert f"--init-from {tmp_path / 'w' / 'tiny-sft'} " in train and "--seed 0" in train
    assert "--protocol offline-v2" in eval_sft and f"--output-dir {tmp_path / 'o'}" in eval_sft
    assert f"--policy hf:{tmp_path / 'w' / 'tiny-sft'} --name tiny-sft" in eval_sft
    assert f"--policy hf:{tmp_path / 'w' / 'tiny-flow-grpo' / 'final'} --name tiny-flow-grpo" in eval_rl


def test_bad_threads_is_one_line(tmp_path):
    proc = _script("--threads", "0", "--dry-run", cwd=tmp_path, timeout=120)
    assert proc.returncode == 2 and "--threads must be at least 1" in proc.stderr


@pytest.mark.slow
def test_smoke_runs_every_phase_into_the_default_folders(tmp_path):
    pytest.importorskip("torch")
    proc = _script("--smoke", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(proc.stdout)["rows"]
    for name in ROWS:
        run = tmp_path / "runs" / "leaderboard" / "offline-v2" / name
        assert rows[name]["run"] == str(run)
        assert json.loads((run / "run.json").read_text())["policy"].startswith("hf:")
        assert set(rows[name]) >= {"overall", *protocol_env_ids()}
    record = json.loads((tmp_path / "runs" / "reference-rows" / "reference_rows.json").read_text())
    assert list(record["phases"]) == ["sft", "train", "eval/tiny-sft", "eval/tiny-flow-grpo"]
    assert (tmp_path / "runs" / "reference-rows" / "tiny-flow-grpo" / "final" / "config.json").is_file()
    # a second call finds the training phases done and only re-evaluates (resuming the stored runs)
    again = _script("--smoke", cwd=tmp_path)
    assert again.returncode == 0 and "skip sft" in again.stderr and "skip train" in again.stderr


@pytest.mark.skipif(not (CHECKPOINTS / "tiny-sft").is_dir(), reason="no shipped checkpoints")
def test_shipped_checkpoints_are_small_planners_that_act_well_formed():
    pytest.importorskip("torch")
    import gymnasium as gym

    from agentflow_env.engines.base import SamplingParams
    from agentflow_env.turn.parsing import parse_action
    from agents.policies.hf_policy import HFPlanner

    env = gym.make("agentflow/Gen-Science-v1", split="test")
    obs, _ = env.reset(seed=0)
    env.close()
    for name in ROWS:
        folder = CHECKPOINTS / name
        assert sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) < 5 * 2**20
        planner = HFPlanner.from_pretrained(folder, sampling=SamplingParams(temperature=0.0, max_tokens=64))
        (action,) = planner.act([obs])
        parsed = parse_action(action)
        assert not parsed.problems and (parsed.is_final or parsed.tool_name), action
