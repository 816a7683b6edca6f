"""Multi-turn learning proof on CPU: tiny LM -> SFT -> {RFT, Flow-GRPO trajectory, Flow-GRPO turn}, on a task
family (``--family``, see experiments/learning_proof_families.py): ``game24`` (default; Game of 24 over 1..20
with up to 3 planner turns: calculator check, retry, answer) or ``hopchain`` (Gen-HopChain: 1-3 registry
lookups, each from the person the previous reply named, then the answer; the design is fixed in that module).

Protocol (every phase is one ``agentflow-env`` command, stored in the JSON, so any number can be redone by hand):

1. per seed: ``agentflow-env sft`` on scripted demonstrations (train split): the planner checks the right
   expression with the calculator, then answers; with ``--demo-policy`` set to the retry planner it checks a
   wrong guess first on half the tasks and retries after the calculator refutes it;
2. tuning, on the validation split only: each RL method (RFT, Flow-GRPO with ``trajectory`` aggregation,
   Flow-GRPO with ``turn`` aggregation) gets the same grid (learning rate x rollout temperature) from seed 0's
   SFT model; a method's setting is the one with the best final validation success (ties: the better mean
   validation success over the curve after step 0, then grid order);
3. final runs: every method with its chosen setting from every seed's SFT model (seed 0's run is the tuning
   run), all at equal rollouts (same steps, questions per step and group size);
4. final evaluation, the only time the test split is read: greedy, one episode per task, on the first
   ``--test-tasks`` test tasks, for SFT only and the three methods, every seed;
5. statistics: success per seed, mean and Student-t 95% interval over seeds, Wilson intervals; paired
   per-task McNemar exact tests between methods, on the per-task majority vote over seeds (primary, with
   Holm's adjustment over the 6 pairs) and per seed; a paired bootstrap interval of each difference;
   turns and checks per episode; the validation curve; clip fractions; the gain over SFT the primary test
   could detect (80% power).

Every per-task test outcome goes to ``OUT/NAME/outcomes/<arm>-seed<k>.json.gz`` (committed), and the statistics
are computed from those files alone; ``--recompute`` redoes that without any model and checks the result
equals the summary ``OUT/NAME.json``.

Resumable: finished phases are skipped (SFT: its sft_metrics.json; train: metrics reach the step count; eval:
its JSON), train runs resume from their checkpoints, and the result JSON is rewritten after every phase.
Every call has a wall-clock budget (``--max-minutes``); a train run cut by it is recorded as incomplete and
continues on the next call.

Run: python experiments/learning_proof.py            (full: 3 seeds, all 551 test tasks; about 40 min on 2 idle cores)
     python experiments/learning_proof.py --demo-policy agents.policies.baselines:ScriptedGameOf24RetryPlanner \
         --name learning_proof_multiturn_retry     (the variant with retry demonstrations)
     python experiments/learning_proof.py --quick    (1 seed, 40 steps, 100 test tasks, 2-setting grid)
     python experiments/learning_proof.py --family hopchain --threads 1 --jobs 2   (the Gen-HopChain proof)
     python experiments/learning_proof.py --family hopchain --recompute   (every statistic from the outcomes)
     python experiments/learning_proof.py --recompute   (every result with committed outcomes; lists those without)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from experiments.learning_proof_families import FAMILIES, Family, Profile  # noqa: E402
from experiments.learning_proof_outcomes import PACKED, recompute_cli, summarise_outcomes, write_outcomes  # noqa: E402
from experiments.learning_proof_report import ARMS, METHODS, RETRY_DEMOS, plot  # noqa: E402

CONFIG = "experiments/configs/learning-proof-game24-multiturn.toml"
# the task, read from the config by _configure (one source of truth for SFT, training and evaluation)
ENV_ID = ""
ENV_KWARGS: dict[str, Any] = {}
MAX_TOKENS = 64
FAMILY: Family = FAMILIES["game24"]


def _configure(config: str, family: str = "game24") -> None:
    import tomllib

    global CONFIG, ENV_ID, ENV_KWARGS, MAX_TOKENS, FAMILY
    FAMILY = FAMILIES[family]
    CONFIG = _rel(ROOT / (config or FAMILY.config))
    data = tomllib.loads((ROOT / CONFIG).read_text(encoding="utf-8"))
    ENV_ID = data["env_id"]
    ENV_KWARGS = dict(data.get("env_kwargs", {}))
    MAX_TOKENS = int(data.get("rollout", {}).get("max_new_tokens", 64))


FULL, QUICK = FAMILIES["game24"].full, FAMILIES["game24"].quick  # the Game-of-24 profiles (tests read them)


def _args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--family",
        choices=sorted(FAMILIES),
        default=None,
        help="the task family (experiments/learning_proof_families.py): game24 (default) or hopchain (Gen-HopChain); "
        "with --recompute and no --family or --name: every result in OUT",
    )
    p.add_argument("--config", default="", help="the train config (default: the family's); its env is the task")
    p.add_argument("--quick", action="store_true", help="the short version (1 seed, 40 steps, 100 test tasks)")
    p.add_argument("--seeds", type=int, nargs="+", help="override the profile's seeds")
    p.add_argument("--steps", type=int, help="override the learner steps of every RL run")
    p.add_argument("--test-tasks", type=int, help="override the number of held-out test tasks")
    p.add_argument("--max-minutes", type=float, default=60.0, help="wall-clock budget of each phase (one call)")
    p.add_argument("--threads", type=int, default=1, help="torch threads of every phase")
    p.add_argument(
        "--jobs",
        type=int,
        default=0,
        help="phases run side by side (independent SFT, train and eval runs); default: CPU cores / --threads",
    )
    p.add_argument("--work", default="", help="scratch folder (default runs/NAME)")
    p.add_argument("--out", default=str(ROOT / "experiments" / "results"), help="where the JSON and PNG go")
    p.add_argument("--name", default="", help="file stem (default: the family's, e.g. learning_proof_hopchain)")
    p.add_argument(
        "--recompute",
        action="store_true",
        help="recompute every statistic from the committed per-task outcomes (OUT/NAME/outcomes/*.json.gz) and check "
        "that it equals the summary OUT/NAME.json; runs no model. Without --family and --name: every result in OUT "
        "with outcomes, and a list of the reported results without them (exit 0 only when all with outcomes match)",
    )
    p.add_argument(
        "--demo-policy",
        default="",
        help="planner of the SFT demonstrations: 'scripted' (default: checks the right expression, then answers) "
        f"or a policy spec, e.g. {RETRY_DEMOS} (checks a wrong guess first on half the tasks, then retries)",
    )
    p.add_argument("--dry-run", action="store_true", help="print the plan, the commands and the estimate; run nothing")
    p.add_argument("--evaluate", nargs=3, metavar=("MODEL", "SPLIT", "OUT"), help=argparse.SUPPRESS)
    p.add_argument("--build-base", metavar="OUT", help=argparse.SUPPRESS)
    p.add_argument("--eval-tasks", type=int, default=0, help=argparse.SUPPRESS)
    return p.parse_args(argv)


# ---------------------------------------------------------------------------------------------- phases


def _cli() -> list[str]:
    return [sys.executable, "-m", "agentflow_env.cli"]


def _shown(cmd: list[str]) -> str:
    if cmd[:3] == _cli():
        return shlex.join(["agentflow-env", *cmd[3:]])
    return shlex.join(["python", *[os.path.relpath(c, ROOT) if c.startswith(str(ROOT)) else c for c in cmd[1:]]])


def _run(cmd: list[str], log: Path, minutes: float) -> dict[str, Any]:
    """One phase, output to ``log``, killed after ``minutes`` (plus a grace period for the checkpoint)."""
    shown = _shown(cmd)
    sys.stderr.write(f"$ {shown}\n")
    started = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false"}
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a", encoding="utf-8") as fh:
        fh.write(f"\n$ {shown}\n")
        fh.flush()
        try:
            proc = subprocess.run(
                cmd, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT, env=env, timeout=60 * minutes + 300
            )
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            rc = 124
    seconds = time.perf_counter() - started
    if rc:
        sys.stderr.write(f"  phase failed (exit {rc}) after {seconds:.0f}s; see {log}\n")
    return {"command": shown, "seconds": seconds, "returncode": rc}


def _sft(p: Profile, args: argparse.Namespace, work: Path, seed: int, record: dict[str, Any]) -> Path:
    out, cmd = _sft_cmd(p, args, work, seed)
    key = f"sft/seed{seed}"
    if not (out / "sft_metrics.json").is_file() and not args.dry_run:
        record[key] = _run(cmd, work / f"seed{seed}" / "sft.log", args.max_minutes)
    else:
        record.setdefault(key, {"command": _shown(cmd), "skipped": "done" if not args.dry_run else "dry run"})
    return out


def _sft_cmd(p: Profile, args: argparse.Namespace, work: Path, seed: int) -> tuple[Path, list[str]]:
    out = work / f"seed{seed}" / "sft"
    cmd = [
        *_cli(),
        "sft",
        "--env-id",
        ENV_ID,
        "--env-kwargs",
        json.dumps(ENV_KWARGS),
        "--output-dir",
        _rel(out),
        "--episodes",
        str(p.sft_episodes),
        "--epochs",
        "100",
        "--max-steps",
        str(p.sft_steps),
        "--lr",
        f"{p.sft_lr:g}",
        "--threads",
        str(args.threads),
        "--seed",
        str(seed),
        "--eval-episodes",
        "0",
        "--max-minutes",
        str(args.max_minutes),
        "--no-progress",
        "--json",
    ]
    if args.demo_policy != "scripted":
        cmd[-2:-2] = ["--demo-policy", args.demo_policy]
    if FAMILY.base_shape is not None:  # a tiny LM whose tokenizer also read this family's text (see _base)
        cmd[-2:-2] = ["--base", _rel(work / "base"), "--all-demos"]
    return out, cmd


def _base(args: argparse.Namespace, work: Path, record: dict[str, Any]) -> None:
    """The family's start model (when it has its own shape): built once, shared by every seed's SFT."""
    if FAMILY.base_shape is None:
        return
    out = work / "base"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--family", FAMILY.key, "--build-base", _rel(out)]
    if not (out / "config.json").is_file() and not args.dry_run:
        record["base"] = _run(cmd, work / "base.log", args.max_minutes)
    else:
        record.setdefault("base", {"command": _shown(cmd), "skipped": "done" if not args.dry_run else "dry run"})


def build_base(out: str) -> int:
    """The tiny LM's recipe with this family's scripted episodes added to the tokenizer's corpus, and the
    family's entity names as whole tokens (one token each, so copying one from a reply is one step)."""
    from agents.tiny_lm import _family_texts, build_tiny_lm

    assert FAMILY.base_shape is not None
    texts = _family_texts(ENV_ID, FAMILY.base_episodes, 0, max_steps=10)
    build_tiny_lm(ROOT / out, texts=texts, added_tokens=FAMILY.atomic_tokens, **FAMILY.base_shape)
    return 0


def _record(commands: dict[str, Any], key: str, rec: dict[str, Any]) -> None:
    """A phase's record; a skipped phase keeps the record of the call that ran it."""
    if "skipped" not in rec or key not in commands:
        commands[key] = rec


def _grid(p: Profile) -> list[dict[str, float]]:
    return [{"learning_rate": lr, "temperature": t} for lr in p.grid_lr for t in p.grid_temperature]


def _setting_name(s: dict[str, float]) -> str:
    return f"lr{s['learning_rate']:g}-T{s['temperature']:g}"


def _train(
    p: Profile,
    args: argparse.Namespace,
    work: Path,
    seed: int,
    method: str,
    setting: dict[str, float],
    sft: Path,
    commands: dict[str, Any],
) -> Path:
    """One RL run (skipped when its metrics already reach the step count; resumed when cut short)."""
    out = work / f"seed{seed}" / method / _setting_name(setting)
    cmd = [
        *_cli(),
        "train",
        "--config",
        CONFIG,
        "--init-from",
        _rel(sft / "final") if (sft / "final").is_dir() else _rel(sft),
        "--output-dir",
        _rel(out),
        "--seed",
        str(seed),
        "--steps",
        str(p.steps),
        "--eval-every",
        str(p.eval_every),
        "--eval-tasks",
        str(p.val_tasks),
        "--eval-split",
        "validation",
        "--threads",
        str(args.threads),
        "--max-minutes",
        str(args.max_minutes),
        "--learning-rate",
        f"{setting['learning_rate']:g}",
        "--temperature",
        f"{setting['temperature']:g}",
        *METHODS[method],
    ]
    if _train_done(out, p.steps) or args.dry_run:
        rec = {"command": _shown(cmd), "skipped": "done" if not args.dry_run else "dry run"}
    else:
        rec = _run(cmd, out.parent / f"{out.name}.log", args.max_minutes)
    _record(commands, f"train/{_rel(out)}", rec)
    return out


def _metrics(run: Path) -> list[dict[str, Any]]:
    path = run / "metrics.jsonl"
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def _train_done(run: Path, steps: int) -> bool:
    return (run / "final").is_dir() and max((r.get("step", 0) for r in _metrics(run)), default=0) >= steps


def _summarise_run(run: Path, steps: int) -> dict[str, Any]:
    """The validation curve, training statistics and clip fraction of one train run."""
    cfg = json.loads((run / "config.json").read_text()) if (run / "config.json").is_file() else {}
    rows = _metrics(run)
    name = ENV_ID.split("/", 1)[-1]
    per_step = cfg.get("questions_per_step", 8) * cfg.get("group_size", 8)
    curve = [
        {
            "step": r["step"],
            "rollouts": r["step"] * per_step,
            "val_success": r[f"eval/{name}/success"],
            "val_turns": r.get(f"eval/{name}/turns"),
        }
        for r in rows
        if f"eval/{name}/success" in r
    ]
    train = [r for r in rows if "rollout/reward" in r]

    def mean(key: str) -> float | None:
        vals = [r[key] for r in train if key in r]
        return sum(vals) / len(vals) if vals else None

    done = max((r["step"] for r in rows), default=0)
    return {
        "steps_done": done,
        "complete": _train_done(run, steps),
        "rollouts": done * per_step,
        "curve": curve,
        "final_val_success": curve[-1]["val_success"] if curve else None,
        "train_success": [r.get("rollout/success_rate") for r in train],
        "train_turns_mean": mean("rollout/turns"),
        "clip_fraction_mean": mean("losses/clip_fraction"),
        "clip_fraction_max": max((r.get("losses/clip_fraction", 0.0) for r in train), default=None),
        "kl_mean": mean("losses/kl"),
        "mean_step_s": mean("perf/step_s"),
        "wall_s_last_call": rows[-1].get("time/elapsed_s") if rows else None,
        "config": {k: cfg.get(k) for k in ("learning_rate", "temperature", "algorithm", "loss_aggregation", "seed")},
    }


def _evaluate_cmd(args: argparse.Namespace, model: Path, out: Path, tasks: int) -> list[str]:
    return [
        sys.executable,
        str(Path(__file__).resolve()),
        *(["--family", FAMILY.key] if FAMILY.key != "game24" else []),
        "--evaluate",
        _rel(model),
        "test",
        _rel(out),
        "--eval-tasks",
        str(tasks),
        "--config",
        CONFIG,
        "--threads",
        str(args.threads),
    ]


def _final_eval(args: argparse.Namespace, model: Path, out: Path, tasks: int, record: dict[str, Any]) -> dict | None:
    cmd = _evaluate_cmd(args, model, out, tasks)
    key = f"eval/{_rel(out)}"
    if not out.is_file() and not args.dry_run:
        record[key] = _run(cmd, out.with_suffix(".log"), args.max_minutes)
    else:
        record.setdefault(key, {"command": _shown(cmd), "skipped": "done" if not args.dry_run else "dry run"})
    return json.loads(out.read_text()) if out.is_file() else None


def evaluate_model(model: str, split: str, out: str, tasks: int, threads: int) -> int:
    """Greedy, one episode per task on the first ``tasks`` tasks of ``split``; per-task success and turns."""
    import torch

    from agentflow_env.engines.base import SamplingParams
    from agents.policies.hf_policy import HFPlanner
    from agents.training.rollout import collect_rollouts
    from agents.training.sft import _make_env, split_task_ids

    if threads:
        torch.set_num_threads(threads)
    ids = split_task_ids(ENV_ID, split, tasks, ENV_KWARGS)
    planner = HFPlanner.from_pretrained(ROOT / model, sampling=SamplingParams(temperature=0.0, max_tokens=MAX_TOKENS))
    fns = [lambda: _make_env(ENV_ID, split, **ENV_KWARGS) for _ in range(min(32, len(ids)))]
    started = time.perf_counter()
    trajs = collect_rollouts(fns, planner, task_ids=ids, seed=0, record_samples=False, env_id=ENV_ID)
    by_id = {t.task_id: t for t in trajs}
    rows = [
        {
            "task_id": i,
            "success": bool(by_id[i].success),
            "turns": by_id[i].num_turns,
            "tool_calls": sum(1 for turn in by_id[i].turns if turn.tool),
            "answer": by_id[i].answer,
            # what each tool call asked and got (the multi-turn behaviour statistics read them)
            "tool_commands": [str(turn.command or "")[:80] for turn in by_id[i].turns if turn.tool],
            "tool_results": [str(turn.result or "")[:80] for turn in by_id[i].turns if turn.tool],
            **({"links": FAMILY.links(by_id[i].question)} if FAMILY.links else {}),
        }
        for i in ids
    ]
    result = {"model": model, "split": split, "env_id": ENV_ID, "env_kwargs": ENV_KWARGS, "tasks": rows}
    result["seconds"] = time.perf_counter() - started
    target = ROOT / out
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    tmp.write_text(json.dumps(result), encoding="utf-8")
    tmp.replace(target)  # the file exists only when the evaluation is complete
    return 0


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in ("agentflow-env", "torch", "transformers", "numpy", "gymnasium", "tokenizers"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def _git(*cmd: str) -> str:
    try:
        return subprocess.run(["git", *cmd], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    except OSError:
        return ""


def _rel(path: Path) -> str:
    path = Path(path).resolve()
    return os.path.relpath(path, ROOT) if path.is_relative_to(ROOT) else str(path)


def _estimate(p: Profile, seeds: list[int], jobs: int = 1) -> dict[str, Any]:
    """Hours on an idle 2-core CPU; phases side by side (``jobs``) share the wall clock, roughly."""
    grid = len(_grid(p))
    runs = len(METHODS) * (grid + len(seeds) - 1)
    evals = len(seeds) * len(ARMS)
    seconds = len(seeds) * p.sft_steps * p.sft_step_s + runs * p.steps * p.step_s + evals * p.test_tasks * p.eval_task_s
    seconds += runs * (p.steps // p.eval_every + 1) * p.val_tasks * p.eval_task_s
    hours = seconds / 3600 / max(1, jobs)
    return {"sft_runs": len(seeds), "train_runs": runs, "test_evaluations": evals, "estimated_hours": hours}


def _in_parallel(args: argparse.Namespace, calls: list[Callable[[], Any]]) -> list[Any]:
    """Independent phases, ``--jobs`` at a time (each a subprocess with ``--threads`` torch threads)."""
    if args.jobs <= 1 or len(calls) <= 1:
        return [call() for call in calls]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        return list(pool.map(lambda call: call(), calls))


def _tuning_calls(p: Profile, args: argparse.Namespace, work: Path, seed: int, sft: Path, commands: dict) -> list:
    """Each method's grid from one seed's SFT model."""
    return [
        partial(_train, p, args, work, seed, method, setting, sft, commands)
        for method in METHODS
        for setting in _grid(p)
    ]


def _choose(p: Profile, args: argparse.Namespace, work: Path, seed: int, results: dict[str, Any]) -> dict[str, dict]:
    """A method's setting is the one with the best final validation success (ties: the better curve, grid order)."""
    tuning: dict[str, Any] = {}
    chosen: dict[str, dict[str, float]] = {}
    for method in METHODS:
        tuning[method] = []
        for setting in _grid(p):
            run = work / f"seed{seed}" / method / _setting_name(setting)
            summary = _summarise_run(run, p.steps) if not args.dry_run else {}
            later = [c["val_success"] for c in summary.get("curve", []) if c["step"] > 0]
            tuning[method].append(
                {
                    "setting": setting,
                    "final_val_success": summary.get("final_val_success"),
                    "mean_val_success_after_start": sum(later) / len(later) if later else None,
                }
            )
        scored = [t for t in tuning[method] if t["final_val_success"] is not None]
        best = max(
            scored,
            key=lambda t: (t["final_val_success"], t["mean_val_success_after_start"] or 0.0),
            default=tuning[method][0],
        )
        chosen[method] = best["setting"]
    results["tuning"] = tuning
    results["chosen_settings"] = {m: {**s, "run_name": _setting_name(s)} for m, s in chosen.items()}
    return chosen


def _final_runs(
    p: Profile,
    args: argparse.Namespace,
    work: Path,
    seeds: list[int],
    sft: dict[int, Path],
    chosen: dict[str, dict[str, float]],
    results: dict[str, Any],
) -> tuple[dict[str, dict[int, Any]], dict[str, dict[int, Path]]]:
    """Every seed with each method's chosen setting (the tuning seed's run is reused, not redone)."""
    commands = results["setup"]["commands"]
    jobs = [(s, m) for s in seeds for m in METHODS]
    done = _in_parallel(args, [partial(_train, p, args, work, s, m, chosen[m], sft[s], commands) for s, m in jobs])
    final_runs: dict[str, dict[int, Any]] = {m: {} for m in METHODS}
    final_models: dict[str, dict[int, Path]] = {m: {} for m in METHODS}
    for (s, method), run in zip(jobs, done):
        final_models[method][s] = run / "final"
        if not args.dry_run:
            final_runs[method][s] = _summarise_run(run, p.steps)
    results["final_runs"] = final_runs
    return final_runs, final_models


def _final_evals(
    p: Profile,
    args: argparse.Namespace,
    work: Path,
    seeds: list[int],
    sft: dict[int, Path],
    final_models: dict[str, dict[int, Path]],
    results: dict[str, Any],
) -> dict[str, dict[int, Any]]:
    """The test split, read here only: SFT only and every method's final model, every seed."""
    jobs = []
    for s in seeds:
        models = {"sft_only": sft[s], **{m: final_models[m][s] for m in METHODS}}
        for arm, model in models.items():
            unfinished = arm != "sft_only" and not _train_done(model.parent, p.steps)
            if not args.dry_run and (unfinished or not (model / "config.json").is_file()):
                continue  # a run cut by its time budget is evaluated once a later call has finished it
            steps = "" if arm == "sft_only" else f"-steps{p.steps}"  # a longer run later is a new evaluation
            target = work / f"seed{s}" / f"test-{arm}{steps}-{p.test_tasks}tasks.json"
            jobs.append((arm, s, partial(_final_eval, args, model, target, p.test_tasks, results["setup"]["commands"])))
    evals: dict[str, dict[int, Any]] = {a: {} for a in ARMS}
    for (arm, s, _), got in zip(jobs, _in_parallel(args, [call for _, _, call in jobs])):
        if got is not None:
            evals[arm][s] = got
    return evals


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    if args.recompute:  # no model: every statistic from the committed outcomes
        return recompute_cli(Path(args.out), FAMILIES, args.family, args.name, args.quick)
    _configure(args.config, args.family or "game24")
    if args.evaluate:
        return evaluate_model(*args.evaluate, tasks=args.eval_tasks, threads=args.threads)
    if args.build_base:
        return build_base(args.build_base)
    args.demo_policy = args.demo_policy or FAMILY.demo_policy
    p = FAMILY.quick if args.quick else FAMILY.full
    args.jobs = args.jobs or max(1, (os.cpu_count() or 1) // max(args.threads, 1))
    if args.steps or args.test_tasks:
        from dataclasses import replace

        p = replace(p, steps=args.steps or p.steps, test_tasks=args.test_tasks or p.test_tasks)
    seeds = list(args.seeds or p.seeds)
    suffix = "_quick" if args.quick else ""
    name = args.name or f"{FAMILY.stem}{suffix}"
    work = Path(args.work or ROOT / "runs" / name)
    out_dir = Path(args.out)
    est = _estimate(p, seeds, args.jobs)
    sys.stderr.write(
        f"learning proof ({'quick' if args.quick else 'full'}): seeds {seeds}, {est['sft_runs']} SFT runs, "
        f"{est['train_runs']} train runs of {p.steps} steps ({len(_grid(p))}-setting grid per method), "
        f"{est['test_evaluations']} test evaluations on {p.test_tasks} tasks; estimated "
        f"{est['estimated_hours']:.1f} h on an idle 2-core CPU\n"
    )
    commands: dict[str, Any] = {}
    results: dict[str, Any] = {
        "setup": {
            "quick": args.quick,
            "family": FAMILY.key,
            "demo_policy": args.demo_policy,
            "env_id": ENV_ID,
            "env_kwargs": ENV_KWARGS,
            "config_file": CONFIG,
            "profile": p.__dict__,
            "seeds": seeds,
            "grid": _grid(p),
            "threads": args.threads,
            "jobs": args.jobs,
            "max_minutes_per_phase": args.max_minutes,
            "cpu_count": os.cpu_count(),
            "load_avg_start": os.getloadavg(),
            "versions": _versions(),
            "git_commit": _git("rev-parse", "HEAD"),
            "git_dirty": bool(_git("status", "--porcelain", "--", "agents", "agentflow_env", "perf")),
            "estimate": est,
            "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "commands": commands,
        }
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    previous = out_dir / f"{name}.json"
    if previous.is_file() and not args.dry_run:  # a resumed proof keeps what earlier calls ran and measured
        try:
            old = json.loads(previous.read_text(encoding="utf-8"))["setup"]
            commands.update(old.get("commands", {}))
            results["setup"]["invocations"] = [*old.get("invocations", []), old.get("started_utc")]
        except (ValueError, KeyError, TypeError):
            pass

    def save() -> None:
        if args.dry_run:
            return
        results["setup"]["load_avg_now"] = os.getloadavg()
        tmp = out_dir / f"{name}.json.tmp"
        tmp.write_text(json.dumps(results, indent=1), encoding="utf-8")
        tmp.replace(out_dir / f"{name}.json")

    # 1-2. SFT of the tuning seed (beside others); then the tuning grid (validation only), beside the other SFTs
    sft = {s: work / f"seed{s}" / "sft" for s in seeds}
    _base(args, work, commands)
    first = seeds[: max(1, args.jobs)]  # the tuning seed's SFT, beside as many other seeds' as there are jobs
    _in_parallel(args, [partial(_sft, p, args, work, s, commands) for s in first])
    _in_parallel(
        args,
        [
            *[partial(_sft, p, args, work, s, commands) for s in seeds if s not in first],  # longest first
            *_tuning_calls(p, args, work, seeds[0], sft[seeds[0]], commands),
        ],
    )
    chosen = _choose(p, args, work, seeds[0], results)
    save()
    results["sft"] = {}
    for s, folder in sft.items():
        if (folder / "sft_metrics.json").is_file():
            metrics = json.loads((folder / "sft_metrics.json").read_text(encoding="utf-8"))
            losses = metrics.get("losses") or [None]
            results["sft"][str(s)] = {
                k: metrics.get(k) for k in ("steps", "examples", "seconds", "max_response_tokens")
            }
            results["sft"][str(s)]["final_loss"] = losses[-1]
            if (metrics.get("max_response_tokens") or 0) > MAX_TOKENS:  # the policy could not say its demos
                sys.stderr.write(
                    f"warning: seed {s}'s demonstrations reach {metrics['max_response_tokens']} tokens but "
                    f"rollouts stop at max_new_tokens={MAX_TOKENS}; raise it in {CONFIG}\n"
                )

    # 3. final runs at equal rollouts; 4. the test split
    final_runs, final_models = _final_runs(p, args, work, seeds, sft, chosen, results)
    save()
    evals = _final_evals(p, args, work, seeds, sft, final_models, results)
    save()
    if args.dry_run:
        sys.stdout.write(json.dumps({"estimate": est, "commands": commands}, indent=1) + "\n")
        return 0

    # 5. every per-task outcome beside the summary; the statistics from those files alone (as --recompute does)
    written = write_outcomes(evals, seeds, out_dir / name / "outcomes")
    results.update(summarise_outcomes(out_dir / name / "outcomes", FAMILY))
    results["outcomes"] = {"folder": _rel(out_dir / name / "outcomes"), "packed": PACKED, "documents": written}
    results["complete"] = all(r["complete"] for runs in final_runs.values() for r in runs.values()) and all(
        s in evals[a] for a in ARMS for s in seeds
    )
    results["setup"]["finished_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    save()
    if results["statistics"]["arms"]:
        plot(results, out_dir / f"{name}.png", ENV_ID, ENV_KWARGS)
    summary = {
        a: {
            "test_success_mean": v["mean_over_seeds"]["mean"],
            "ci95": [v["mean_over_seeds"]["lo"], v["mean_over_seeds"]["hi"]],
            "mean_turns": v["mean_turns"],
            "share_successes_multi_turn": v["share_successes_multi_turn"],
        }
        for a, v in results["statistics"]["arms"].items()
    }
    sys.stdout.write(json.dumps({"summary": summary, "verdicts": results["statistics"]["verdicts"]}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
