"""`agentflow-env train --dry-run`: rollouts, tokens and GPU-hours from the config and a stated throughput,
checked against the arithmetic written out here; nothing is trained and no model is loaded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def test_train_dry_run_counts_rollouts_tokens_and_gpu_hours(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from agentflow_env.cli import main

    args = ["train", "--config", "tiny-cpu-game24", "--dry-run", "--json", "--throughput", "500"]
    args += ["--steps", "3", "--questions-per-step", "2", "--group-size", "4", "--eval-every", "2"]
    args += ["--eval-tasks", "5", "--eval-samples", "1", "--max-new-tokens", "10", "--ppo-epochs", "2"]
    args += ["--beta", "0.0", "--dry-run-turns", "3", "--output-dir", str(tmp_path / "out")]
    assert main(args) == 0, capsys.readouterr().err
    e = json.loads(capsys.readouterr().out)
    # validation as the learner runs it: step 0 (the config's eval_on_start), step 2, and the last step (3)
    assert e["rollouts"] == {"train": 3 * 2 * 4, "validation": 3 * 5 * 1}
    assert e["turns_per_rollout"] == 3 and e["passes_per_training_token"] == 1 + 2  # generation + 2 epochs, no ref
    prompt = e["tokens_per_turn"]["prompt"]
    assert prompt > 20  # a Game-of-24 planner prompt has its rules and numbers
    assert e["tokens"]["completion_at_most"] == (24 + 15) * 3 * 10
    processed = 24 * 3 * (prompt + 10) * 3 + 15 * 3 * (prompt + 10)
    assert e["tokens"]["processed"] == pytest.approx(processed, abs=1)
    assert e["gpu_hours"] == pytest.approx(processed / 500 / 3600, abs=1e-3)
    assert not (tmp_path / "out").exists()  # nothing was trained or written
    assert main([*args[:-2], "--throughput", "0"]) == 2
