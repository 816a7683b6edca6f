"""The pytest score-regression plugin: the statistical check, the marker/fixture, protocol selection and recording."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from leaderboards.check import compare_to_reference, load_reference
from leaderboards.runner import EvalConfig, evaluate
from leaderboards.store import EvalResult, RunRecord, TaskOutcome

pytest_plugins = ["pytester"]

TINY = """
name = "tiny-guard"
max_turns = 4
seeds = [0]
fast_tasks = 4
[env]
executor = "direct"
verifier = "rule"
generator = "planner"
[[benchmarks]]
env_id = "agentflow/Gen-GameOf24-v1"
label = "G24"
category = "math"
num_tasks = 6
"""


# ---------------------------------------------------------------- the project's own guard
@pytest.mark.leaderboard(policy="scripted", protocol="offline-v0")
def test_scripted_planner_holds_its_offline_v0_reference(leaderboard) -> None:
    report = leaderboard.check()
    # sized by power: at a 100% reference, 10 episodes catch a fall to 85% with 80% power
    assert report.ok and len(report.checks) == 5 and all(c.n == 10 for c in report.checks)
    assert all("80% power" in note for note in report.notes)


def test_a_worse_policy_fails_the_check(tmp_path: Path) -> None:
    reference = load_reference("offline-v0", "scripted")
    worse = evaluate(EvalConfig(policy="random", protocol="offline-v0", out=tmp_path, fast=True, progress=False))
    report = compare_to_reference(worse, reference)
    assert not report.ok
    assert any(not c.ok for c in report.checks) and "OUTSIDE" in report.message()


# ---------------------------------------------------------------- the check itself
def _result(scores: list[float], protocol_hash: str = "h", name: str = "r") -> EvalResult:
    rec = RunRecord(
        name=name,
        protocol="p",
        protocol_hash=protocol_hash,
        policy="x",
        benchmarks={"e": {"label": "E", "category": "math"}},
    )
    outs = [
        TaskOutcome(
            key=f"e#{i}",
            env_id="e",
            index=i,
            seed=0,
            sample=0,
            task_id=str(i),
            score=s,
            answer="",
            gold=None,
            turns=1,
            terminated=True,
            truncated=False,
            wall_s=0.0,
        )
        for i, s in enumerate(scores)
    ]
    return EvalResult(rec, outs)


def test_check_uses_the_interval_and_the_tolerance() -> None:
    ref = _result([1.0, 0.0] * 20)  # reference 50% on every even-length prefix
    assert compare_to_reference(_result([1.0] * 12 + [0.0] * 8), ref).ok  # 60% of 20: CI contains 50%
    far = _result([1.0] * 19 + [0.0] * 1)  # 95%: CI [76, 99] excludes 50%
    assert not compare_to_reference(far, ref).ok
    assert compare_to_reference(far, ref, tolerance=0.3).ok


def test_check_compares_the_same_episodes_and_flags_protocol_changes() -> None:
    ref = _result([1.0] * 10 + [0.0] * 30)  # 25% overall, but 100% on the first ten episodes
    assert compare_to_reference(_result([1.0] * 10), ref).ok
    stale = compare_to_reference(_result([1.0] * 10, protocol_hash="other"), ref)
    assert not stale.ok and "re-record" in stale.message()
    missing = compare_to_reference(_result([1.0] * 50), ref)
    assert not missing.ok and "lacks 10" in missing.message()


# ---------------------------------------------------------------- the plugin as users drive it
def test_marker_fails_a_regression_and_protocols_are_selectable(pytester: pytest.Pytester, tmp_path: Path) -> None:
    protocol = tmp_path / "tiny-guard.toml"
    protocol.write_text(TINY)
    evaluate(EvalConfig(policy="scripted", protocol=str(protocol), out=tmp_path / "refs", progress=False))
    pytester.makepyfile(f"""
        import pytest

        @pytest.mark.leaderboard(policy="random", protocol={str(protocol)!r}, reference="scripted")
        def test_random_is_worse(leaderboard):
            leaderboard.check()

        @pytest.mark.leaderboard(policy="scripted", protocol={str(protocol)!r})
        def test_scripted_holds(leaderboard):
            assert leaderboard.check().ok

        @pytest.mark.leaderboard(policy="scripted", protocol="offline-v0")
        def test_other_protocol(leaderboard):
            leaderboard.check()
    """)
    result = pytester.runpytest_inprocess(
        "-p",
        "no:cacheprovider",
        "-rs",
        "--leaderboard-results",
        str(tmp_path / "refs"),
        "--leaderboard-protocol",
        "tiny-guard",
    )
    result.assert_outcomes(failed=1, passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*G24*OUTSIDE*", "*not selected by --leaderboard-protocol tiny-guard*"])


def _git(folder: Path, *args: str) -> str:
    import subprocess

    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(
        ["git", *args], cwd=folder, check=True, capture_output=True, text=True, env={**os.environ, **env}
    ).stdout.strip()


def test_record_refuses_a_dirty_tree_and_records_on_a_clean_one(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """The git state recorded and checked is the user's project (the rootdir), not agentflow-env's."""
    protocol = tmp_path / "tiny-guard.toml"
    protocol.write_text(TINY)
    results = tmp_path / "refs"
    pytester.makepyfile(f"""
        import pytest

        @pytest.mark.leaderboard(policy="scripted", protocol={str(protocol)!r}, reference="mine")
        def test_guard(leaderboard):
            leaderboard.check()
    """)
    _git(pytester.path, "init", "-q")
    _git(pytester.path, "add", "-A")
    _git(pytester.path, "commit", "-q", "-m", "guard")
    (pytester.path / "conftest.py").write_text("# a change not committed\n")
    _git(pytester.path, "add", "conftest.py")
    args = ("-p", "no:cacheprovider", "--leaderboard-record", "--leaderboard-results", str(results))
    dirty = pytester.runpytest_inprocess(*args)
    dirty.assert_outcomes(failed=1)
    dirty.stdout.fnmatch_lines(["*refusing to record*dirty*"])
    assert not results.exists()

    _git(pytester.path, "commit", "-q", "-m", "conftest")
    pytester.runpytest_inprocess(*args).assert_outcomes(passed=1)
    stored = load_reference("tiny-guard", "mine", results)  # the full protocol, ready to guard with
    assert stored.record.git_commit == _git(pytester.path, "rev-parse", "HEAD")
    assert stored.record.git_dirty is False and len(stored.outcomes) == 6 and not stored.record.fast


def test_check_refuses_a_reference_scored_another_way() -> None:
    ref = _result([1.0] * 10)
    ref.record.scorers = {"e": "rule:QAScorer"}
    judged = _result([1.0] * 10)
    judged.record.scorers = {"e": "judge:openai:gpt-4o"}
    report = compare_to_reference(judged, ref)
    assert not report.ok and "scored as rule" in report.message() and "judge:openai:gpt-4o" in report.message()
    same = _result([1.0] * 10)
    same.record.scorers = {"e": "rule:QAScorer"}
    assert compare_to_reference(same, ref).ok
