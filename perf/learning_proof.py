"""Learning proof on CPU: tiny LM -> SFT on scripted demonstrations -> Flow-GRPO, against SFT only and
rejection-sampling fine-tuning (RFT) at equal rollouts; held-out test success curve as JSON and PNG.

Run: python perf/learning_proof.py [--minutes 15 --threads 2 --min-solutions 20]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ENV_ID = "agentflow/Gen-GameOf24-v0"


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--minutes", type=float, default=15.0, help="wall-clock budget of the Flow-GRPO phase")
    p.add_argument("--max-steps", type=int, default=200, help="cap on Flow-GRPO steps")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument(
        "--min-solutions",
        type=int,
        default=20,
        help="difficulty subset: puzzles with >= this many distinct solutions (more solutions = easier)",
    )
    p.add_argument("--sft-steps", type=int, default=300, help="SFT optimizer steps on the scripted demonstrations")
    p.add_argument("--sft-lr", type=float, default=3e-3, help="SFT peak learning rate")
    p.add_argument("--sft-model", default="", help="reuse this SFT output folder instead of training one")
    p.add_argument("--questions", type=int, default=8, help="B: questions per Flow-GRPO step")
    p.add_argument("--group-size", type=int, default=8, help="G: rollouts per question")
    p.add_argument("--lr", type=float, default=5e-4, help="learning rate of Flow-GRPO and RFT")
    p.add_argument("--temperature", type=float, default=1.0, help="rollout temperature")
    p.add_argument("--eval-every", type=int, default=10, help="evaluate on the test split every this many steps")
    p.add_argument("--max-new-tokens", type=int, default=24)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--work", default=str(ROOT / "runs" / "learning_proof"), help="scratch folder (models, logs)")
    p.add_argument("--out", default=str(ROOT / "perf" / "results"), help="where the JSON and PNG go")
    p.add_argument("--skip-rft", action="store_true", help="only run Flow-GRPO (no RFT baseline)")
    return p.parse_args()


def _memoise_difficulty() -> None:
    """Each env of the subset re-counts the solutions of all 1,362 puzzles; count each puzzle once per process."""
    import functools

    from benchmarks.generated import game24

    if not hasattr(game24.count_solutions, "cache_info"):
        game24.count_solutions = functools.lru_cache(maxsize=None)(game24.count_solutions)


def _env_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    # one planner turn (answer directly), easy puzzles: learnable by a 2-layer model in minutes
    return {"max_turns": 1, "min_solutions": args.min_solutions}


def _demonstrations(args: argparse.Namespace) -> list[Any]:
    """Scripted-planner demonstrations on every train task of the subset (one turn each)."""
    import gymnasium as gym

    import agentflow_env  # noqa: F401
    from agents.baselines import ScriptedGameOf24Planner
    from agents.rollout import collect_rollouts
    from agents.sft import Demonstration

    env = gym.make(ENV_ID, split="train", **_env_kwargs(args))
    tasks = env.unwrapped.tasks
    ids = [t.id for t in tasks]
    env.close()
    fns = [lambda: gym.make(ENV_ID, split="train", tasks=tasks, **_env_kwargs(args)) for _ in range(8)]
    trajs = collect_rollouts(
        fns, ScriptedGameOf24Planner(), task_ids=ids, seed=args.seed, record_samples=False, env_id=ENV_ID
    )
    return [
        Demonstration(t.prompt, t.action, traj.task_id, t.turn) for traj in trajs if traj.success for t in traj.turns
    ]


def _sft(args: argparse.Namespace, work: Path) -> tuple[Path, dict[str, Any]]:
    from agents.sft import SFTConfig, train_sft
    from agents.tiny_lm import tiny_lm_path

    out = work / "sft"
    demos = _demonstrations(args)
    started = time.perf_counter()
    cfg = SFTConfig(
        env_id=ENV_ID,
        out=str(out),
        base=str(tiny_lm_path()),
        epochs=100,
        max_steps=args.sft_steps,
        batch_size=16,
        lr=2e-3,
        eval_episodes=0,
        seed=args.seed,
        torch_threads=args.threads,
    )
    result = train_sft(cfg, demos=demos)
    info = {
        "demonstrations": len(demos),
        "steps": result.steps,
        "final_loss": result.losses[-1],
        "seconds": time.perf_counter() - started,
    }
    return out, info


def _config(args: argparse.Namespace, work: Path, name: str, sft_path: Path) -> Any:
    from agents.flow_grpo_config import FlowGRPOConfig

    return FlowGRPOConfig(
        output_dir=str(work / name),
        init_from=str(sft_path),
        seed=args.seed,
        steps=args.max_steps,
        resume=False,
        env_kwargs=_env_kwargs(args),
        eval_split="test",
        eval_tasks=10_000,
        questions_per_step=args.questions,
        group_size=args.group_size,
        max_new_tokens=args.max_new_tokens,
        temperature=1.0,
        learning_rate=args.lr,
        minibatch_size=args.questions * args.group_size,
        ppo_epochs=1,
        beta=0.001,
        threads=args.threads,
        progress=False,
        tensorboard=False,
        checkpoint_every=0,
    )


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _run_method(
    args: argparse.Namespace, work: Path, name: str, sft_path: Path, max_rollouts: int | None, log: logging.Logger
) -> dict[str, Any]:
    """Flow-GRPO (``name='flow_grpo'``) or RFT on the same rollout stream; test success every few steps."""
    from agents.flow_grpo import FlowGRPOLearner

    learner = FlowGRPOLearner(_config(args, work, name, sft_path))
    wall0, cpu0 = _clock()
    curve = []
    rollouts = 0

    def record() -> None:
        ev = learner.evaluate(split="test")
        wall, cpu = _clock()
        point = {
            "step": learner.step,
            "rollouts": rollouts,
            "test_success": ev[f"eval/{ENV_ID.split('/')[1]}/success"],
            "wall_s": wall - wall0,
            "cpu_s": cpu - cpu0,
        }
        curve.append(point)
        log.info("%s %s", name, point)

    record()
    train_rewards = []
    while learner.step < args.max_steps:
        if max_rollouts is not None and rollouts >= max_rollouts:
            break
        if max_rollouts is None and time.perf_counter() - wall0 > args.minutes * 60:
            break
        metrics = learner.train_step() if name == "flow_grpo" else _rft_step(learner)
        learner.log(metrics)
        rollouts += args.questions * args.group_size
        train_rewards.append(metrics["rollout/reward"])
        if learner.step % args.eval_every == 0:
            record()
    if curve[-1]["step"] != learner.step:
        record()
    test_tasks = len(learner.tasks("test"))
    learner.close()
    return {
        "curve": curve,
        "train_reward": train_rewards,
        "steps": learner.step,
        "rollouts": rollouts,
        "test_tasks": test_tasks,
    }


def _rft_step(learner: Any) -> dict[str, float]:
    """Rejection-sampling fine-tuning on the same rollouts: keep the successful turns, maximise their likelihood."""
    import numpy as np
    import torch

    from agents.flow_grpo import _step_seed, masked_mean, pack_samples, token_logprobs

    cfg = learner.config
    torch.manual_seed(_step_seed(cfg.seed, learner.step))
    rng = np.random.default_rng([cfg.seed, learner.step])
    n_tasks = len(learner.tasks(cfg.train_split))
    questions = [int(q) for q in rng.choice(n_tasks, size=cfg.questions_per_step, replace=False)]
    ro = learner.collect(cfg.train_split, questions, cfg.group_size, seed=_step_seed(cfg.seed, learner.step))
    keep = [s for r, turns in zip(ro.rewards, ro.turns) if r >= 1.0 for s in turns if s.response_ids]
    loss_value = 0.0
    if keep:
        learner.model.train()
        learner.optimizer.zero_grad(set_to_none=True)
        batch = pack_samples(keep, learner.pad_id, learner.device)
        logp, _ = token_logprobs(learner.model, batch)
        loss = -masked_mean(logp, batch["mask"]).mean()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(learner.model.parameters(), cfg.max_grad_norm)
        learner.optimizer.step()
        loss_value = float(loss.detach())
    learner.step += 1
    rewards = np.asarray(ro.rewards)
    return {
        "rollout/reward": float(rewards.mean()),
        "rollout/success_rate": float((rewards >= 1).mean()),
        "losses/nll": loss_value,
        "rollout/kept": float(len(keep)),
    }


def _plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for name, label in (("flow_grpo", "Flow-GRPO"), ("rft", "Rejection-sampling FT")):
        if name in results:
            c = results[name]["curve"]
            ax.plot([p["rollouts"] for p in c], [100 * p["test_success"] for p in c], marker="o", label=label)
    sft = 100 * results["sft_only"]["test_success"]
    ax.axhline(sft, color="gray", linestyle="--", label=f"SFT only ({sft:.1f}%)")
    ax.set_xlabel("training rollouts (episodes)")
    ax.set_ylabel("held-out test success (%)")
    ax.set_title(f"Gen-GameOf24 (>= {results['setup']['min_solutions']} solutions, 1 turn), tiny LM on CPU")
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
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    log = logging.getLogger("learning_proof")
    for name in ("transformers", "httpx", "agents.flow_grpo"):
        logging.getLogger(name).setLevel(logging.WARNING)
    import torch

    torch.set_num_threads(args.threads)
    _memoise_difficulty()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.sft_model:
        sft_path, sft_info = Path(args.sft_model), {"reused": args.sft_model}
    else:
        sft_path, sft_info = _sft(args, work)
    log.info("SFT: %s", sft_info)
    results: dict[str, Any] = {
        "setup": {
            "env_id": ENV_ID,
            "env_kwargs": _env_kwargs(args),
            "min_solutions": args.min_solutions,
            "questions_per_step": args.questions,
            "group_size": args.group_size,
            "lr": args.lr,
            "max_new_tokens": args.max_new_tokens,
            "minutes_budget": args.minutes,
            "threads": args.threads,
            "sft": sft_info,
            "cpu_count": os.cpu_count(),
            "load_avg_start": os.getloadavg(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "git_commit": _git_commit(),
        },
    }
    results["flow_grpo"] = _run_method(args, work, "flow_grpo", sft_path, None, log)
    results["sft_only"] = {"test_success": results["flow_grpo"]["curve"][0]["test_success"]}
    if not args.skip_rft:
        results["rft"] = _run_method(args, work, "rft", sft_path, results["flow_grpo"]["rollouts"], log)
    curve = results["flow_grpo"]["curve"]
    best = max(p["test_success"] for p in curve)
    results["summary"] = {
        "sft_test_success": curve[0]["test_success"],
        "flow_grpo_final_test_success": curve[-1]["test_success"],
        "flow_grpo_best_test_success": best,
        "gain_points_final": 100 * (curve[-1]["test_success"] - curve[0]["test_success"]),
        "rft_final_test_success": results["rft"]["curve"][-1]["test_success"] if "rft" in results else None,
        "flow_grpo_wall_s": curve[-1]["wall_s"],
        "flow_grpo_cpu_s": curve[-1]["cpu_s"],
        "load_avg_end": os.getloadavg(),
        "test_tasks": results["flow_grpo"]["test_tasks"],
    }
    (out / "learning_proof.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    _plot(results, out / "learning_proof.png")
    sys.stdout.write(json.dumps(results["summary"]) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
