"""The learning proof's arms, its statistics over seeds and its plot (see ``experiments/learning_proof.py``)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from experiments.stats_util import (
    detectable_gain,
    holm,
    majority_vote,
    mcnemar_exact,
    paired_bootstrap_diff,
    t_interval,
    wilson_interval,
)

RETRY_DEMOS = "agents.policies.baselines:ScriptedGameOf24RetryPlanner"

METHODS: dict[str, list[str]] = {
    "rft": ["--algorithm", "rft"],
    "flow_grpo_trajectory": ["--algorithm", "flow_grpo", "--loss-aggregation", "trajectory"],
    "flow_grpo_turn": ["--algorithm", "flow_grpo", "--loss-aggregation", "turn"],
}
LABELS = {
    "sft_only": "SFT only",
    "rft": "RFT (equal rollouts)",
    "flow_grpo_trajectory": "Flow-GRPO, trajectory agg.",
    "flow_grpo_turn": "Flow-GRPO, turn agg.",
}
ARMS = ("sft_only", *METHODS)


# ---------------------------------------------------------------------------------------------- statistics


def _turn_stats(rows: list[dict[str, Any]]) -> dict[str, Any]:
    solved = [r for r in rows if r["success"]]
    hist: dict[str, int] = {}
    for r in rows:
        hist[str(r["turns"])] = hist.get(str(r["turns"]), 0) + 1
    return {
        "mean_turns": sum(r["turns"] for r in rows) / max(len(rows), 1),
        "mean_tool_calls": sum(r["tool_calls"] for r in rows) / max(len(rows), 1),
        "share_multi_turn": sum(r["turns"] >= 2 for r in rows) / max(len(rows), 1),
        "share_successes_multi_turn": sum(r["turns"] >= 2 for r in solved) / len(solved) if solved else None,
        # two checks or more: the planner checked again instead of answering after the first reply
        "share_two_checks": sum(r["tool_calls"] >= 2 for r in rows) / max(len(rows), 1),
        "share_successes_after_two_checks": (
            sum(r["tool_calls"] >= 2 for r in solved) / len(solved) if solved else None
        ),
        "turns_histogram": hist,
        # a policy can collapse onto one expression shape that fits a fixed share of puzzles: list them
        "top_answer_shapes": _shapes(rows),
        "top_solved_answer_shapes": _shapes(solved),
    }


def _shapes(rows: list[dict[str, Any]], top: int = 3) -> list[tuple[str, int]]:
    """The most common final-answer shapes (numbers replaced by n), e.g. ('(n-n)+(n+n)', 87)."""
    counts: dict[str, int] = {}
    for r in rows:
        shape = re.sub(r"\d+", "n", str(r.get("answer") or "")).replace(" ", "")
        counts[shape] = counts.get(shape, 0) + 1
    return sorted(counts.items(), key=lambda kv: -kv[1])[:top]


def statistics(evals: dict[str, dict[int, dict[str, Any]]], seeds: list[int]) -> dict[str, Any]:
    """Per-arm success with intervals, per-pair McNemar tests and the plain-language verdicts."""
    arms = [a for a in ARMS if all(s in evals.get(a, {}) for s in seeds)]
    outcomes: dict[str, dict[int, list[bool]]] = {
        a: {s: [r["success"] for r in evals[a][s]["tasks"]] for s in seeds} for a in arms
    }
    per_arm: dict[str, Any] = {}
    for a in arms:
        rates = [sum(outcomes[a][s]) / len(outcomes[a][s]) for s in seeds]
        rows = [r for s in seeds for r in evals[a][s]["tasks"]]
        n = len(outcomes[a][seeds[0]])
        per_arm[a] = {
            "label": LABELS[a],
            "test_tasks": n,
            "success_per_seed": dict(zip(map(str, seeds), rates)),
            "wilson95_per_seed": {str(s): wilson_interval(sum(outcomes[a][s]), n) for s in seeds},
            "mean_over_seeds": t_interval(rates),
            "majority_vote_success": sum(majority_vote([outcomes[a][s] for s in seeds])) / n,
            **_turn_stats(rows),
        }
    pairs = [(a, b) for i, a in enumerate(arms) for b in arms[i + 1 :]]
    tests: list[dict[str, Any]] = []
    for a, b in pairs:
        va = majority_vote([outcomes[a][s] for s in seeds])
        vb = majority_vote([outcomes[b][s] for s in seeds])
        tests.append(
            {
                "a": a,
                "b": b,
                "majority_vote": mcnemar_exact(va, vb).to_dict(),
                "bootstrap_diff_b_minus_a": paired_bootstrap_diff(vb, va, resamples=5000, seed=0),
                "per_seed": {str(s): mcnemar_exact(outcomes[a][s], outcomes[b][s]).to_dict() for s in seeds},
                # seed-paired: every (seed, task) pairs arm a's episode with arm b's of the same seed and task
                # (tasks recur across seeds, so this treats seeds as independent replications)
                "seed_paired": mcnemar_exact(
                    [x for s in seeds for x in outcomes[a][s]], [x for s in seeds for x in outcomes[b][s]]
                ).to_dict(),
                # the per-seed success difference b - a: mean and t-95% interval over seeds
                "seed_diff_b_minus_a": t_interval(
                    [(sum(outcomes[b][s]) - sum(outcomes[a][s])) / max(len(outcomes[a][s]), 1) for s in seeds]
                ),
            }
        )
    for t, adj in zip(tests, holm([t["majority_vote"]["p_value"] for t in tests])):
        t["majority_vote"]["p_holm"] = adj
        t["significant_5pct_holm"] = adj < 0.05
    for t, adj in zip(tests, holm([t["seed_paired"]["p_value"] for t in tests])):
        t["seed_paired"]["p_holm"] = adj
    verdicts = []
    for t in tests:  # read as "the later arm (a method) against the earlier one (a baseline)"
        m, d = t["majority_vote"], t["bootstrap_diff_b_minus_a"]
        word = "SIGNIFICANT" if t["significant_5pct_holm"] else "not significant"
        verdicts.append(
            f"{LABELS[t['b']]} vs {LABELS[t['a']]}: {100 * d['diff']:+.1f} points "
            f"(95% bootstrap {100 * d['lo']:+.1f} to {100 * d['hi']:+.1f}); tasks only the first solves "
            f"{m['b_only']}, only the second {m['a_only']}; McNemar exact p={m['p_value']:.3g}, "
            f"Holm p={m['p_holm']:.3g}: {word} at 5%; seed-paired McNemar over {t['seed_paired']['n']} "
            f"(seed, task) pairs Holm p={t['seed_paired']['p_holm']:.3g}"
        )
    power = None
    if "sft_only" in per_arm:  # what a null result rules out: the gain over SFT the primary test would find
        n, p0 = per_arm["sft_only"]["test_tasks"], per_arm["sft_only"]["majority_vote_success"]
        power = {
            "baseline": "sft_only",
            "base_rate": p0,
            "test_tasks": n,
            "gain_at_5pct": detectable_gain(p0, n),
            "gain_at_5pct_over_pairs": detectable_gain(p0, n, alpha=0.05 / max(len(tests), 1)),
            "method": "two-proportion normal approximation, 80% power (conservative for paired tasks)",
        }
        verdicts.append(
            f"Power: with {n} test tasks and SFT at {100 * p0:.1f}%, a gain over SFT smaller than about "
            f"{100 * power['gain_at_5pct']:.1f} points (at 5%) or {100 * power['gain_at_5pct_over_pairs']:.1f} "
            f"points (at 5%/{len(tests)}, Holm's strictest step) would be missed with probability over 20%"
        )
    return {
        "detectable_gain_80pct_power": power,
        "pooling": (
            "primary test: per task, a method counts as solving it when a majority of seeds solved it "
            "(with one seed: that seed); McNemar exact on those paired outcomes; Holm over all pairs. "
            "Per-seed McNemar tests, a seed-paired McNemar over all (seed, task) pairs (Holm over the pairs) and "
            "the t-95% interval of the per-seed difference are listed too."
        ),
        "seeds": seeds,
        "arms": per_arm,
        "pairs": tests,
        "verdicts": verdicts,
    }


def plot(results: dict[str, Any], path: Path, env_id: str, env_kwargs: dict[str, Any]) -> None:
    """The learning curves and the final test scores of every arm, as a PNG at ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.4), gridspec_kw={"width_ratios": [3, 2]})
    colors = {"rft": "tab:orange", "flow_grpo_trajectory": "tab:blue", "flow_grpo_turn": "tab:green"}
    for method, runs in results["final_runs"].items():
        for i, (_seed, run) in enumerate(sorted(runs.items())):
            c = run["curve"]
            ax.plot(
                [q["rollouts"] for q in c],
                [100 * q["val_success"] for q in c],
                marker="o",
                ms=3,
                color=colors[method],
                alpha=0.9 if i == 0 else 0.5,
                label=LABELS[method] if i == 0 else None,
            )
    ax.set_xlabel("training rollouts (episodes)")
    ax.set_ylabel(f"validation success (%, first {results['setup']['profile']['val_tasks']} tasks)")
    ax.set_title("validation curve (one line per seed)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    stats = results.get("statistics", {}).get("arms", {})
    names = [a for a in ARMS if a in stats]
    means = [100 * stats[a]["mean_over_seeds"]["mean"] for a in names]
    lows, highs = [], []
    for a in names:
        ci = stats[a]["mean_over_seeds"]
        lo, hi = (ci["lo"], ci["hi"]) if ci["n"] > 1 else next(iter(stats[a]["wilson95_per_seed"].values()))
        lows.append(100 * (ci["mean"] - lo))
        highs.append(100 * (hi - ci["mean"]))
    bx.bar(
        range(len(names)),
        means,
        yerr=[lows, highs],
        capsize=4,
        color=["gray", *[colors[n] for n in names[1:]]],
    )
    bx.set_xticks(range(len(names)), [LABELS[n].replace(", ", "\n") for n in names], fontsize=8)
    n_tasks = stats[names[0]]["test_tasks"] if names else 0
    ci_kind = "t-95% over seeds" if len(results["setup"]["seeds"]) > 1 else "Wilson 95%, one seed"
    bx.set_ylabel(f"test success on {n_tasks} tasks (%)")
    bx.set_title(f"held-out test ({ci_kind})")
    bx.grid(alpha=0.3, axis="y")
    label = "QUICK run (short, 1 seed): " if results["setup"]["quick"] else ""
    policy = str(results["setup"].get("demo_policy") or "scripted")
    demos = {RETRY_DEMOS: "retry demos", "scripted": "check-only demos"}.get(policy, policy.split(":")[-1])
    threads = results["setup"]["threads"]
    fig.suptitle(
        f"{label}{env_id.split('/')[-1]} {env_kwargs}, tiny LM after SFT on {demos}, "
        f"{threads} CPU thread{'s' if threads != 1 else ''} per run"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
