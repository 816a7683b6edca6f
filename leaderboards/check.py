"""The statistical score-regression check behind the pytest plugin: new run vs stored reference.

A benchmark fails when the reference accuracy (on the same episodes) lies outside the new run's
95% Wilson interval, widened by an optional absolute tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from agentflow_env.error import ConfigError
from leaderboards.store import RESULTS_DIR, EvalResult, load_run, run_name_for

__all__ = ["BenchmarkCheck", "CheckReport", "compare_to_reference", "load_reference"]


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
        return "\n".join(lines)


def load_reference(protocol: str, name: str, results_dir: Path = RESULTS_DIR) -> EvalResult:
    path = Path(results_dir) / protocol / name
    if not (path / "run.json").exists():
        raise ConfigError(
            f"no stored reference {name!r} for {protocol} under {results_dir}; record one with "
            f"`pytest --leaderboard-record` or `agentflow-env eval --protocol {protocol} --name {name}`"
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
