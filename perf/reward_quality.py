"""Both error rates of every registered env's reward on answer styles it was not tuned on, through ``env.step``.

Answers come from ``tests/answer_styles.py``: styles built from parts (prefixes, decorations, value renderings
by the gold's type, trailers, self-corrections, rival placements), each part family split in two halves.
The answer grammar was tuned on the ``tune`` half only; this script reports, for each half:

- **hedges paid**: a hedge (the gold and a distractor, no commitment) that earns reward, in each candidate
  order (gold first, gold second) separately;
- **correct scored 0**: a committed correct answer (self-corrections included) that earns less than 1.

Every answer is one episode: ``env.reset(options={"index": i})`` then one ``env.step`` with a final-answer
action in one of the documented formats (``Final Answer:`` text, JSON ``{"final_answer": ..}``, an OpenAI
``final_answer`` tool call), rotating over the three; nothing calls a scorer to get a verdict. The gap
between the halves is reported (held minus tune). Paper ids need AgentFlow's test sets (``--data-dir`` or
``$AGENTFLOW_TESTSETS``) and are skipped without them.

The styles include the sentence families of ``tests/answer_sentences.py`` (restatements, reasoning first,
bold sentences with units, rivals after a gold-first statement), split the same way; ``failing_parts``
counts failures by part family. Totals are reported for the ids of each grammar version (``-v3`` on; grammar 3
was not built for the sentence families) and the older ids together; the part families and the gap between the
halves for the newest grammar measured.

Timing: the scorer's own time per answer (the env's scorer, wrapper and reader included), as a median over
every answer of the ids whose scorer does not call math-verify, for each grammar from 2 (``-v2`` ids) to the
newest (``-vN`` ids read with grammar N) on the same answers, for the ids measured; a loaded machine slows all alike.

Run:  nice -n 5 python perf/reward_quality.py [--tasks-per-id 10] [--per-kind 16] [--ids ...] [--out FILE]
      (``--sample-as N``: every id on the tasks the ``-vN`` ids sample, to compare two grammars on the same tasks)
Targets (issue 38), on the held-out half of the newest ids: hedges paid <= 0.5% in either candidate order,
correct scored 0 <= 2%; scoring under 1 ms median per answer outside math-verify.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import warnings
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import gymnasium as gym  # noqa: E402

import agentflow_env  # noqa: E402,F401  (registers the ids)
from agentflow_env.registration import GRAMMAR_OF_VERSION, LATEST_VERSION, registered_ids  # noqa: E402
from agentflow_env.scoring.versioned import unwrap_scorer  # noqa: E402
from tests.answer_styles import FORMATS, HALVES, action, task_styles  # noqa: E402
from tests.reward_cases import golds_of, kind_of, spread  # noqa: E402

DEFAULT_TESTSETS = Path(
    os.environ.get("AGENTFLOW_TESTSETS", ROOT.parent / "shared" / "data" / "agentflow-testsets")  # beside the checkout
)
HEDGE_TARGET, ZERO_TARGET, MEDIAN_MS_TARGET = 0.005, 0.02, 1.0
# the id versions whose grammar is timed (the -v2 ids read with grammar 2, every later one with its own)
TIMED_VERSIONS = (2, *sorted(GRAMMAR_OF_VERSION))
assert all(GRAMMAR_OF_VERSION[v] == v for v in TIMED_VERSIONS[1:]), "a -vN id reads with grammar N"


def build(env_id: str, data_dir: Path | None) -> gym.Env | None:
    from benchmarks.paper.catalog import BENCHMARKS

    kwargs = {}
    if gym.spec(env_id).kwargs.get("benchmark") in BENCHMARKS:
        if data_dir is None or not data_dir.is_dir():
            return None
        kwargs["data_dir"] = str(data_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return gym.make(env_id, **kwargs)


def _sample(env_id: str, n_tasks: int, per_id: int, sample_as: int | None = None) -> list[int]:
    """This id's tasks, spread over the list and shifted by the version (the versions see other tasks); ``sample_as``:
    the tasks the ids of that version see (to compare two grammars on the same tasks)."""
    version = sample_as if sample_as is not None else gym.spec(env_id).version or 0
    return sorted({(i + version * 7) % n_tasks for i in spread(n_tasks, per_id)})


def _rate(bad: int, n: int) -> float | None:
    return round(bad / n, 6) if n else None


def measure(
    env_id: str, env: gym.Env, tasks_per_id: int, per_kind: int, show: int, sample_as: int | None = None
) -> dict:
    base = env.unwrapped
    tasks = base.tasks
    kind = kind_of(unwrap_scorer(base.scorer))
    pool = [g for i in spread(len(tasks), 60) for g in golds_of(tasks[i])]
    counts: dict[str, Counter] = {h: Counter() for h in HALVES}
    by_part: dict[str, Counter] = {h: Counter() for h in HALVES}
    examples: dict[str, list] = defaultdict(list)
    start, cpu0 = time.perf_counter(), time.process_time()
    n = 0
    for index in _sample(env_id, len(tasks), tasks_per_id, sample_as):
        task = tasks[index]
        for half in HALVES:
            for style in task_styles(task, kind, pool, half, per_kind):
                fmt = FORMATS[n % len(FORMATS)]
                n += 1
                env.reset(options={"index": index})
                _, reward, terminated, _, _ = env.step(action(style.answer, fmt))
                c = counts[half]
                key = style.kind if style.kind == "correct" else f"hedge_{style.order}"
                c[key] += 1
                c[f"{style.kind}_{fmt}"] += 1
                bad = (reward > 0) if style.kind == "hedge" else (reward < 1 or not terminated)
                if bad:
                    c[f"{key}_failed"] += 1
                    c[f"{style.kind}_{fmt}_failed"] += 1
                    by_part[half][f"{style.kind}:{style.parts.split('|')[0]}"] += 1
                    c[f"family_{style.parts.split(':')[0]}_failed"] += 1
                    if half == "tune" and len(examples[style.kind]) < show:
                        examples[style.kind].append({"gold": golds_of(task)[:1], "format": fmt, "answer": style.answer})
                c[f"family_{style.parts.split(':')[0]}"] += 1
    row: dict = {"env_id": env_id, "scorer": repr(base.scorer)[:80], "tasks": tasks_per_id}
    for half in HALVES:
        c = counts[half]
        row[half] = {
            "correct": c["correct"],
            "correct_scored_0": c["correct_failed"],
            "correct_zero_rate": _rate(c["correct_failed"], c["correct"]),
            "hedges_gold_first": c["hedge_gold-first"],
            "paid_gold_first": c["hedge_gold-first_failed"],
            "hedges_gold_second": c["hedge_gold-second"],
            "paid_gold_second": c["hedge_gold-second_failed"],
            "by_format": {
                f: {
                    "correct_zero_rate": _rate(c[f"correct_{f}_failed"], c[f"correct_{f}"]),
                    "hedge_pay_rate": _rate(c[f"hedge_{f}_failed"], c[f"hedge_{f}"]),
                }
                for f in FORMATS
            },
            "failing_parts": dict(by_part[half].most_common(8)),
            "families": {k: v for k, v in c.items() if k.startswith("family_")},
        }
    row["tune_failures"] = dict(examples)
    row["episodes"] = n
    row["wall_s"], row["cpu_s"] = round(time.perf_counter() - start, 2), round(time.process_time() - cpu0, 2)
    return row


def timing(envs: dict[str, gym.Env], per_kind: int) -> dict:
    """Median scorer time per answer (ms) for every grammar (``TIMED_VERSIONS``) on the same answers, outside
    math-verify."""
    from agentflow_env.scoring.math import MathScorer

    samples: dict[int, list[float]] = {version: [] for version in reversed(TIMED_VERSIONS)}
    for env_id, env in envs.items():
        if not env_id.endswith(tuple(f"-v{version}" for version in TIMED_VERSIONS)):
            continue
        base = env.unwrapped
        if isinstance(unwrap_scorer(base.scorer), MathScorer):
            continue
        grammar = int(env_id.rsplit("-v", 1)[1])
        tasks = base.tasks
        kind = kind_of(unwrap_scorer(base.scorer))
        pool = [g for i in spread(len(tasks), 60) for g in golds_of(tasks[i])]
        for index in spread(len(tasks), 4):
            for half in HALVES:
                for style in task_styles(tasks[index], kind, pool, half, per_kind, seed=1):
                    t0 = time.perf_counter()
                    base.scorer(style.answer, tasks[index])
                    samples[grammar].append((time.perf_counter() - t0) * 1000)
    out = {}
    for grammar, values in samples.items():
        if values:
            values.sort()
            out[f"grammar_{grammar}"] = {
                "answers": len(values),
                "median_ms": round(statistics.median(values), 4),
                "p90_ms": round(values[int(0.9 * (len(values) - 1))], 4),
            }
    return out


def _by_family(rows: list[dict], half: str, ids: set[str]) -> dict:
    """Answers and failures per part family (prefix, correction, rival, restate, reasoning, ...)."""
    t: Counter = Counter()
    for r in rows:
        if r["env_id"] in ids:
            for k, v in r[half]["families"].items():
                t[k] += v
    names = sorted({k.removesuffix("_failed") for k in t})
    return {
        n.removeprefix("family_"): {"answers": t[n], "failed": t[f"{n}_failed"], "rate": _rate(t[f"{n}_failed"], t[n])}
        for n in names
    }


def _total(rows: list[dict], half: str, ids: set[str] | None = None) -> dict:
    t: Counter = Counter()
    for r in rows:
        if ids is None or r["env_id"] in ids:
            for k, v in r[half].items():
                if isinstance(v, int):
                    t[k] += v
    return {
        "correct": t["correct"],
        "correct_scored_0": t["correct_scored_0"],
        "correct_zero_rate": _rate(t["correct_scored_0"], t["correct"]),
        "hedges_gold_first": t["hedges_gold_first"],
        "hedge_pay_rate_gold_first": _rate(t["paid_gold_first"], t["hedges_gold_first"]),
        "hedges_gold_second": t["hedges_gold_second"],
        "hedge_pay_rate_gold_second": _rate(t["paid_gold_second"], t["hedges_gold_second"]),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks-per-id", type=int, default=10)
    ap.add_argument("--per-kind", type=int, default=16, help="correct answers and hedges per task and half")
    ap.add_argument("--ids", nargs="*", help="env ids (default: every registered agentflow id)")
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_TESTSETS)
    ap.add_argument("--show", type=int, default=3, help="failing tune-half answers shown per id (held-out never)")
    ap.add_argument("--out", type=Path, help="also write the JSON here")
    ap.add_argument("--sample-as", type=int, help="measure every id on the tasks the -vN ids sample (same tasks)")
    args = ap.parse_args(argv)
    ids = args.ids or registered_ids()
    start, cpu0 = time.perf_counter(), time.process_time()
    rows, skipped, envs = [], [], {}
    for env_id in ids:
        env = build(env_id, args.data_dir)
        if env is None:
            skipped.append(env_id)
            continue
        envs[env_id] = env
        rows.append(measure(env_id, env, args.tasks_per_id, args.per_kind, args.show, args.sample_as))
    versions = range(LATEST_VERSION, 2, -1)  # newest first
    groups = {f"v{n}": {r["env_id"] for r in rows if r["env_id"].endswith(f"-v{n}")} for n in versions}
    groups["v0_v2"] = {r["env_id"] for r in rows} - set().union(*groups.values())
    totals = {
        f"{group}_{half}": _total(rows, half, members)
        for group, members in groups.items()
        if members or group in ("v4", "v3", "v0_v2")
        for half in HALVES
    }
    newest = next(f"v{n}" for n in versions if groups[f"v{n}"] or n == 4)
    families = {f"{newest}_{half}": _by_family(rows, half, groups[newest]) for half in HALVES}
    held, tune = totals[f"{newest}_held"], totals[f"{newest}_tune"]
    gap = {
        key: round((held[key] or 0) - (tune[key] or 0), 6)
        for key in ("correct_zero_rate", "hedge_pay_rate_gold_first", "hedge_pay_rate_gold_second")
    }
    speed = timing(envs, per_kind=6)
    for env in envs.values():
        env.close()
    result = {
        "benchmark": "reward_quality",
        "suite": "tests/answer_styles.py (parts split tune/held; every answer one episode through env.step)",
        "tasks_per_id": args.tasks_per_id,
        "per_kind": args.per_kind,
        "sample_as": args.sample_as,
        "targets": {
            "held_hedge_pay_rate_max_each_order": HEDGE_TARGET,
            "held_correct_zero_rate_max": ZERO_TARGET,
            "scoring_median_ms_max": MEDIAN_MS_TARGET,
        },
        "totals": totals,
        f"{newest}_by_part_family": families,
        f"gap_held_minus_tune_{newest}": gap,
        f"{newest}_held_within_targets": (held["correct_zero_rate"] or 0) <= ZERO_TARGET
        and (held["hedge_pay_rate_gold_first"] or 0) <= HEDGE_TARGET
        and (held["hedge_pay_rate_gold_second"] or 0) <= HEDGE_TARGET,
        "scoring_time_outside_math_verify": speed,
        "skipped_ids": skipped,
        "machine": {
            "load_avg": os.getloadavg(),
            "wall_s": round(time.perf_counter() - start, 1),
            "cpu_s": round(time.process_time() - cpu0, 1),
        },
        "per_id": rows,
    }
    text = json.dumps(result, indent=2, ensure_ascii=False)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
