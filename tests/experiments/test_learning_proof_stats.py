"""The learning proof's statistics (experiments/stats_util.py) against values computed by hand."""

from __future__ import annotations

import math

import pytest

from experiments.stats_util import (
    holm,
    majority_vote,
    mcnemar_exact,
    paired_bootstrap_diff,
    t_interval,
    t_quantile_975,
    wilson_interval,
)


def _pairs(a_only: int, b_only: int, both: int = 0, neither: int = 0) -> tuple[list[bool], list[bool]]:
    a = [True] * a_only + [False] * b_only + [True] * both + [False] * neither
    b = [False] * a_only + [True] * b_only + [True] * both + [False] * neither
    return a, b


@pytest.mark.parametrize(
    ("a_only", "b_only", "p"),
    [
        (1, 6, 2 * (1 + 7) / 2**7),  # P(X<=1 | n=7) = 8/128, two-sided 0.125
        (0, 5, 2 / 2**5),  # 0.0625: five discordant tasks all one way is not enough at 5%
        (2, 10, 2 * (1 + 12 + 66) / 2**12),  # 158/4096 = 0.0386
        (10, 2, 2 * (1 + 12 + 66) / 2**12),  # symmetric
        (3, 3, 1.0),  # 2 * 42/64 > 1: capped
        (0, 0, 1.0),  # no discordant task: no evidence either way
    ],
)
def test_mcnemar_exact_by_hand(a_only: int, b_only: int, p: float) -> None:
    a, b = _pairs(a_only, b_only, both=7, neither=11)
    result = mcnemar_exact(a, b)
    assert result.p_value == pytest.approx(p, rel=1e-12)
    assert (result.a_only, result.b_only, result.both, result.neither) == (a_only, b_only, 7, 11)
    assert result.n == a_only + b_only + 18


def test_mcnemar_ignores_concordant_tasks_and_rejects_unpaired() -> None:
    a, b = _pairs(1, 6)
    a2, b2 = _pairs(1, 6, both=100, neither=200)
    assert mcnemar_exact(a, b).p_value == mcnemar_exact(a2, b2).p_value
    with pytest.raises(ValueError, match="equal lengths"):
        mcnemar_exact([True], [True, False])


def test_wilson_interval_by_hand() -> None:
    lo, hi = wilson_interval(5, 10)
    assert (lo, hi) == (pytest.approx(0.2366, abs=1e-4), pytest.approx(0.7634, abs=1e-4))
    lo, hi = wilson_interval(0, 10)
    z2 = 1.959963984540054**2
    assert lo == 0.0 and hi == pytest.approx(z2 / (10 + z2), rel=1e-9)  # 0.2775


def test_t_interval_by_hand() -> None:
    out = t_interval([0.2, 0.3, 0.4])
    half = 4.302652730 * 0.1 / math.sqrt(3)
    assert out["mean"] == pytest.approx(0.3) and out["sd"] == pytest.approx(0.1)
    assert (out["lo"], out["hi"]) == (pytest.approx(0.3 - half), pytest.approx(0.3 + half))
    one = t_interval([0.5])
    assert one["mean"] == 0.5 and one["lo"] is None and one["hi"] is None  # one seed: no interval, not a fake one
    assert t_quantile_975(1) == pytest.approx(12.706, abs=1e-3)
    assert t_quantile_975(1000) == pytest.approx(1.962, abs=1e-3)
    with pytest.raises(ValueError):
        t_interval([])


def test_holm_by_hand() -> None:
    # sorted: 0.01*3 = 0.03; 0.03*2 = 0.06; 0.04*1 = 0.04 -> raised to 0.06 (monotone)
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])


def test_majority_vote() -> None:
    seeds = [[True, True, False, False], [True, False, True, False], [False, False, True, True]]
    assert majority_vote(seeds) == [True, False, True, False]
    assert majority_vote([[True, False], [False, True]]) == [False, False]  # a tie is not a majority
    with pytest.raises(ValueError):
        majority_vote([[True], [True, False]])


def test_paired_bootstrap_diff() -> None:
    a, b = _pairs(40, 0, neither=360)  # diff 0.1, se sqrt(0.1 * 0.9 / 400) = 0.015
    out = paired_bootstrap_diff(a, b, resamples=4000, seed=1)
    assert out["diff"] == pytest.approx(0.1)
    assert out["lo"] == pytest.approx(0.1 - 1.96 * 0.015, abs=0.008)
    assert out["hi"] == pytest.approx(0.1 + 1.96 * 0.015, abs=0.008)
    assert paired_bootstrap_diff(a, b, resamples=4000, seed=1) == out  # seeded: reproducible
    same = paired_bootstrap_diff(*_pairs(0, 0, both=5, neither=5), resamples=200)
    assert same["diff"] == same["lo"] == same["hi"] == 0.0


def test_learning_proof_statistics_pools_seeds_by_majority_vote() -> None:
    from experiments.learning_proof_report import statistics

    def arm(per_seed: list[list[bool]], turns: int) -> dict[int, dict]:
        return {
            s: {"tasks": [{"success": x, "turns": turns, "tool_calls": turns - 1} for x in outcomes]}
            for s, outcomes in enumerate(per_seed)
        }

    base = [False] * 10
    better = [True] * 6 + [False] * 4
    evals = {
        "sft_only": arm([base, base, base], 2),
        "rft": arm([base, better, base], 2),  # majority: solves nothing
        "flow_grpo_trajectory": arm([better, better, base], 3),  # majority: 6 tasks
        "flow_grpo_turn": arm([better, better, better], 1),
    }
    out = statistics(evals, [0, 1, 2])
    arms = out["arms"]
    assert arms["rft"]["majority_vote_success"] == 0.0
    assert arms["flow_grpo_trajectory"]["majority_vote_success"] == 0.6
    assert arms["flow_grpo_trajectory"]["mean_over_seeds"]["mean"] == pytest.approx(0.4)
    assert arms["flow_grpo_trajectory"]["share_successes_multi_turn"] == 1.0
    assert arms["flow_grpo_turn"]["share_successes_multi_turn"] == 0.0 and arms["flow_grpo_turn"]["mean_turns"] == 1
    assert arms["sft_only"]["share_successes_multi_turn"] is None  # no success: no share, not 0
    pair = next(t for t in out["pairs"] if (t["a"], t["b"]) == ("sft_only", "flow_grpo_trajectory"))
    assert (pair["majority_vote"]["a_only"], pair["majority_vote"]["b_only"]) == (0, 6)
    assert pair["majority_vote"]["p_value"] == pytest.approx(2 / 2**6)  # 0.03125
    assert pair["majority_vote"]["p_holm"] == pytest.approx(min(1.0, 6 * 2 / 2**6))  # 6 pairs, smallest p
    assert not pair["significant_5pct_holm"]
    assert pair["per_seed"]["2"]["p_value"] == 1.0
    assert len(out["pairs"]) == 6 and len(out["verdicts"]) == 6 + 1  # one per pair, then the power line
    power = out["detectable_gain_80pct_power"]
    assert power["test_tasks"] == 10 and power["gain_at_5pct_over_pairs"] > power["gain_at_5pct"] > 0
    assert out["verdicts"][-1].startswith("Power: with 10 test tasks")
    assert any("not significant" in v for v in out["verdicts"])


def test_learning_proof_plan_never_trains_or_tunes_on_test(tmp_path) -> None:
    """The dry run's commands: training and tuning read the validation split; only the final evaluation reads test."""
    import json
    import shlex
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [
            sys.executable,
            "experiments/learning_proof.py",
            "--dry-run",
            "--work",
            str(tmp_path / "w"),
            "--out",
            str(tmp_path),
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "estimated" in out.stderr
    plan = json.loads(out.stdout)
    commands = {k: v["command"] for k, v in plan["commands"].items()}
    train = [c for k, c in commands.items() if k.startswith("train/")]
    evals = [c for k, c in commands.items() if k.startswith("eval/")]
    assert len(train) == 3 * 4 + 3 * 2  # a 4-setting grid per method on seed 0, then seeds 1 and 2
    assert all("--eval-split validation" in c and "test" not in shlex.split(c) for c in train)
    assert len(evals) == 4 * 3 and all("test" in shlex.split(c) for c in evals)  # 4 arms x 3 seeds
    assert sum("--algorithm rft" in c for c in train) == 6  # RFT gets the same tuning budget
    assert not list(tmp_path.glob("*.json"))  # a dry run writes no result


def test_learning_proof_side_by_side_plan_is_the_same_plan(tmp_path) -> None:
    """--jobs only changes how many phases run at once, never which commands run."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]

    def plan(jobs: int) -> dict[str, str]:
        out = subprocess.run(
            [sys.executable, "experiments/learning_proof.py", "--dry-run", "--jobs", str(jobs)]
            + ["--work", str(tmp_path / "w"), "--out", str(tmp_path)],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        return {k: v["command"] for k, v in json.loads(out.stdout)["commands"].items()}

    one, two = plan(1), plan(2)
    assert one == two and len(one) == 1 + 2 + 18 + 12  # 3 SFT, 18 train runs, 12 test evaluations


def test_detectable_gain_matches_the_textbook_sample_size() -> None:
    """Textbook: 50% vs 60% needs about 388 per arm (two-sided 5%, 80% power); 10% vs 15% about 686."""
    from experiments.stats_util import detectable_gain

    assert detectable_gain(0.5, 388) == pytest.approx(0.10, abs=0.002)
    assert detectable_gain(0.10, 686) == pytest.approx(0.05, abs=0.002)
    assert detectable_gain(0.10, 686, alpha=0.05 / 6) > detectable_gain(0.10, 686)  # stricter test, larger gain
    assert detectable_gain(0.05, 2) == float("inf")
    with pytest.raises(ValueError):
        detectable_gain(1.0, 10)
