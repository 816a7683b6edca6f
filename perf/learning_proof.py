"""Learning proof on CPU: tiny LM -> SFT on scripted demonstrations -> Flow-GRPO, against SFT only and
rejection-sampling fine-tuning (RFT) at equal rollouts; held-out test success curve as JSON and PNG.

Every phase is one ``agentflow-env`` command (printed and stored in the JSON), so a figure can be
reproduced by hand: ``sft``, then ``train`` with agents/configs/learning-proof-game24.toml, then the
same ``train`` with ``--algorithm rft --steps <Flow-GRPO's steps>`` (same rollouts per step).

Run: python perf/learning_proof.py [--minutes 15 --threads 2]
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
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "agents" / "configs" / "learning-proof-game24.toml"


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=str(CONFIG), help="the Flow-GRPO config (RFT uses it with algorithm=rft)")
    p.add_argument("--minutes", type=float, default=15.0, help="wall-clock budget of the Flow-GRPO run")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument(
        "--sft-env-kwargs",
        default='{"max_turns": 1}',
        help="env kwargs of the SFT demonstrations (JSON); default: one-turn episodes over the whole train split",
    )
    p.add_argument("--sft-episodes", type=int, default=2000, help="scripted demonstration episodes (tasks cycle)")
    p.add_argument("--sft-steps", type=int, default=600, help="SFT optimizer steps on the scripted demonstrations")
    p.add_argument("--sft-lr", type=float, default=2e-3, help="SFT peak learning rate")
    p.add_argument("--sft-model", default="", help="reuse this SFT output folder instead of training one")
    p.add_argument("--work", default=str(ROOT / "runs" / "learning_proof"), help="scratch folder (models, logs)")
    p.add_argument("--out", default=str(ROOT / "perf" / "results"), help="where the JSON and PNG go")
    p.add_argument("--name", default="learning_proof", help="file stem of the JSON and PNG")
    p.add_argument("--skip-rft", action="store_true", help="only run Flow-GRPO (no RFT baseline)")
    return p.parse_args()


def _cli() -> list[str]:
    return [sys.executable, "-m", "agentflow_env.cli"]


def _run(cmd: list[str], log: Path) -> float:
    """Run one phase, its output teed to ``log``; fails loudly with the command to rerun."""
    shown = shlex.join(["agentflow-env", *cmd[len(_cli()) :]])
    sys.stderr.write(f"$ {shown}\n")
    started = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with log.open("w", encoding="utf-8") as fh:
        proc = subprocess.run(cmd, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT, env=env)
    if proc.returncode:
        raise SystemExit(f"phase failed (exit {proc.returncode}); see {log}; command: {shown}")
    return time.perf_counter() - started


def _config(path: str) -> dict[str, Any]:
    from agents.flow_grpo_config import load_config

    return load_config(path).to_dict()


def _curve(run_dir: Path, cfg: dict[str, Any]) -> dict[str, Any]:
    """The held-out test curve and training rewards from a run's metrics.jsonl."""
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    key = f"eval/{cfg['env_id'].split('/', 1)[-1]}/success"
    per_step = cfg["questions_per_step"] * cfg["group_size"]
    curve = [
        {
            "step": r["step"],
            "rollouts": r["step"] * per_step,
            "test_success": r[key],
            "wall_s": r.get("time/elapsed_s"),
        }
        for r in records
        if key in r
    ]
    train = [r for r in records if "rollout/reward" in r]
    return {
        "curve": curve,
        "steps": max((r["step"] for r in records), default=0),
        "rollouts": max((r["step"] for r in records), default=0) * per_step,
        "train_reward": [r["rollout/reward"] for r in train],
        "wall_s": train[-1]["time/elapsed_s"] if train else 0.0,
        "mean_step_s": sum(r["perf/step_s"] for r in train) / max(len(train), 1),
    }


def _plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for name, label in (("flow_grpo", "Flow-GRPO"), ("rft", "Rejection-sampling FT")):
        if name in results:
            c = results[name]["curve"]
            ax.plot([p["rollouts"] for p in c], [100 * p["test_success"] for p in c], marker="o", ms=3, label=label)
    sft = 100 * results["sft_only"]["test_success"]
    ax.axhline(sft, color="gray", linestyle="--", label=f"SFT only ({sft:.1f}%)")
    kw = results["setup"]["config"]["env_kwargs"]
    ax.set_xlabel("training rollouts (episodes)")
    ax.set_ylabel("held-out test success (%)")
    ax.set_title(f"Gen-GameOf24 {kw}, tiny LM on {results['setup']['threads']} CPU threads")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def _git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    except OSError:
        return ""


def main() -> int:
    args = _args()
    sys.path.insert(0, str(ROOT))
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if Path(args.config).resolve().is_relative_to(ROOT):  # commands run in ROOT: show them with short paths
        args.config = os.path.relpath(Path(args.config).resolve(), ROOT)
    cfg = _config(str(ROOT / args.config))
    commands: dict[str, str] = {}
    setup: dict[str, Any] = {
        "config_file": args.config,
        "config": cfg,
        "minutes_budget": args.minutes,
        "threads": args.threads,
        "cpu_count": os.cpu_count(),
        "load_avg_start": os.getloadavg(),
        "python": platform.python_version(),
        "git_commit": _git_commit(),
        "commands": commands,
    }

    # 1. SFT on scripted one-turn demonstrations over the train split (all difficulties: more arithmetic to copy)
    sft = Path(args.sft_model) if args.sft_model else work / "sft"
    if not args.sft_model:
        cmd = [
            *_cli(),
            "sft",
            "--env",
            cfg["env_id"],
            "--env-kwargs",
            json.dumps(json.loads(args.sft_env_kwargs)),
            "--out",
            str(sft),
            "--episodes",
            str(args.sft_episodes),
            "--epochs",
            "100",
            "--max-steps",
            str(args.sft_steps),
            "--lr",
            str(args.sft_lr),
            "--threads",
            str(args.threads),
            "--json",
        ]
        commands["sft"] = shlex.join(["agentflow-env", *cmd[3:]])
        setup["sft_seconds"] = _run(cmd, work / "sft.log")
    setup["sft"] = json.loads((sft / "sft_metrics.json").read_text()) if (sft / "sft_metrics.json").is_file() else {}
    setup["sft"].pop("losses", None)

    # 2. Flow-GRPO for the time budget, evaluated on the held-out test split as it goes
    base = [*_cli(), "train", "--config", args.config, "--init_from", str(sft), "--threads", str(args.threads)]
    grpo_dir = work / "flow_grpo"
    cmd = [*base, "--output_dir", str(grpo_dir), "--max_minutes", str(args.minutes)]
    commands["flow_grpo"] = shlex.join(["agentflow-env", *cmd[3:]])
    _run(cmd, work / "flow_grpo.log")
    results: dict[str, Any] = {"setup": setup, "flow_grpo": _curve(grpo_dir, cfg)}
    curve = results["flow_grpo"]["curve"]
    results["sft_only"] = {"test_success": curve[0]["test_success"]}

    # 3. RFT on as many rollouts (same B x G per step, same number of steps, no time budget)
    if not args.skip_rft:
        rft_dir = work / "rft"
        steps = str(results["flow_grpo"]["steps"])
        cmd = [*base, "--output_dir", str(rft_dir), "--algorithm", "rft", "--steps", steps, "--max_minutes", "0"]
        commands["rft"] = shlex.join(["agentflow-env", *cmd[3:]])
        _run(cmd, work / "rft.log")
        results["rft"] = _curve(rft_dir, cfg)

    best = max(p["test_success"] for p in curve)
    results["summary"] = {
        "sft_test_success": curve[0]["test_success"],
        "flow_grpo_final_test_success": curve[-1]["test_success"],
        "flow_grpo_best_test_success": best,
        "gain_points_final": 100 * (curve[-1]["test_success"] - curve[0]["test_success"]),
        "rft_final_test_success": results["rft"]["curve"][-1]["test_success"] if "rft" in results else None,
        "rft_best_test_success": max(p["test_success"] for p in results["rft"]["curve"]) if "rft" in results else None,
        "flow_grpo_steps": results["flow_grpo"]["steps"],
        "flow_grpo_rollouts": results["flow_grpo"]["rollouts"],
        "flow_grpo_wall_s": results["flow_grpo"]["wall_s"],
        "load_avg_end": os.getloadavg(),
    }
    (out / f"{args.name}.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    _plot(results, out / f"{args.name}.png")
    sys.stdout.write(json.dumps(results["summary"]) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
