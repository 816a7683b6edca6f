"""The README's tiny CPU example: the committed measurement (experiments/results/tiny_cpu_example.json, made by
experiments/tiny_cpu_example.py) agrees with itself and with the shipped config, and says what the README says:
a nonzero reward in the first 20 steps and a validation score that rises beyond its noise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.stats_util import wilson_interval

ROOT = Path(__file__).resolve().parents[2]
RESULT = ROOT / "experiments" / "results" / "tiny_cpu_example.json"


@pytest.fixture(scope="module")
def result() -> dict:
    return json.loads(RESULT.read_text(encoding="utf-8"))


def test_the_measurement_used_the_shipped_config(result):
    from agents.training.config import load_config

    config = load_config("tiny-cpu-game24")
    assert result["commands"][0].startswith("agentflow-env sft --config tiny-cpu-game24")
    assert result["commands"][1].startswith("agentflow-env train --config tiny-cpu-game24 --init-from runs/sft-tiny")
    sampled = result["validation_start_vs_end"]["sampled"]
    assert sampled["samples_per_task"] == config.eval_samples and sampled["temperature"] == config.eval_temperature
    steps = [row["step"] for row in result["curve"]]
    assert steps[0] == 0 and steps[-1] == config.steps and steps == sorted(set(steps))


def test_reward_summary_and_intervals_follow_from_the_recorded_numbers(result):
    rewards = [row["rollout/reward"] for row in result["curve"] if "rollout/reward" in row][:20]
    first = result["first_20_steps"]
    assert len(rewards) == 20 and first["steps_with_zero_reward"] == sum(r == 0 for r in rewards)
    assert first["reward_mean_steps_1_5"] == pytest.approx(sum(rewards[:5]) / 5, abs=1e-3)
    assert first["reward_mean_steps_16_20"] == pytest.approx(sum(rewards[15:]) / 5, abs=1e-3)
    compared = result["validation_start_vs_end"]
    for mode in ("sampled", "greedy"):
        for end in ("start", "end"):
            cell = compared[mode][end]
            low, high = wilson_interval(round(cell["success"] * cell["episodes"]), cell["episodes"])
            assert cell["wilson95"] == pytest.approx([low, high], abs=1e-4)
    # the learner's logged curve and the per-task comparison are the same evaluations
    evals = [row for row in result["curve"] if "val_success" in row]
    assert evals[0]["step"] == 0 and evals[-1]["step"] == result["curve"][-1]["step"]
    assert evals[0]["val_success"] == pytest.approx(compared["sampled"]["start"]["success"], abs=1e-4)
    assert evals[-1]["val_success"] == pytest.approx(compared["sampled"]["end"]["success"], abs=1e-4)
    for other in compared["other_training_seeds"]:
        cell = other["end"]
        assert cell["episodes"] == compared["sampled"]["end"]["episodes"] and len(other["rewards_first_20_steps"]) == 20
        low, high = wilson_interval(round(cell["success"] * cell["episodes"]), cell["episodes"])
        assert cell["wilson95"] == pytest.approx([low, high], abs=1e-4)
        assert sum(other["tasks_up_same_down"]) == compared["tasks"]


def test_the_example_learns(result):
    """What the README claims: reward at every one of the first 20 steps, and validation success that rises by
    more than its noise (disjoint Wilson intervals over episodes, and per-task paired intervals above 0)."""
    assert result["first_20_steps"]["steps_with_zero_reward"] == 0
    compared = result["validation_start_vs_end"]
    sampled = compared["sampled"]
    assert sampled["end"]["wilson95"][0] > sampled["start"]["wilson95"][1]
    assert sampled["per_task_gain"]["lo"] > 0
    # the other training seeds rise too; their per-task gains averaged with the first's stay above 0
    assert all(other["per_task_gain"]["mean"] > 0 for other in compared["other_training_seeds"])
    assert compared["pooled_over_training_seeds"]["per_task_gain"]["lo"] > 0
