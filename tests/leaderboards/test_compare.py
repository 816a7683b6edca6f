"""`leaderboard compare`: the paired tests against numbers worked out by hand, and the command on stored runs.

McNemar's exact test, by hand: 20 tasks, 2 that only A passes and 8 that only B passes (10 discordant pairs).
Under the null each discordant pair is B's with probability 1/2, so
    P(X <= 2 | X ~ Bin(10, 1/2)) = (C(10,0) + C(10,1) + C(10,2)) / 2^10 = (1 + 10 + 45) / 1024 = 56/1024
and the two-sided p is twice that: 112/1024 = 0.109375. The difference is (8 - 2) / 20 = +0.30.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from leaderboards.paired import (
    binomial_cdf,
    bootstrap_test,
    clopper_pearson,
    mcnemar_mde,
    mcnemar_test,
    normal_mde,
    paired_test,
)
from leaderboards.store import RUN_FILE, TASKS_FILE, RunRecord, TaskOutcome, write_json_atomic

Z975, Z80 = 1.959963984540054, 0.8416212335729143  # standard normal quantiles, from tables


def _mcnemar_scores() -> tuple[list[float], list[float]]:
    # 5 both pass, 5 both fail, 2 only A, 8 only B
    a = [1.0] * 5 + [0.0] * 5 + [1.0] * 2 + [0.0] * 8
    b = [1.0] * 5 + [0.0] * 5 + [0.0] * 2 + [1.0] * 8
    return a, b


def test_mcnemar_exact_matches_the_hand_computation() -> None:
    a, b = _mcnemar_scores()
    t = mcnemar_test(a, b)
    assert (t.a_only, t.b_only, t.tasks) == (2, 8, 20)
    assert t.p_value == pytest.approx(112 / 1024, abs=1e-12)
    assert t.difference == pytest.approx(0.30)
    assert (t.mean_a, t.mean_b) == (pytest.approx(7 / 20), pytest.approx(13 / 20))
    # the interval: share of discordant pairs (10/20) times (2 theta - 1) over theta's exact interval for 8 of 10,
    # whose ends solve P(X >= 8 | lo) = 0.025 and P(X <= 8 | hi) = 0.025 (tables: 0.4439, 0.9748)
    lo, hi = clopper_pearson(8, 10)
    upper_tail = sum(math.comb(10, k) * lo**k * (1 - lo) ** (10 - k) for k in (8, 9, 10))
    lower_tail = sum(math.comb(10, k) * hi**k * (1 - hi) ** (10 - k) for k in range(9))
    assert upper_tail == pytest.approx(0.025, abs=1e-9) and lower_tail == pytest.approx(0.025, abs=1e-9)
    assert (round(lo, 4), round(hi, 4)) == (0.4439, 0.9748)
    assert t.interval == (pytest.approx(0.5 * (2 * lo - 1)), pytest.approx(0.5 * (2 * hi - 1)))
    # MDE (Connor 1987): n delta^2 = (z_.975 sqrt(pd) + z_.80 sqrt(pd - delta^2))^2 with pd = 10/20
    delta = t.mde
    assert delta is not None
    assert 20 * delta**2 == pytest.approx((Z975 * math.sqrt(0.5) + Z80 * math.sqrt(0.5 - delta**2)) ** 2, rel=1e-9)
    # it lies below the normal shortcut (z_.975 + z_.80) sqrt(pd / n) = 2.8016 * 0.1581 = 0.4430
    assert 0.30 < delta < (Z975 + Z80) * math.sqrt(0.5 / 20)
    assert paired_test([[x] for x in a], [[y] for y in b]).method == "mcnemar-exact"


def test_mcnemar_edges() -> None:
    same = mcnemar_test([1.0, 0.0, 1.0], [1.0, 0.0, 1.0])
    assert (same.p_value, same.difference, same.interval, same.mde) == (1.0, 0.0, (0.0, 0.0), None)
    # one discordant pair of one: p = 2 * P(X <= 0 | Bin(1, 1/2)) = 1
    assert mcnemar_test([0.0], [1.0]).p_value == 1.0
    assert binomial_cdf(2, 10, 0.5) == pytest.approx(56 / 1024)
    assert mcnemar_mde(0, 0.5) is None and mcnemar_mde(10, 0.0) is None


def test_bootstrap_for_trials_and_fractions_matches_hand_numbers() -> None:
    # 4 tasks with 2 paired trials each; task differences (mean over trials of B - A): 0.5, 0, 1, 0.25
    a = [[0.0, 1.0], [1.0, 1.0], [0.0, 0.0], [0.5, 0.5]]
    b = [[1.0, 1.0], [1.0, 1.0], [1.0, 1.0], [1.0, 0.5]]
    t = bootstrap_test(a, b, resamples=4000, seed=1)
    assert t.method == "paired-bootstrap" and (t.tasks, t.trials) == (4, 8)
    assert t.difference == pytest.approx((0.5 + 0 + 1 + 0.25) / 4)  # 0.4375
    # sample sd of (0.5, 0, 1, 0.25) around 0.4375: sqrt((0.00390625 + 0.19140625 + 0.31640625 + 0.03515625) / 3)
    sd = math.sqrt((0.0625**2 + 0.4375**2 + 0.5625**2 + 0.1875**2) / 3)
    assert t.mde == pytest.approx((Z975 + Z80) * sd / 2)
    assert normal_mde(sd, 4) == t.mde
    lo, hi = t.interval
    assert 0.0 <= lo <= t.difference <= hi <= 1.0  # every task difference is >= 0: so is every resampled mean
    assert paired_test(a, b, resamples=4000, seed=1) == t  # seeded: the same numbers again
    # no difference at all: p = 1
    flat = bootstrap_test([[0.5], [1.0]], [[0.5], [1.0]], resamples=200)
    assert flat.p_value == 1.0 and flat.difference == 0.0
    # a large, consistent effect: p is the smallest the resamples can show
    strong = bootstrap_test([[0.0, 0.0]] * 30, [[1.0, 0.5]] * 30, resamples=999)
    assert strong.p_value == pytest.approx(1 / 1000)


def _store(folder: Path, name: str, scores: list[float], **record: object) -> Path:
    run = folder / name
    fields = {"protocol": "offline-v2", "protocol_hash": "abc", "policy": "scripted", **record}
    rec = RunRecord(name=name, benchmarks={"agentflow/Gen-Math-v2": {"label": "Gen-Math"}}, **fields)  # type: ignore[arg-type]
    write_json_atomic(run / RUN_FILE, rec.to_dict())
    with open(run / TASKS_FILE, "w", encoding="utf-8") as fh:
        for i, s in enumerate(scores):
            key = f"agentflow/Gen-Math-v2#{i}#s0#k0"
            o = TaskOutcome(key, "agentflow/Gen-Math-v2", i, 0, 0, str(i), s, "", None, 1, True, False, 0.1)
            fh.write(json.dumps(o.to_dict()) + "\n")
    return run


def test_compare_command_prints_the_hand_computed_test(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from agentflow_env.cli import main

    a, b = _mcnemar_scores()
    run_a = _store(tmp_path, "A", a)
    run_b = _store(tmp_path, "B", b + [1.0])  # one task only B played: left out of the pairing
    assert main(["leaderboard", "compare", str(run_a), str(run_b)]) == 0
    out = capsys.readouterr().out
    assert "| Gen-Math | 20 | 35.0 | 65.0 | +30.0 |" in out and "| 0.1094 |" in out
    assert "mcnemar-exact (2 A-only, 8 B-only)" in out
    assert "not compared (no partner episode): A 0, B 1 episodes" in out
    assert "warning" not in out
    assert main(["leaderboard", "compare", "A", "B", "--results", str(tmp_path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["benchmarks"]["agentflow/Gen-Math-v2"]["p_value"] == pytest.approx(0.109375)


def test_compare_warns_when_protocol_judge_or_retrieval_differ(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentflow_env.cli import main

    a, b = _mcnemar_scores()
    judged = {"scorers": {"agentflow/Gen-Math-v2": "judge:openai:x"}}
    run_a = _store(
        tmp_path, "A", a, judges={"agentflow/Gen-Math-v2": {"engine": "openai:x", "prompt_hash": "1"}}, **judged
    )
    run_b = _store(
        tmp_path, "B", b, protocol_hash="def", judges={"agentflow/Gen-Math-v2": {"engine": "openai:y"}}, **judged
    )
    raw = json.loads((run_b / RUN_FILE).read_text())
    raw["retrieval_fingerprint"] = "bm25-index-123"  # a field this code does not know yet is still read
    (run_b / RUN_FILE).write_text(json.dumps(raw))
    assert main(["leaderboard", "compare", str(run_a), str(run_b)]) == 0
    out = capsys.readouterr().out
    assert "warning: protocol hashes differ" in out
    assert "warning: judges differ on agentflow/Gen-Math-v2" in out
    assert "warning: retrieval fingerprints differ: A None; B {'retrieval_fingerprint': 'bm25-index-123'}" in out
    # the search tools' record (leaderboards/retrieval.py) is compared by its fingerprint id
    for run, fid in ((run_a, "aaaa"), (run_b, "bbbb")):
        raw = json.loads((run / RUN_FILE).read_text())
        raw["retrieval"] = {"fingerprint_id": fid, "backends": {}}
        (run / RUN_FILE).write_text(json.dumps(raw))
    assert main(["leaderboard", "compare", str(run_a), str(run_b)]) == 0
    assert "warning: retrieval fingerprints differ: A aaaa; B bbbb" in capsys.readouterr().out


def test_compare_refuses_runs_without_shared_tasks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from agentflow_env.cli import main

    run_a = _store(tmp_path, "A", [])
    run_b = _store(tmp_path, "B", [1.0])
    assert main(["leaderboard", "compare", str(run_a), str(run_b)]) == 2
    assert "share no task" in capsys.readouterr().err
    assert main(["leaderboard", "compare", str(tmp_path / "nope"), str(run_b)]) == 2
    assert "no run" in capsys.readouterr().err
