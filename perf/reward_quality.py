"""Both error rates of every registered env's reward, as JSON: hedges that pay, and correct answers scored 0.

Answers are generated from each task's gold by ``tests/reward_cases.py`` (hedges in many templates that a
careful human grader marks wrong; committed correct answers, written naturally, that the grader marks
right) and scored by the env's own scorer. Paper ids need AgentFlow's test sets (``--data-dir`` or
``$AGENTFLOW_TESTSETS``) and are skipped without them.

Run:  python perf/reward_quality.py [--tasks-per-id 40] [--ids agentflow/Gen-Math-v2 ...] [--out FILE]
Targets (issue 25): hedges that pay <= 0.1% and correct answers scored 0 <= 1%, for every id.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import gymnasium as gym  # noqa: E402

import agentflow_env  # noqa: E402,F401  (registers the ids)
from agentflow_env.registration import registered_ids  # noqa: E402
from tests.reward_cases import golds_of, kind_of, spread, task_cases  # noqa: E402

DEFAULT_TESTSETS = Path(
    os.environ.get("AGENTFLOW_TESTSETS", ROOT.parent.parent / "shared" / "data" / "agentflow-testsets")
)
HEDGE_TARGET, RECALL_TARGET = 0.001, 0.01


def build(env_id: str, data_dir: Path | None, cache: dict) -> object | None:
    """The env's unwrapped base (one build per benchmark: the versions of one name build the same env)."""
    from benchmarks.paper.catalog import BENCHMARKS

    spec = gym.spec(env_id)
    key = (str(spec.entry_point), json.dumps(spec.kwargs, sort_keys=True, default=str))
    if key not in cache:
        kwargs = {}
        if spec.kwargs.get("benchmark") in BENCHMARKS:
            if data_dir is None or not data_dir.is_dir():
                cache[key] = None
                return None
            kwargs["data_dir"] = str(data_dir)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cache[key] = gym.make(env_id, **kwargs).unwrapped
    return cache[key]


def measure(env_id: str, base, tasks_per_id: int) -> dict:
    tasks = base.tasks
    indices = spread(len(tasks), tasks_per_id)
    kind = kind_of(base.scorer)
    pool = [g for i in spread(len(tasks), 60) for g in golds_of(tasks[i])]
    counts: Counter = Counter()
    failures: dict[str, list] = defaultdict(list)
    by_template: Counter = Counter()
    start = time.perf_counter()
    for index in indices:
        task = tasks[index]
        for case in task_cases(task, kind, pool):
            score = float(base.scorer(case.answer, task))
            counts[case.kind] += 1
            bad = score > 0 if case.kind == "hedge" else score < 1
            if bad:
                counts[f"{case.kind}_failed"] += 1
                by_template[f"{case.kind}:{case.template}"] += 1
                if len(failures[case.kind]) < 5:
                    failures[case.kind].append({"task": task.id, "gold": golds_of(task)[:1], "answer": case.answer})
    hedges, correct = counts["hedge"], counts["correct"]
    paid, zeroed = counts["hedge_failed"], counts["correct_failed"]
    return {
        "env_id": env_id,
        "scorer": type(base.scorer).__name__,
        "tasks": len(indices),
        "hedges": hedges,
        "hedges_paid": paid,
        "hedge_pay_rate": round(paid / hedges, 6) if hedges else None,
        "correct": correct,
        "correct_scored_0": zeroed,
        "correct_zero_rate": round(zeroed / correct, 6) if correct else None,
        "failing_templates": dict(by_template.most_common(10)),
        "examples": dict(failures),
        "seconds": round(time.perf_counter() - start, 2),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks-per-id", type=int, default=40)
    ap.add_argument("--ids", nargs="*", help="env ids (default: every registered agentflow id)")
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_TESTSETS)
    ap.add_argument("--out", type=Path, help="also write the JSON here")
    args = ap.parse_args(argv)
    ids = args.ids or registered_ids()
    cache: dict = {}
    rows, skipped = [], []
    for env_id in ids:
        base = build(env_id, args.data_dir, cache)
        if base is None:
            skipped.append(env_id)
            continue
        rows.append(measure(env_id, base, args.tasks_per_id))
    hedges = sum(r["hedges"] for r in rows)
    correct = sum(r["correct"] for r in rows)
    paid = sum(r["hedges_paid"] for r in rows)
    zeroed = sum(r["correct_scored_0"] for r in rows)
    result = {
        "benchmark": "reward_quality",
        "tasks_per_id": args.tasks_per_id,
        "targets": {"hedge_pay_rate_max": HEDGE_TARGET, "correct_zero_rate_max": RECALL_TARGET},
        "total": {
            "hedges": hedges,
            "hedges_paid": paid,
            "hedge_pay_rate": round(paid / hedges, 6) if hedges else None,
            "correct": correct,
            "correct_scored_0": zeroed,
            "correct_zero_rate": round(zeroed / correct, 6) if correct else None,
        },
        "all_ids_within_targets": all(
            (r["hedge_pay_rate"] or 0) <= HEDGE_TARGET and (r["correct_zero_rate"] or 0) <= RECALL_TARGET for r in rows
        ),
        "skipped_ids": skipped,
        "per_id": rows,
    }
    text = json.dumps(result, indent=2, ensure_ascii=False)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
