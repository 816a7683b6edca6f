"""The README's tiny CPU training example, measured: run its two commands, then compare the start and end policies
on the same validation tasks, and write ``experiments/results/tiny_cpu_example.json``.

    python experiments/tiny_cpu_example.py                 # about 12 min on 2 busy cores
    python experiments/tiny_cpu_example.py --work /tmp/ex  # keep the runs (a rerun skips the finished commands)

It runs, from ``--work`` (a folder outside the clone is fine)::

    agentflow-env sft --config tiny-cpu-game24 --output-dir runs/sft-tiny
    agentflow-env train --config tiny-cpu-game24 --init-from runs/sft-tiny --output-dir runs/grpo

then the same ``train`` with training seeds 1 and 2 (``--more-seeds``), and records each command's wall and CPU time,
the machine's load, the reward of every step and the validation curve the learner logs (success of
``eval_samples`` sampled rollouts per validation task, Wilson 95% intervals over episodes). Episodes of one task
are not independent, so the start and end policies are also compared per task: the learner's own evaluation of
the warm start and of each final model, on the same tasks and random numbers, gives each task's success rate at
both ends; the mean per-task gain has a paired t interval over tasks (per seed, and averaged over the seeds), and
the greedy outcomes of the first seed a McNemar exact test. The test split is never read.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from experiments.stats_util import mcnemar_exact, t_interval, wilson_interval  # noqa: E402

CONFIG = "tiny-cpu-game24"
RESULT = ROOT / "experiments" / "results" / "tiny_cpu_example.json"
QUIET = ["--progress", "false"]


def _cli() -> list[str]:
    script = shutil.which("agentflow-env")
    return [script] if script else [sys.executable, "-m", "agentflow_env.cli"]


def timed(argv: list[str], cwd: Path) -> dict[str, Any]:
    """Run one command to completion; its wall time and its CPU time (user + system, children included)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()
    started = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    subprocess.run(argv, cwd=cwd, env=env, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "wall_s": round(time.perf_counter() - started, 1),
        "cpu_s": round(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, 1),
        "load_average_at_start": [round(x, 2) for x in load],
    }


def per_task_success(model: str, work: Path, samples: int, temperature: float) -> list[float]:
    """Each validation task's success rate under the learner's own ``evaluate`` (its seeds and random numbers)."""
    from agents.training.config import load_config
    from agents.training.flow_grpo import FlowGRPOLearner

    config = load_config(CONFIG).replace(
        init_from=model,
        output_dir=str(work / "compare"),
        eval_samples=samples,
        eval_temperature=temperature,
        tensorboard=False,
    )
    learner = FlowGRPOLearner(config)
    seen: list[Any] = []
    collect = learner.collect

    def recorded(*args: Any, **kwargs: Any) -> Any:
        seen.append(collect(*args, **kwargs))
        return seen[-1]

    learner.collect = recorded  # type: ignore[method-assign]
    try:
        metrics = learner.evaluate()
    finally:
        learner.close()
    scores = seen[-1].scores  # group order: task 0's rollouts, then task 1's, ...
    rates = [sum(s >= 1.0 for s in scores[i : i + samples]) / samples for i in range(0, len(scores), samples)]
    logged = next(v for k, v in metrics.items() if k.endswith("/success") and k.startswith("eval/"))
    assert abs(sum(rates) / len(rates) - logged) < 1e-9, "per-task rates disagree with the learner's evaluation"
    return rates


def _interval(successes: int, n: int) -> dict[str, Any]:
    low, high = wilson_interval(successes, n)
    return {"success": round(successes / n, 4), "wilson95": [round(low, 4), round(high, 4)], "episodes": n}


def _gain(a: list[float], b: list[float]) -> dict[str, Any]:
    """Mean per-task gain from ``a`` to ``b`` with its paired t-95% interval over tasks; tasks up, equal, down."""
    gain = t_interval([y - x for x, y in zip(a, b)])
    return {
        "per_task_gain": {k: (None if v is None else round(v, 4)) for k, v in gain.items()},
        "tasks_up_same_down": [
            sum(y > x for x, y in zip(a, b)),
            sum(y == x for x, y in zip(a, b)),
            sum(y < x for x, y in zip(a, b)),
        ],
    }


def compare(start: str, ends: list[str], work: Path, samples: int, temperature: float) -> dict[str, Any]:
    """The start policy against each end policy (one per training seed) on every validation task: sampled
    (per-task rates), greedy for the first end, and the per-task gain averaged over the ends."""
    a = per_task_success(start, work, samples, temperature)
    bs = [per_task_success(end, work, samples, temperature) for end in ends]
    ga, gb = (per_task_success(m, work, 1, 0.0) for m in (start, ends[0]))
    test = mcnemar_exact([y >= 1 for y in gb], [x >= 1 for x in ga])
    n = len(a) * samples
    return {
        "tasks": len(a),
        "sampled": {
            "samples_per_task": samples,
            "temperature": temperature,
            "start": _interval(round(sum(a) * samples), n),
            "end": _interval(round(sum(bs[0]) * samples), n),
            **_gain(a, bs[0]),
        },
        "greedy": {
            "start": _interval(int(sum(ga)), len(ga)),
            "end": _interval(int(sum(gb)), len(gb)),
            "mcnemar_end_vs_start": {"only_end": test.a_only, "only_start": test.b_only, "p": round(test.p_value, 4)},
        },
        "other_training_seeds": [{"end": _interval(round(sum(b) * samples), n), **_gain(a, b)} for b in bs[1:]],
        "pooled_over_training_seeds": _gain(a, [sum(col) / len(bs) for col in zip(*bs)]) if len(bs) > 1 else None,
    }


def curve(metrics_file: Path) -> list[dict[str, Any]]:
    keep = ("rollout/reward", "rollout/zero_advantage_groups", "losses/kl", "perf/step_s", "time/elapsed_s")
    rows = []
    for line in metrics_file.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        row: dict[str, Any] = {"step": record["step"]}
        row.update({k: round(record[k], 4) for k in keep if k in record})
        for key, value in record.items():
            name = key.rsplit("/", 1)[-1]
            if key.startswith("eval/") and name in ("success", "success_ci95_low", "success_ci95_high"):
                row["val_" + name] = round(value, 4)
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=None, help="folder of the runs (default: a new temporary one)")
    parser.add_argument("--out", type=Path, default=RESULT, help="the JSON written")
    parser.add_argument(
        "--more-seeds", type=int, nargs="*", default=[1, 2], help="training seeds besides the config's (0)"
    )
    args = parser.parse_args(argv)
    import tempfile

    work = (args.work or Path(tempfile.mkdtemp(prefix="tiny-cpu-example-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    commands = {
        "sft": ["sft", "--config", CONFIG, "--output-dir", "runs/sft-tiny", "--no-progress"],
        "train": ["train", "--config", CONFIG, "--init-from", "runs/sft-tiny", "--output-dir", "runs/grpo"] + QUIET,
    }
    for seed in args.more_seeds:  # the same command with another training seed (same warm start)
        commands[f"train-seed{seed}"] = commands["train"][:-3] + [f"runs/grpo-seed{seed}", "--seed", str(seed)] + QUIET
    done = work / "timings.json"  # each finished command's timing: a rerun does not run it again
    timings = json.loads(done.read_text(encoding="utf-8")) if done.is_file() else {}
    for name, command in commands.items():
        if name not in timings:
            timings[name] = timed(_cli() + command, work)
            done.write_text(json.dumps(timings), encoding="utf-8")

    from agents.training.config import load_config

    config = load_config(CONFIG)
    rows = curve(work / "runs" / "grpo" / "metrics.jsonl")
    rewards = [r["rollout/reward"] for r in rows if "rollout/reward" in r][:20]
    first_20_steps = {
        "reward_mean_steps_1_5": round(sum(rewards[:5]) / 5, 4),
        "reward_mean_steps_16_20": round(sum(rewards[15:20]) / 5, 4),
        "steps_with_zero_reward": sum(r == 0 for r in rewards),
    }
    ends = [work / "runs" / "grpo" / "final"] + [work / "runs" / f"grpo-seed{s}" / "final" for s in args.more_seeds]
    result = {
        "what": f"the README's tiny CPU example (agents/configs/{CONFIG}.toml): SFT warm start, then Flow-GRPO",
        "made_by": "python experiments/tiny_cpu_example.py --more-seeds " + " ".join(map(str, args.more_seeds)),
        "commands": ["agentflow-env " + " ".join(c) for c in commands.values()],
        "machine": f"{os.cpu_count()} CPU cores (shared; see each command's load average), torch threads 1",
        "timings": timings,
        "train_step_s_median": sorted(r["perf/step_s"] for r in rows if "perf/step_s" in r)[len(rewards) // 2],
        "first_20_steps": first_20_steps,
        "validation_start_vs_end": compare(
            str(work / "runs" / "sft-tiny"), [str(e) for e in ends], work, config.eval_samples, config.eval_temperature
        ),
        "curve": rows,
    }
    for entry, seed in zip(result["validation_start_vs_end"]["other_training_seeds"], args.more_seeds):
        seed_rows = curve(work / "runs" / f"grpo-seed{seed}" / "metrics.jsonl")
        seed_rewards = [r["rollout/reward"] for r in seed_rows if "rollout/reward" in r][:20]
        entry.update(seed=seed, rewards_first_20_steps=seed_rewards)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: result[k] for k in ("timings", "first_20_steps", "validation_start_vs_end")}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
