"""The learning proof's per-task outcomes on disk, and every statistic recomputed from them alone.

``OUT/NAME/outcomes/outcomes.jsonl.xz`` holds one JSON document per line, one per arm and seed (xz finds what
the documents repeat, such as the task ids: 12 documents of 600 tasks take about 50 KB; byte-stable), and a
plain ``<arm>-seed<k>.json`` beside it is read too. A document is one arm's greedy test episodes for one seed:
per task its id, success, turns, tool calls, answer, and what each tool call asked and got.
``summarise_outcomes`` reads that folder and nothing else and returns the summary's ``statistics`` (and
``behaviour`` where the family has multi-turn behaviour statistics); ``python experiments/learning_proof.py
--recompute`` does so and checks the result equals what the summary ``OUT/NAME.json`` reports.
"""

from __future__ import annotations

import json
import lzma
import sys
from pathlib import Path
from typing import Any

from experiments.learning_proof_families import Family
from experiments.learning_proof_report import ARMS, statistics

__all__ = [
    "check",
    "family_of",
    "load_outcomes",
    "outcome_files",
    "read_documents",
    "recompute",
    "recompute_all",
    "recompute_cli",
    "summarise_outcomes",
    "write_documents",
    "write_outcomes",
]

_FIELDS = ("task_id", "success", "turns", "tool_calls", "answer", "tool_commands", "tool_results", "links")


PACKED = "outcomes.jsonl.xz"


def outcome_files(folder: Path) -> list[Path]:
    """The outcome files of ``folder``: the packed ``outcomes.jsonl.xz`` and any plain ``<arm>-seed<k>.json``."""
    return sorted([*folder.glob("*.jsonl.xz"), *folder.glob("*-seed*.json")])


def read_documents(folder: Path) -> list[dict[str, Any]]:
    """Every (arm, seed) document of ``folder``, in file then line order."""
    docs = []
    for path in outcome_files(folder):
        if path.name.endswith(".xz"):
            docs += [json.loads(line) for line in lzma.decompress(path.read_bytes()).decode().splitlines() if line]
        else:
            docs.append(json.loads(path.read_text(encoding="utf-8")))
    return docs


def write_documents(folder: Path, docs: list[dict[str, Any]]) -> Path:
    """``docs`` packed into ``folder/outcomes.jsonl.xz`` (compact JSON, one per line; same docs, same bytes)."""
    folder.mkdir(parents=True, exist_ok=True)
    data = "".join(json.dumps(d, separators=(",", ":")) + "\n" for d in docs).encode()
    path = folder / PACKED
    path.write_bytes(lzma.compress(data, preset=9 | lzma.PRESET_EXTREME))
    return path


def write_outcomes(evals: dict[str, dict[int, Any]], seeds: list[int], folder: Path) -> list[str]:
    """One JSON document per arm and seed (only arms every seed has), packed in ``folder/outcomes.jsonl.xz``;
    returns the (arm, seed) names written."""
    docs, written = [], []
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
            docs.append(doc)
            written.append(f"{arm}-seed{s}")
    write_documents(folder, docs)
    return written


def load_outcomes(folder: Path) -> tuple[dict[str, dict[int, Any]], list[int]]:
    """``(evals, seeds)`` from an outcomes folder; every arm must cover the same seeds and the same tasks."""
    evals: dict[str, dict[int, Any]] = {}
    for doc in read_documents(folder):
        if doc.get("arm") not in ARMS:
            raise ValueError(f"{folder}: unknown arm {doc.get('arm')!r}; arms: {', '.join(ARMS)}")
        evals.setdefault(doc["arm"], {})[int(doc["seed"])] = doc
    if not evals:
        raise FileNotFoundError(f"no outcomes ({PACKED} or <arm>-seed<k>.json) in {folder}")
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


def check(out_dir: Path, name: str, family: Family | None) -> dict[str, Any]:
    """Recompute ``out_dir/name/outcomes`` and compare with ``out_dir/name.json``: the report (``matches``: bool,
    or None with ``reason`` when there is nothing to recompute: no summary, or no committed outcomes)."""
    summary_path = out_dir / f"{name}.json"
    folder = out_dir / name / "outcomes"
    report: dict[str, Any] = {
        "name": name,
        "family": family.key if family else None,
        "summary": str(summary_path),
        "outcomes": str(folder),
    }
    if not summary_path.is_file():
        return {**report, "matches": None, "reason": f"no summary {summary_path}"}
    if not folder.is_dir():
        reason = f"no outcomes folder {folder}: this result predates committed outcomes and cannot be recomputed"
        return {**report, "matches": None, "reason": reason}
    if family is None:
        raise ValueError(f"{name}: no family in its summary and no family's stem starts its name")
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    fresh = json.loads(json.dumps(summarise_outcomes(folder, family)))  # through JSON, as the summary was
    diffs = []
    for key, value in fresh.items():
        diffs += _differences(summary.get(key), value, key)
    return {
        **report,
        "documents": len(read_documents(folder)),
        "recomputed": sorted(fresh),
        "matches": not diffs,
        "differences": diffs[:20],
        "verdicts": fresh["statistics"]["verdicts"],
    }


def recompute(out_dir: Path, name: str, family: Family) -> int:
    """One result: 0 when every number matches, 1 when one differs, 2 when there is nothing to recompute."""
    report = check(out_dir, name, family)
    if report["matches"] is None:
        sys.stderr.write(report["reason"] + "\n")
        return 2
    sys.stdout.write(json.dumps(report, indent=1) + "\n")
    return 0 if report["matches"] else 1


def family_of(out_dir: Path, name: str, families: dict[str, Family]) -> Family | None:
    """The family a summary names in its setup, else the one whose result stem starts its name (the longest)."""
    path = out_dir / f"{name}.json"
    if path.is_file():
        try:
            key = json.loads(path.read_text(encoding="utf-8")).get("setup", {}).get("family")
        except (ValueError, AttributeError):
            key = None
        if key in families:
            return families[key]
    stems = sorted((f for f in families.values() if name.startswith(f.stem)), key=lambda f: -len(f.stem))
    return stems[0] if stems else None


def recompute_all(out_dir: Path, families: dict[str, Family]) -> int:
    """Every result in ``out_dir``: each with committed outcomes (``*/outcomes/``) is recomputed and compared;
    each reported learning proof without them (``learning_proof*.json``) is listed as not recomputable.

    Prints one line per result (stderr) and the reports as JSON (stdout). 0 when every result with outcomes
    matches; 1 when one differs (or its outcomes cannot be read); 2 when no result has outcomes."""
    names = {p.parent.name for p in out_dir.glob("*/outcomes") if p.is_dir()}
    names |= {p.stem for p in out_dir.glob("learning_proof*.json")}
    reports = []
    for name in sorted(names):
        try:
            report = check(out_dir, name, family_of(out_dir, name, families))
        except (ValueError, KeyError, OSError) as exc:  # unreadable outcomes or summary: a failure, said plainly
            report = {"name": name, "matches": False, "differences": [], "error": f"{type(exc).__name__}: {exc}"}
        reports.append(report)
        if report["matches"] is None:
            line = f"{name}: NOT RECOMPUTABLE ({report['reason']})"
        elif report["matches"]:
            done = ", ".join(report["recomputed"])
            line = f"{name}: matches ({report['documents']} outcome documents; recomputed {done})"
        else:
            why = (
                report.get("error") or f"{len(report['differences'])}+ differences, first: {report['differences'][:1]}"
            )
            line = f"{name}: MISMATCH ({why})"
        sys.stderr.write(line + "\n")
    checked = [r for r in reports if r["matches"] is not None]
    mismatched = [r["name"] for r in checked if not r["matches"]]
    out = {
        "results": reports,
        "recomputed": [r["name"] for r in checked],
        "mismatched": mismatched,
        "without_outcomes": [r["name"] for r in reports if r["matches"] is None],
        "all_match": bool(checked) and not mismatched,
    }
    sys.stdout.write(json.dumps(out, indent=1) + "\n")
    if not checked:
        sys.stderr.write(f"no result in {out_dir} has committed outcomes (NAME/outcomes/)\n")
        return 2
    sys.stderr.write(
        f"{len(checked) - len(mismatched)} of {len(checked)} results with committed outcomes match; "
        f"{len(out['without_outcomes'])} reported results have no committed outcomes: "
        f"{', '.join(out['without_outcomes']) or 'none'}\n"
    )
    return 1 if mismatched else 0


def recompute_cli(out_dir: Path, families: dict[str, Family], family: str | None, name: str, quick: bool) -> int:
    """``--recompute``: every result in ``out_dir`` when neither ``family`` nor ``name`` is given; else one (its
    family from ``family``, or from its summary; its name from ``name``, or the family's stem)."""
    if not family and not name:
        return recompute_all(out_dir, families)
    fam = families[family] if family else family_of(out_dir, name, families)
    if fam is None:
        sys.stderr.write(f"{name}: no family in its summary and no family's stem starts its name; pass --family\n")
        return 2
    return recompute(out_dir, name or f"{fam.stem}{'_quick' if quick else ''}", fam)
