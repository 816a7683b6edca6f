"""The README's tiny CPU training example, measured over training seeds: run its two commands, train the same
warm start with more seeds, compare the start and end policies on the same validation tasks, and write
``experiments/results/tiny_cpu_example.json`` with the code version and the machine that produced it.

    python experiments/tiny_cpu_example.py                   # seeds 0-4, about 25 min on 2 busy cores
    python experiments/tiny_cpu_example.py --work /tmp/ex    # keep the runs (a rerun skips the finished commands)
    python experiments/tiny_cpu_example.py --prefix --out p.json   # only sft + the warm start's validation

It runs, from ``--work`` (a folder outside the clone is fine)::

    agentflow-env sft --config tiny-cpu-game24 --output-dir runs/sft-tiny
    agentflow-env train --config tiny-cpu-game24 --init-from runs/sft-tiny --output-dir runs/grpo

then the same ``train`` with each further training seed (``--seeds``; seed 0 is the config's, the README's run;
``--jobs`` of them at once, each its own process). Each command's wall time, its own CPU time and the machine's
load at its start and end are recorded, and the sha256 of every model it wrote. Each run's learner validates
the warm start (step 0) and its final policy on the same random numbers (``eval_samples`` sampled rollouts per
validation task at the rollout temperature; the numbers depend on the training seed), so per seed the gain is
paired. Over seeds: the mean end success and the mean gain with a t-95% interval over seeds (the seed is the unit
that repeats), and the per-seed table. For seed 0 the start and end are also compared per task (paired t-95%
over the 29 tasks) and greedily (McNemar exact). The test split is never read.

``--prefix`` stops after ``sft`` and the warm start's validation: the part CI reruns and compares bit for bit
with the committed result (``tests/agents/training/test_tiny_cpu_example.py``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
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
# what the example's numbers depend on: a change here (uncommitted) makes the recorded commit a lie
CODE_PATHS = ("agentflow_env", "agents", "benchmarks", "experiments/tiny_cpu_example.py")


def _cli() -> list[str]:
    script = shutil.which("agentflow-env")
    return [script] if script else [sys.executable, "-m", "agentflow_env.cli"]


def code_version(root: Path = ROOT) -> dict[str, Any]:
    """The git commit of ``root`` and whether the code the example runs differs from it (uncommitted changes)."""

    def git(*args: str) -> str:
        proc = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)
        return proc.stdout.strip() if proc.returncode == 0 else ""

    changed = git("status", "--porcelain", "--", *CODE_PATHS)
    return {"commit": git("rev-parse", "HEAD") or None, "code_changed_since_commit": bool(changed)}


def environment() -> dict[str, Any]:
    """What floating-point results depend on besides the code: library versions, the CPU and its kernels."""
    import torch
    import transformers

    model = next(
        (line.split(":", 1)[1].strip() for line in _read("/proc/cpuinfo").splitlines() if "model name" in line),
        platform.processor(),
    )
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "cpu": model,
        "cpu_count": os.cpu_count(),
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch_threads": 1,  # the config's threads; sft takes them from the same config
    }


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError:
        return ""


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def timed_all(commands: dict[str, list[str]], cwd: Path, jobs: int, done: Path) -> dict[str, Any]:
    """Run ``commands`` to completion, ``jobs`` at a time, each as its own process; per command its wall time,
    its own CPU time (user + system, from ``wait4``) and the load at its start and end. Each finished command's
    timing is saved in ``done`` at once, so a rerun skips it."""
    timings = json.loads(done.read_text(encoding="utf-8")) if done.is_file() else {}
    waiting = [name for name in commands if name not in timings]
    running: dict[int, tuple[str, float, list[float]]] = {}
    while waiting or running:
        while waiting and len(running) < jobs:
            name = waiting.pop(0)
            proc = subprocess.Popen(_cli() + commands[name], cwd=cwd, env=_env())
            running[proc.pid] = (name, time.perf_counter(), [round(x, 2) for x in os.getloadavg()])
        pid, status, usage = os.wait4(-1, 0)
        if pid not in running:
            continue
        name, started, load = running.pop(pid)
        if os.waitstatus_to_exitcode(status) != 0:
            raise subprocess.CalledProcessError(os.waitstatus_to_exitcode(status), commands[name])
        timings[name] = {
            "wall_s": round(time.perf_counter() - started, 1),
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
            "load_average_at_start": load,
            "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
            "ran_alongside": sorted(n for n, *_ in running.values()),
        }
        done.write_text(json.dumps(timings), encoding="utf-8")
    return timings


def per_task_successes(model: str, work: Path, samples: int, temperature: float) -> list[int]:
    """Each validation task's successes under the learner's own ``evaluate`` (training seed 0's random numbers)."""
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
    counts = [sum(s >= 1.0 for s in scores[i : i + samples]) for i in range(0, len(scores), samples)]
    logged = next(v for k, v in metrics.items() if k.endswith("/success") and k.startswith("eval/"))
    assert abs(sum(counts) / len(scores) - logged) < 1e-9, "per-task counts disagree with the learner's evaluation"
    return counts


def _interval(successes: int, n: int) -> dict[str, Any]:
    low, high = wilson_interval(successes, n)
    return {"success": round(successes / n, 4), "wilson95": [round(low, 4), round(high, 4)], "episodes": n}


def _rounded(stats: dict[str, Any]) -> dict[str, Any]:
    return {k: (None if v is None else round(v, 4)) for k, v in stats.items()}


def paired_gain(start: list[int], end: list[int], samples: int) -> dict[str, Any]:
    """Mean per-task gain (success rate) from ``start`` to ``end``, paired t-95% over tasks; tasks up/equal/down."""
    return {
        "per_task_gain": _rounded(t_interval([(y - x) / samples for x, y in zip(start, end)])),
        "tasks_up_same_down": [
            sum(y > x for x, y in zip(start, end)),
            sum(y == x for x, y in zip(start, end)),
            sum(y < x for x, y in zip(start, end)),
        ],
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


def reward_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    rewards = [r["rollout/reward"] for r in rows if "rollout/reward" in r]
    return {
        "rewards": rewards,
        "reward_mean_steps_1_5": round(sum(rewards[:5]) / 5, 4),
        "reward_mean_last_5_steps": round(sum(rewards[-5:]) / 5, 4),
        "steps_with_zero_reward": sum(r == 0 for r in rewards),
    }


def warm_start(work: Path, samples: int, temperature: float) -> dict[str, Any]:
    """The SFT model (its hash) and its validation: what ``--prefix`` reruns and CI compares bit for bit."""
    sft = work / "runs" / "sft-tiny"
    counts = per_task_successes(str(sft), work, samples, temperature)
    return {
        "sft_model_sha256": sha256(sft / "model.safetensors"),
        "validation": {**_interval(sum(counts), len(counts) * samples), "per_task_successes": counts},
    }


def over_seeds(seeds: list[dict[str, Any]]) -> dict[str, Any]:
    """Seed-level summary: the t-95% interval over training seeds of the end success and of the gain."""
    ends = [s["end"]["success"] for s in seeds]
    gains = [s["gain"] for s in seeds]
    return {
        "seeds": len(seeds),
        "end_success": _rounded(t_interval(ends)),
        "gain": _rounded(t_interval(gains)),
        "seeds_up_same_down": [sum(g > 0 for g in gains), sum(g == 0 for g in gains), sum(g < 0 for g in gains)],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=None, help="folder of the runs (default: a new temporary one)")
    parser.add_argument("--out", type=Path, default=RESULT, help="the JSON written")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4], help="training seeds (0 first)")
    parser.add_argument("--prefix", action="store_true", help="only sft and the warm start's validation")
    parser.add_argument("--jobs", type=int, default=1, help="training seeds run at once (each its own process)")
    args = parser.parse_args(argv)
    if args.seeds[0] != 0:
        parser.error("--seeds must start with 0, the config's seed (the README's run)")
    if args.prefix and args.out.resolve() == RESULT:
        parser.error("--prefix writes a partial result: give --out elsewhere")

    work = (args.work or Path(tempfile.mkdtemp(prefix="tiny-cpu-example-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    train = ["train", "--config", CONFIG, "--init-from", "runs/sft-tiny", "--output-dir"]
    commands = {"sft": ["sft", "--config", CONFIG, "--output-dir", "runs/sft-tiny", "--no-progress"]}
    if not args.prefix:
        commands["train"] = [*train, "runs/grpo", *QUIET]
        for seed in args.seeds[1:]:  # the same command with another training seed (same warm start)
            commands[f"train-seed{seed}"] = [*train, f"runs/grpo-seed{seed}", "--seed", str(seed), *QUIET]
    done = work / "timings.json"  # each finished command's timing: a rerun does not run it again
    timings = timed_all({"sft": commands["sft"]}, work, 1, done)
    timings = timed_all(commands, work, args.jobs, done)  # the training seeds, --jobs at a time

    from agents.training.config import load_config

    config = load_config(CONFIG)
    samples, temperature = config.eval_samples, config.eval_temperature
    result: dict[str, Any] = {
        "what": f"the README's tiny CPU example (agents/configs/{CONFIG}.toml): SFT warm start, then Flow-GRPO",
        "made_by": "python experiments/tiny_cpu_example.py"
        + (" --prefix" if args.prefix else "")
        + (f" --seeds {' '.join(map(str, args.seeds))} --jobs {args.jobs}" if not args.prefix else ""),
        "code_version": code_version(),
        "environment": environment(),
        "commands": ["agentflow-env " + " ".join(c) for c in commands.values()],
        "timings": timings,
        "validation": {"tasks": config.eval_tasks, "samples_per_task": samples, "temperature": temperature},
        "warm_start": warm_start(work, samples, temperature),
    }
    if not args.prefix:
        start = result["warm_start"]["validation"]["per_task_successes"]
        n = len(start) * samples
        seeds = []
        for seed in args.seeds:  # each run's own validation at step 0 and at its end: the same random numbers
            run = work / "runs" / ("grpo" if seed == 0 else f"grpo-seed{seed}")
            rows = curve(run / "metrics.jsonl")
            logged = [{"step": r["step"], "success": r["val_success"]} for r in rows if "val_success" in r]
            first, last = (round(logged[i]["success"] * n) for i in (0, -1))
            seeds.append(
                {
                    "seed": seed,
                    "start": _interval(first, n),
                    "end": _interval(last, n),
                    "gain": round((last - first) / n, 4),
                    **reward_summary(rows),
                    "final_model_sha256": sha256(run / "final" / "model.safetensors"),
                    "logged_validation": logged,
                }
            )
        end = per_task_successes(str(work / "runs" / "grpo" / "final"), work, samples, temperature)
        assert sum(end) == round(seeds[0]["end"]["success"] * n), "seed 0's end disagrees with its logged validation"
        greedy = [
            per_task_successes(m, work, 1, 0.0)
            for m in (str(work / "runs" / "sft-tiny"), str(work / "runs" / "grpo" / "final"))
        ]
        test = mcnemar_exact([y >= 1 for y in greedy[1]], [x >= 1 for x in greedy[0]])
        main_rows = curve(work / "runs" / "grpo" / "metrics.jsonl")
        result.update(
            seeds=seeds,
            over_seeds=over_seeds(seeds),
            per_task_seed0={"end_per_task_successes": end, **paired_gain(start, end, samples)},
            greedy_seed0={
                "start": _interval(sum(greedy[0]), len(greedy[0])),
                "end": _interval(sum(greedy[1]), len(greedy[1])),
                "mcnemar_end_vs_start": {
                    "only_end": test.a_only,
                    "only_start": test.b_only,
                    "p": round(test.p_value, 4),
                },
            },
            train_step_s_median_seed0=sorted(r["perf/step_s"] for r in main_rows if "perf/step_s" in r)[
                sum("perf/step_s" in r for r in main_rows) // 2
            ],
            curve_seed0=main_rows,
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    shown = ("code_version", "timings", "warm_start", "over_seeds")
    print(json.dumps({k: result[k] for k in shown if k in result}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
