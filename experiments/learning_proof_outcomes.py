"""The learning proof's per-task outcomes on disk, and every statistic recomputed from them alone.

``OUT/NAME/outcomes/<arm>-seed<k>.json`` holds one arm's greedy test episodes for one seed: per task its id,
success, turns, tool calls, answer, and what each tool call asked and got. ``summarise_outcomes`` reads that
folder and nothing else and returns the summary's ``statistics`` (and ``behaviour`` where the family has
multi-turn behaviour statistics); ``python experiments/learning_proof.py --recompute`` does so and checks the
result equals what the summary ``OUT/NAME.json`` reports.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from experiments.learning_proof_families import Family
from experiments.learning_proof_report import ARMS, statistics

__all__ = ["load_outcomes", "recompute", "summarise_outcomes", "write_outcomes"]

_FIELDS = ("task_id", "success", "turns", "tool_calls", "answer", "tool_commands", "tool_results", "links")


def write_outcomes(evals: dict[str, dict[int, Any]], seeds: list[int], folder: Path) -> list[str]:
    """One small JSON per arm and seed (only arms every seed has); returns the file names written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for arm in ARMS:
        if not all(s in evals.get(arm, {}) for s in seeds):
            continue
        for s in seeds:
            ev = evals[arm][s]
            doc = {
                "arm": arm,
                "seed": s,
                "split": ev.get("split", "test"),
                "env_id": ev.get("env_id"),
                "env_kwargs": ev.get("env_kwargs"),
                "model": ev.get("model"),
                "tasks": [{k: r[k] for k in _FIELDS if k in r} for r in ev["tasks"]],
            }
            path = folder / f"{arm}-seed{s}.json"
            path.write_text(json.dumps(doc, separators=(",", ":")) + "\n", encoding="utf-8")
            written.append(path.name)
    return written


def load_outcomes(folder: Path) -> tuple[dict[str, dict[int, Any]], list[int]]:
    """``(evals, seeds)`` from an outcomes folder; every arm must cover the same seeds and the same tasks."""
    evals: dict[str, dict[int, Any]] = {}
    for path in sorted(folder.glob("*-seed*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        if doc.get("arm") not in ARMS:
            raise ValueError(f"{path}: unknown arm {doc.get('arm')!r}; arms: {', '.join(ARMS)}")
        evals.setdefault(doc["arm"], {})[int(doc["seed"])] = doc
    if not evals:
        raise FileNotFoundError(f"no outcome files (<arm>-seed<k>.json) in {folder}")
    seeds = sorted(next(iter(evals.values())))
    ids = None
    for arm, by_seed in evals.items():
        if sorted(by_seed) != seeds:
            raise ValueError(f"{folder}: arm {arm} has seeds {sorted(by_seed)}, others {seeds}")
        for s, doc in by_seed.items():
            mine = [r["task_id"] for r in doc["tasks"]]
            if ids is None:
                ids = mine
            elif mine != ids:
                raise ValueError(f"{folder}: {arm}-seed{s} covers other tasks (or another order) than the rest")
    return evals, seeds


def summarise_outcomes(folder: Path, family: Family) -> dict[str, Any]:
    """Every statistic of the summary, from the outcome files alone."""
    evals, seeds = load_outcomes(folder)
    out: dict[str, Any] = {"statistics": statistics(evals, seeds)}
    if family.behaviour is not None:
        out["behaviour"] = {
            arm: family.behaviour([r for s in seeds for r in evals[arm][s]["tasks"]]) for arm in ARMS if arm in evals
        }
    return out


def _differences(a: Any, b: Any, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        diffs = [f"{path}/{k}: only in one" for k in set(a) ^ set(b)]
        for k in sorted(set(a) & set(b)):
            diffs += _differences(a[k], b[k], f"{path}/{k}")
        return diffs
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items against {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _differences(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def recompute(out_dir: Path, name: str, family: Family) -> int:
    """Recompute from ``out_dir/name/outcomes`` and compare with ``out_dir/name.json``; 0 when every number matches."""
    summary_path = out_dir / f"{name}.json"
    folder = out_dir / name / "outcomes"
    if not summary_path.is_file():
        sys.stderr.write(f"no summary {summary_path}\n")
        return 2
    if not folder.is_dir():
        sys.stderr.write(f"no outcomes folder {folder}: this result predates committed outcomes\n")
        return 2
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    fresh = json.loads(json.dumps(summarise_outcomes(folder, family)))  # through JSON, as the summary was
    diffs = []
    for key, value in fresh.items():
        diffs += _differences(summary.get(key), value, key)
    report = {
        "summary": str(summary_path),
        "outcomes": str(folder),
        "files": len(list(folder.glob("*-seed*.json"))),
        "recomputed": sorted(fresh),
        "matches": not diffs,
        "differences": diffs[:20],
        "verdicts": fresh["statistics"]["verdicts"],
    }
    sys.stdout.write(json.dumps(report, indent=1) + "\n")
    return 0 if not diffs else 1
