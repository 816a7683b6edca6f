"""``learning_proof.py --recompute``: every statistic from the committed per-task outcomes, checked against the
summary; on a synthetic outcomes folder written here, and on the committed results where they exist."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.learning_proof_families import FAMILIES, hopchain_behaviour
from experiments.learning_proof_outcomes import (
    PACKED,
    load_outcomes,
    outcome_files,
    read_documents,
    summarise_outcomes,
    write_documents,
    write_outcomes,
)
from experiments.learning_proof_report import ARMS

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "experiments" / "results"


def _recompute(out: Path, name: str, family: str = "hopchain") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "experiments/learning_proof.py", "--family", family, "--recompute", "--out", str(out)]
        + ["--name", name],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _episode(rng: random.Random, i: int, p: float) -> dict:
    links = 1 + i % 3
    people = [str(rng.randrange(100, 400)) for _ in range(links + 1)]
    calls = links if rng.random() < 0.8 else links - 1
    return {
        "task_id": f"t{i}",
        "success": rng.random() < p,
        "turns": calls + 1,
        "tool_calls": calls,
        "answer": people[calls],
        "tool_commands": [f"mentor of {people[k]}" for k in range(calls)],
        "tool_results": [f"mentor of {people[k]}: {people[k + 1]}" for k in range(calls)],
        "links": links,
    }


def _flip(folder: Path, arm: str, seed: int, task: int) -> None:
    docs = read_documents(folder)
    doc = next(d for d in docs if (d["arm"], d["seed"]) == (arm, seed))
    doc["tasks"][task]["success"] = not doc["tasks"][task]["success"]
    write_documents(folder, docs)


def _synthetic(folder: Path, tasks: int = 40) -> None:
    rng = random.Random(7)
    rates = {"sft_only": 0.3, "rft": 0.4, "flow_grpo_trajectory": 0.6, "flow_grpo_turn": 0.55}
    evals = {a: {s: {"tasks": [_episode(rng, i, rates[a]) for i in range(tasks)]} for s in (0, 1, 2)} for a in ARMS}
    write_outcomes(evals, [0, 1, 2], folder)


def test_recompute_reproduces_the_summary_and_catches_a_changed_outcome(tmp_path) -> None:
    outcomes = tmp_path / "proof" / "outcomes"
    _synthetic(outcomes)
    assert outcome_files(outcomes) == [outcomes / PACKED] and len(read_documents(outcomes)) == 12
    summary = {"setup": {}, **summarise_outcomes(outcomes, FAMILIES["hopchain"])}
    (tmp_path / "proof.json").write_text(json.dumps(summary, indent=1))
    ok = _recompute(tmp_path, "proof")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    report = json.loads(ok.stdout)
    assert report["matches"] and report["documents"] == 12 and set(report["recomputed"]) == {"statistics", "behaviour"}

    _flip(outcomes, "flow_grpo_turn", 1, 3)  # one task's outcome flipped: the recomputation must disagree
    bad = _recompute(tmp_path, "proof")
    assert bad.returncode == 1
    assert not json.loads(bad.stdout)["matches"] and json.loads(bad.stdout)["differences"]


def test_outcomes_must_cover_the_same_tasks_and_seeds(tmp_path) -> None:
    _synthetic(tmp_path, tasks=6)
    evals, seeds = load_outcomes(tmp_path)
    assert seeds == [0, 1, 2] and set(evals) == set(ARMS)
    write_documents(tmp_path, [d for d in read_documents(tmp_path) if (d["arm"], d["seed"]) != ("rft", 2)])
    with pytest.raises(ValueError, match="seeds"):
        load_outcomes(tmp_path)
    assert _recompute(tmp_path / "nowhere", "proof").returncode == 2  # no summary: a clear refusal


def test_hopchain_behaviour_reads_replies() -> None:
    rows = [
        {  # follows the chain: second query carries the first reply's person, answer is the last reply's
            "success": True,
            "turns": 3,
            "tool_calls": 2,
            "answer": "222",
            "tool_commands": ["mentor of 111", "rival of 150"],
            "tool_results": ["mentor of 111: 150", "rival of 150: 222"],
            "links": 2,
        },
        {  # stops one link early, answering the first reply's person
            "success": False,
            "turns": 2,
            "tool_calls": 1,
            "answer": "300",
            "tool_commands": ["friend of 120"],
            "tool_results": ["friend of 120: 300"],
            "links": 2,
        },
        {  # second query ignores the reply; the answer is made up
            "success": False,
            "turns": 3,
            "tool_calls": 2,
            "answer": "399",
            "tool_commands": ["mentor of 101", "rival of 101"],
            "tool_results": ["mentor of 101: 177", "rival of 101: 188"],
            "links": 3,
        },
    ]
    out = hopchain_behaviour(rows)
    assert out["answer_copies_reply"] == pytest.approx(2 / 3)
    assert out["answer_is_last_reply"] == pytest.approx(2 / 3)
    assert out["second_query_uses_first_reply"] == pytest.approx(1 / 2)
    assert out["lookups_vs_links"] == {"+0": 1, "-1": 2}
    assert out["success_by_links"] == {"2": 0.5, "3": 0.0}


def _recompute_all(out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "experiments/learning_proof.py", "--recompute", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_plain_recompute_checks_every_result_with_outcomes_and_lists_the_rest(tmp_path) -> None:
    assert _recompute_all(tmp_path).returncode == 2  # nothing with outcomes: a clear refusal
    # a hopchain result (its summary names the family) and a game24 one (found by its stem), with outcomes
    for name, family in (("learning_proof_hopchain", "hopchain"), ("learning_proof_multiturn", "game24")):
        _synthetic(tmp_path / name / "outcomes", tasks=12)
        stats = summarise_outcomes(tmp_path / name / "outcomes", FAMILIES[family])
        setup = {"family": family} if family == "hopchain" else {}
        (tmp_path / f"{name}.json").write_text(json.dumps({"setup": setup, **stats}))
    (tmp_path / "learning_proof_multiturn_retry.json").write_text(json.dumps({"setup": {}}))  # no outcomes
    ok = _recompute_all(tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    report = json.loads(ok.stdout)
    assert report["recomputed"] == ["learning_proof_hopchain", "learning_proof_multiturn"]
    assert report["without_outcomes"] == ["learning_proof_multiturn_retry"] and report["all_match"]
    assert "learning_proof_multiturn_retry: NOT RECOMPUTABLE" in ok.stderr
    assert "learning_proof_multiturn: matches" in ok.stderr

    _flip(tmp_path / "learning_proof_multiturn" / "outcomes", "rft", 0, 0)  # one changed outcome: exit 1
    bad = _recompute_all(tmp_path)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert json.loads(bad.stdout)["mismatched"] == ["learning_proof_multiturn"]
    assert "learning_proof_multiturn: MISMATCH" in bad.stderr and "learning_proof_hopchain: matches" in bad.stderr


def test_committed_results_recompute() -> None:
    """Every committed result with outcomes reproduces its summary (the rest are listed, not failed)."""
    if not any(RESULTS.glob("*/outcomes")):
        pytest.skip("no committed outcomes")
    done = _recompute_all(RESULTS)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "learning_proof_hopchain" in json.loads(done.stdout)["recomputed"]


def test_packed_outcomes_are_byte_stable_and_plain_json_still_reads(tmp_path) -> None:
    docs = [{"arm": "rft", "seed": s, "tasks": [{"task_id": "a", "success": True}]} for s in (0, 1)]
    first = write_documents(tmp_path, docs).read_bytes()
    assert write_documents(tmp_path, docs).read_bytes() == first and read_documents(tmp_path) == docs
    (tmp_path / "sft_only-seed0.json").write_text(json.dumps({**docs[0], "arm": "sft_only"}))
    assert outcome_files(tmp_path) == [tmp_path / PACKED, tmp_path / "sft_only-seed0.json"]
    assert [d["arm"] for d in read_documents(tmp_path)] == ["rft", "rft", "sft_only"]
