"""The statistical score-regression check behind the pytest plugin: new run vs stored reference.

A benchmark fails when the reference accuracy (on the same episodes) lies outside the new run's
95% Wilson interval, widened by an optional absolute tolerance. :func:`plan_guard` sizes a fast check
from the reference: per benchmark, the fewest tasks that catch a stated drop with a stated power (exact
binomial power of that same decision rule), and it says what the check cannot catch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from agentflow_env.error import ConfigError
from leaderboards.stats import guard_power, guard_size
from leaderboards.store import RESULTS_DIR, EvalResult, load_run, run_name_for

__all__ = ["BenchmarkCheck", "CheckReport", "GuardPlan", "compare_to_reference", "load_reference", "plan_guard"]


@dataclass(frozen=True)
class BenchmarkCheck:
    env_id: str
    label: str
    n: int
    new: float
    lo: float
    hi: float
    reference: float | None
    ok: bool


@dataclass
class CheckReport:
    """Per-benchmark verdicts; ``ok`` only when every benchmark passes and there was something to compare."""

    policy: str
    protocol: str
    reference: str
    tolerance: float
    checks: list[BenchmarkCheck] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the check could and could not detect

    @property
    def ok(self) -> bool:
        return not self.problems and bool(self.checks) and all(c.ok for c in self.checks)

    def message(self) -> str:
        head = (
            f"{self.policy} on {self.protocol} vs reference {self.reference!r} "
            f"(95% Wilson interval, tolerance {self.tolerance:g}): {'PASS' if self.ok else 'FAIL'}"
        )
        lines = [head, f"  {'benchmark':<22} {'n':>4} {'new %':>7} {'95% CI':>16} {'ref %':>7}  verdict"]
        for c in self.checks:
            ref = "-" if c.reference is None else f"{100 * c.reference:.1f}"
            ci = f"[{100 * c.lo:.1f}, {100 * c.hi:.1f}]"
            lines.append(
                f"  {c.label:<22} {c.n:>4} {100 * c.new:>7.1f} {ci:>16} {ref:>7}  {'ok' if c.ok else 'OUTSIDE'}"
            )
        lines += [f"  problem: {p}" for p in self.problems]
        lines += [f"  power: {n}" for n in self.notes]
        return "\n".join(lines)


def load_reference(protocol: str, name: str, results_dir: Path = RESULTS_DIR) -> EvalResult:
    path = Path(results_dir) / protocol / name
    if not (path / "run.json").exists():
        raise ConfigError(
            f"no stored reference {name!r} for {protocol} under {results_dir}; record one with "
            f"`pytest --leaderboard-record --leaderboard-results {results_dir}` or `agentflow-env eval "
            f"--protocol {protocol} --name {name} --output-dir {results_dir}`"
        )
    ref = load_run(path)
    if ref.record.kind != "measured":
        raise ConfigError(f"{path} holds {ref.record.kind} numbers; a reference must be a measured run")
    return ref


def compare_to_reference(new: EvalResult, reference: EvalResult, tolerance: float = 0.0) -> CheckReport:
    """Check every benchmark of ``new`` against ``reference`` restricted to the same episodes.

    A reference that lacks some of the new run's episodes (another protocol version) is a problem,
    not a silent pass.
    """
    report = CheckReport(
        policy=new.record.policy, protocol=new.record.protocol, reference=reference.record.name, tolerance=tolerance
    )
    if new.record.protocol_hash != reference.record.protocol_hash:
        report.problems.append(
            f"the reference was recorded under protocol hash {reference.record.protocol_hash}, "
            f"this run used {new.record.protocol_hash}: re-record the reference"
        )
    scored, ref_scored = new.record.scoring, reference.record.scoring
    if "unknown" not in (scored, ref_scored) and new.record.scorers != reference.record.scorers:
        report.problems.append(
            f"the reference was scored as {ref_scored} ({_scorer_list(reference)}), this run as {scored} "
            f"({_scorer_list(new)}): re-record the reference with the same scorer"
        )
    keys = {o.key for o in new.outcomes}
    ref_keys = {o.key for o in reference.outcomes}
    missing = keys - ref_keys
    if missing:
        report.problems.append(
            f"the reference lacks {len(missing)} of the {len(keys)} episodes run now (e.g. {sorted(missing)[0]})"
        )
    ref_scores = reference.scores(keys & ref_keys)
    for env_id, s in new.scores().items():
        if s.n == 0:
            continue
        lo, hi = s.interval
        ref = ref_scores.get(env_id)
        ref_acc = ref.accuracy if ref is not None and ref.n else None
        ok = ref_acc is not None and lo - tolerance - 1e-12 <= ref_acc <= hi + tolerance + 1e-12
        label = new.record.benchmarks.get(env_id, {}).get("label", env_id)
        report.checks.append(BenchmarkCheck(env_id, label, s.n, s.accuracy, lo, hi, ref_acc, ok))
    if not report.checks:
        report.problems.append("the new run has no finished episodes")
    return report


def _scorer_list(run: EvalResult) -> str:
    return ", ".join(sorted(set(run.record.scorers.values()))) or "not recorded"


def default_reference_name(policy: str) -> str:
    return run_name_for(policy)


@dataclass(frozen=True)
class GuardPlan:
    """How many tasks a fast check runs per benchmark, and what that size can and cannot detect."""

    drop: float
    power: float
    tasks: dict[str, int]  # env_id -> the first N tasks to run
    notes: list[str]


def plan_guard(reference: EvalResult, drop: float = 0.15, power: float = 0.8) -> GuardPlan:
    """Size a fast check from a stored reference: per benchmark, the fewest tasks with which a fall of
    ``drop`` (absolute, e.g. 0.15 = 15 points) below the reference's accuracy fails the check with
    probability ``power``, capped at the tasks the reference has. Every benchmark gets a note saying what
    its size detects; a capped one says what it cannot."""
    if not 0 < drop <= 1 or not 0 < power < 1:
        raise ConfigError(f"guard drop must be in (0, 1] and power in (0, 1), got drop={drop}, power={power}")
    per_task = max(len(reference.record.seeds), 1) * max(reference.record.samples_per_task, 1)
    tasks: dict[str, int] = {}
    notes: list[str] = []
    available: dict[str, set[int]] = {}
    for o in reference.outcomes:
        available.setdefault(o.env_id, set()).add(o.index)
    for env_id, score in reference.scores().items():
        if not score.n:
            continue
        label = reference.record.benchmarks.get(env_id, {}).get("label", env_id)
        have = len(available.get(env_id, ()))
        p0 = score.accuracy
        need, _ = guard_size(p0, drop, power, max_n=have * per_task)
        n_tasks = min(max(math.ceil(need / per_task), 1), have)
        tasks[env_id] = n_tasks
        n = n_tasks * per_task
        reached = guard_power(p0, max(p0 - drop, 0.0), n)
        target = f"a drop of {100 * drop:.0f} points from {100 * p0:.1f}%"
        if p0 <= 0:
            notes.append(f"{label}: the reference scores 0%, so no drop can be detected ({n_tasks} tasks)")
        elif reached >= power:
            notes.append(
                f"{label}: {n_tasks} tasks ({n} episodes) detect {target} with {100 * reached:.0f}% power; "
                "smaller drops may pass"
            )
        else:
            notes.append(
                f"{label}: only {have} tasks stored, so {target} is detected with {100 * reached:.0f}% power, "
                f"not {100 * power:.0f}%"
            )
    return GuardPlan(drop=drop, power=power, tasks=tasks, notes=notes)
