"""The README's tiny CPU example: the committed measurement (experiments/results/tiny_cpu_example.json, made by
experiments/tiny_cpu_example.py) agrees with itself, with the shipped config and with the code that made it;
and (slow) today's code reruns its prefix, sft and the warm start's validation, bit for bit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.stats_util import t_interval, wilson_interval

ROOT = Path(__file__).resolve().parents[3]
RESULT = ROOT / "experiments" / "results" / "tiny_cpu_example.json"


@pytest.fixture(scope="module")
def result() -> dict:
    return json.loads(RESULT.read_text(encoding="utf-8"))


def test_the_measurement_used_the_shipped_config_and_five_seeds(result):
    from agents.training.config import load_config

    config = load_config("tiny-cpu-game24")
    assert result["commands"][0].startswith("agentflow-env sft --config tiny-cpu-game24 --output-dir runs/sft-tiny")
    assert result["commands"][1].startswith("agentflow-env train --config tiny-cpu-game24 --init-from runs/sft-tiny")
    validation = result["validation"]
    assert (
        validation["samples_per_task"] == config.eval_samples and validation["temperature"] == config.eval_temperature
    )
    seeds = [s["seed"] for s in result["seeds"]]
    assert seeds[0] == config.seed == 0 and len(set(seeds)) == len(seeds) >= 5
    steps = [row["step"] for row in result["curve_seed0"]]
    assert steps[0] == 0 and steps[-1] == config.steps and steps == sorted(set(steps))
    assert all(len(s["rewards"]) == config.steps for s in result["seeds"])


def test_the_code_version_is_recorded_and_committed(result):
    version = result["code_version"]
    assert version["commit"] and version["code_changed_since_commit"] is False
    proc = subprocess.run(
        ["git", "merge-base", "--is-ancestor", version["commit"], "HEAD"], cwd=ROOT, capture_output=True, check=False
    )
    if proc.returncode not in (0, 1):
        pytest.skip("not a git checkout with history")
    assert proc.returncode == 0, "the result names a commit outside this branch's history"
    env = result["environment"]
    assert env["torch"] and env["torch_cpu_capability"] and env["torch_threads"] == 1


def test_summaries_follow_from_the_recorded_counts(result):
    samples = result["validation"]["samples_per_task"]
    start = result["warm_start"]["validation"]
    n = len(start["per_task_successes"]) * samples
    assert start["episodes"] == n and start["success"] == round(sum(start["per_task_successes"]) / n, 4)
    for seed in result["seeds"]:
        logged = seed["logged_validation"]
        assert logged[0]["step"] == 0 and logged[-1]["step"] == len(seed["rewards"])
        for key, point in (("start", logged[0]), ("end", logged[-1])):
            cell = seed[key]
            successes = round(point["success"] * n)
            assert cell["episodes"] == n and cell["success"] == round(successes / n, 4)
            assert cell["wilson95"] == pytest.approx(list(wilson_interval(successes, n)), abs=1e-4)
        assert seed["gain"] == pytest.approx(seed["end"]["success"] - seed["start"]["success"], abs=2e-4)
        assert seed["reward_mean_steps_1_5"] == pytest.approx(sum(seed["rewards"][:5]) / 5, abs=1e-4)
        assert seed["steps_with_zero_reward"] == sum(r == 0 for r in seed["rewards"])
    # seed 0 validates with the random numbers the warm start's per-task evaluation used: the same counts
    seed0 = result["seeds"][0]
    assert seed0["start"]["success"] == start["success"]
    per_task = result["per_task_seed0"]
    assert round(sum(per_task["end_per_task_successes"]) / n, 4) == seed0["end"]["success"]
    gains = [(b - a) / samples for a, b in zip(start["per_task_successes"], per_task["end_per_task_successes"])]
    assert per_task["per_task_gain"]["mean"] == pytest.approx(sum(gains) / len(gains), abs=1e-4)
    over = result["over_seeds"]
    ends = t_interval([s["end"]["success"] for s in result["seeds"]])
    seed_gains = t_interval([s["gain"] for s in result["seeds"]])
    assert over["seeds"] == len(result["seeds"])
    for key in ("mean", "lo", "hi"):
        assert over["end_success"][key] == pytest.approx(ends[key], abs=1e-4)
        assert over["gain"][key] == pytest.approx(seed_gains[key], abs=1e-4)


@pytest.mark.slow
def test_todays_code_reruns_the_prefix_bit_for_bit(result, tmp_path):
    """sft (500 steps) and the warm start's validation (928 episodes), rerun by today's code and compared with the
    committed result: the SFT model's sha256 and every task's successes. About 95 s of CPU. Bit for bit only on the
    machine kind that made the result (same torch build and CPU kernels); elsewhere the test says so and skips."""
    import torch

    env = result["environment"]
    here = (torch.__version__, torch.backends.cpu.get_cpu_capability())
    if here != (env["torch"], env["torch_cpu_capability"]):
        pytest.skip(f"recorded on torch {env['torch']} / {env['torch_cpu_capability']}, this is {here}")
    out = tmp_path / "prefix.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "experiments" / "tiny_cpu_example.py"), "--prefix", "--work", str(tmp_path / "w")]
        + ["--out", str(out)],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rerun = json.loads(out.read_text(encoding="utf-8"))["warm_start"]
    assert rerun == result["warm_start"], "today's code no longer reproduces the committed warm start"
