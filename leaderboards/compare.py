"""``agentflow-env leaderboard compare RUN_A RUN_B``: B minus A on the tasks both runs played, per benchmark and
overall, with the paired test of :mod:`leaderboards.paired` and warnings when the runs are not like for like.

Episodes pair by their unit (benchmark, task index, trial seed, sample); a task's trials are those both runs
played. Overall pools every shared task once (the board's overall averages the benchmarks instead). The
warnings: another protocol hash, judge fingerprint or retrieval fingerprint (where the records carry one), or a
policy-only control run on one side (then the difference is the share of the score the non-planner LLMs make).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentflow_env.error import ConfigError
from leaderboards.paired import PairedTest, paired_test
from leaderboards.store import RUN_FILE, EvalResult, iter_runs, load_run

__all__ = ["Comparison", "compare_runs", "find_run", "format_comparison", "warnings_between"]


@dataclass
class Comparison:
    """The paired tests of B minus A: per benchmark (env id), and overall over every shared task."""

    run_a: str
    run_b: str
    benchmarks: dict[str, PairedTest]
    overall: PairedTest | None
    warnings: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    unshared: dict[str, int] = field(default_factory=dict)  # episodes only one of the runs has, per run

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_a": self.run_a,
            "run_b": self.run_b,
            "benchmarks": {e: t.to_dict() for e, t in self.benchmarks.items()},
            "overall": self.overall.to_dict() if self.overall else None,
            "warnings": list(self.warnings),
            "unshared_episodes": dict(self.unshared),
        }


def find_run(ref: str | Path, results: Sequence[Path] = (), protocol: str | None = None) -> EvalResult:
    """A run by folder (holding run.json) or by name under ``results`` (``protocol`` picks among namesakes)."""
    path = Path(ref)
    if (path / RUN_FILE).is_file():
        return load_run(path)
    folders = dict.fromkeys(Path(f).resolve() for f in results if Path(f).is_dir())  # each folder once
    found = [
        r
        for folder in folders
        for r in iter_runs(Path(folder))
        if r.record.name == str(ref) and (protocol is None or r.record.protocol == protocol)
    ]
    if not found:
        where = ", ".join(str(f) for f in results) or "nowhere"
        raise ConfigError(f"no run {ref!r}: not a folder with {RUN_FILE}, and no run of that name in {where}")
    if len(found) > 1:
        places = ", ".join(str(r.path) for r in found)
        raise ConfigError(f"run name {ref!r} is ambiguous ({places}); pass --protocol P or the run's folder")
    return found[0]


def _raw(result: EvalResult) -> dict[str, Any]:
    """The run.json as stored (fields newer than this code's RunRecord included)."""
    if result.path is None or not (Path(result.path) / RUN_FILE).is_file():
        return result.record.to_dict()
    data = json.loads((Path(result.path) / RUN_FILE).read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {}


def _retrieval(raw: dict[str, Any]) -> Any:
    """The retrieval fingerprint a record carries: ``run.json["retrieval"]["fingerprint_id"]`` (the search tools'
    backends, leaderboards/retrieval.py), else any other non-empty field named retrieval*, top level or in
    paper_settings."""
    record = raw.get("retrieval")
    if isinstance(record, dict) and record.get("fingerprint_id"):
        return record["fingerprint_id"]
    found = {k: v for k, v in raw.items() if k.startswith("retrieval") and v is not None and k != "retrieval"}
    settings = raw.get("paper_settings") or {}
    found.update({k: v for k, v in settings.items() if isinstance(k, str) and k.startswith("retrieval") and v})
    return found or None


def _judges(raw: dict[str, Any]) -> dict[str, Any]:
    """Per judged benchmark the judge's fingerprint, or for records older than it the judge engine spec."""
    judges = raw.get("judges") or {}
    scorers = raw.get("scorers") or {}
    out = {}
    for env_id, scorer in scorers.items():
        if str(scorer).startswith("judge"):
            out[env_id] = judges.get(env_id, {"engine": raw.get("judge_engine"), "scorer": scorer})
    return out


def warnings_between(a: EvalResult, b: EvalResult) -> list[str]:
    """Why A and B may not be like for like: protocol hash, judges, retrieval, a control run on one side."""
    ra, rb = _raw(a), _raw(b)
    out = []
    if ra.get("protocol_hash") != rb.get("protocol_hash"):
        out.append(
            f"protocol hashes differ (A {ra.get('protocol')} [{ra.get('protocol_hash')}], "
            f"B {rb.get('protocol')} [{rb.get('protocol_hash')}]): the tasks may be scored or run differently"
        )
    ja, jb = _judges(ra), _judges(rb)
    differing = sorted(e for e in set(ja) | set(jb) if ja.get(e) != jb.get(e))
    if differing:
        out.append(f"judges differ on {', '.join(differing)}: A {_short(ja)}; B {_short(jb)}")
    ta, tb = _retrieval(ra), _retrieval(rb)
    if ta != tb:
        out.append(f"retrieval fingerprints differ: A {ta}; B {tb}")
    for side, raw in (("A", ra), ("B", rb)):
        control = raw.get("control")
        if control:
            out.append(
                f"{side} is a policy-only control (every non-planner LLM on {control.get('engine')}): "
                "the difference measures what the modules' and tools' LLMs add, not the planner"
            )
    if bool(ra.get("fast")) != bool(rb.get("fast")):
        out.append("one run is --fast: only the tasks both played are compared")
    return out


def _short(judges: dict[str, Any]) -> str:
    distinct = {json.dumps(v, sort_keys=True) for v in judges.values()}
    return "; ".join(sorted(distinct)) or "none"


def _episodes(result: EvalResult) -> dict[tuple[str, int], dict[tuple[int, int], float]]:
    """(env id, task index) -> {(seed, sample): score}."""
    out: dict[tuple[str, int], dict[tuple[int, int], float]] = {}
    for o in result.outcomes:
        out.setdefault((o.env_id, o.index), {})[(o.seed, o.sample)] = float(o.score)
    return out


def compare_runs(a: EvalResult, b: EvalResult, resamples: int = 10_000, seed: int = 0) -> Comparison:
    """B minus A on every task both runs played (trials paired by seed and sample)."""
    if a.record.kind != "measured" or b.record.kind != "measured":
        raise ConfigError("compare needs two measured runs (a reported row has no per-task outcomes)")
    ea, eb = _episodes(a), _episodes(b)
    per_env: dict[str, tuple[list[list[float]], list[list[float]]]] = {}
    shared_a = shared_b = 0
    for task in sorted(set(ea) & set(eb)):
        trials = sorted(set(ea[task]) & set(eb[task]))
        if not trials:
            continue
        xs, ys = per_env.setdefault(task[0], ([], []))
        xs.append([ea[task][t] for t in trials])
        ys.append([eb[task][t] for t in trials])
        shared_a += len(trials)
        shared_b += len(trials)
    if not per_env:
        raise ConfigError(
            f"runs {a.record.name} and {b.record.name} share no task (different protocols or benchmarks?)"
        )
    order = [e for e in a.record.benchmarks if e in per_env] + sorted(set(per_env) - set(a.record.benchmarks))
    tests = {env: paired_test(*per_env[env], resamples=resamples, seed=seed) for env in order}
    all_a = [t for env in order for t in per_env[env][0]]
    all_b = [t for env in order for t in per_env[env][1]]
    overall = paired_test(all_a, all_b, resamples=resamples, seed=seed) if len(order) > 1 else None
    labels = {e: str((a.record.benchmarks.get(e) or {}).get("label", e)) for e in order}
    unshared = {"A": len(a.outcomes) - shared_a, "B": len(b.outcomes) - shared_b}
    return Comparison(
        run_a=a.record.name,
        run_b=b.record.name,
        benchmarks=tests,
        overall=overall,
        warnings=warnings_between(a, b),
        labels=labels,
        unshared=unshared,
    )


def _pct(x: float) -> str:
    return f"{100 * x:+.1f}"


def format_comparison(c: Comparison) -> str:
    """A Markdown table of the comparison, then its warnings."""
    lines = [
        f"B ({c.run_b}) minus A ({c.run_a}), in accuracy points; MDE: the smallest true difference these tasks "
        "detect with 80% power at alpha 0.05",
        "",
        "| benchmark | tasks | A % | B % | B - A | 95% CI | p | MDE | test |",
        "|---|---:|---:|---:|---:|---|---:|---:|---|",
    ]
    rows = [(c.labels.get(e, e), t) for e, t in c.benchmarks.items()]
    if c.overall is not None:
        rows.append(("overall (tasks pooled)", c.overall))
    for label, t in rows:
        test = t.method + (f" ({t.a_only} A-only, {t.b_only} B-only)" if t.a_only is not None else "")
        if t.trials != t.tasks:
            test += f", {t.trials} paired episodes"
        mde = f"{100 * t.mde:.1f}" if t.mde is not None else "n/a"
        lines.append(
            f"| {label} | {t.tasks} | {100 * t.mean_a:.1f} | {100 * t.mean_b:.1f} | {_pct(t.difference)} | "
            f"[{_pct(t.interval[0])}, {_pct(t.interval[1])}] | {t.p_value:.4g} | {mde} | {test} |"
        )
    if any(c.unshared.values()):
        lines.append("")
        lines.append(f"not compared (no partner episode): A {c.unshared['A']}, B {c.unshared['B']} episodes")
    for warning in c.warnings:
        lines.append(f"warning: {warning}")
    return "\n".join(lines)
