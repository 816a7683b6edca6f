"""A small comparison of per-turn credit on the tiny LM: broadcast vs returns-to-go with the env's turn penalties.

Multi-turn Game of 24 (``max_turns=3``, the Calculator tool) from the tiny LM after a short SFT on the
scripted planner (a calculator check, then the answer). Three arms, same seeds and budget:

- ``broadcast``: the paper's outcome-only reward broadcast to every turn;
- ``broadcast+penalties``: ``turn_rewards`` (invalid action -0.1, tool error -0.05, repeated call -0.05)
  folded into the episode return, broadcast;
- ``returns_to_go+penalties``: the same penalties, each turn credited with its discounted return from
  there on (``advantage="returns_to_go"``, gamma 0.9).

Prints JSON (per arm: in the first and last quarter of the steps, the share of turns with an error (an
invalid action or a tool error), turns per episode and success; the final greedy validation success)
and writes it to ``experiments/results/turn_rewards_compare.json``.
This is a few minutes of CPU: a smoke-sized comparison, not a significance test.
``python experiments/turn_rewards_compare.py --quick`` (1 seed x 8 steps, about 2 minutes with the SFT on 2 busy cores);
the recorded result is ``--seeds 1 --steps 40`` (about 3 minutes).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# the env of the recorded comparison (results/turn_rewards_compare.json): kept, so a rerun measures the same env
ENV_ID = "agentflow/Gen-GameOf24-v1"
PENALTIES = {"invalid_action": -0.1, "tool_error": -0.05, "repeated_call": -0.05}
ARMS: dict[str, dict[str, Any]] = {
    "broadcast": {"advantage": "broadcast", "turn_rewards": None},
    "broadcast+penalties": {"advantage": "broadcast", "turn_rewards": PENALTIES},
    "returns_to_go+penalties": {"advantage": "returns_to_go", "gamma": 0.9, "turn_rewards": PENALTIES},
}


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="1 seed x 8 steps per arm")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--work", default="runs/turn_rewards_compare")
    p.add_argument("--sft-model", default="", help="reuse this SFT folder")
    p.add_argument("--out", default="", help="default: experiments/results/turn_rewards_compare[_quick].json")
    args = p.parse_args()
    name = "turn_rewards_compare_quick.json" if args.quick else "turn_rewards_compare.json"
    args.out = args.out or str(ROOT / "experiments" / "results" / name)
    return args


def _sft(work: Path) -> Path:
    out = work / "sft"
    if not (out / "config.json").is_file():
        cmd = [sys.executable, "-m", "agentflow_env.cli", "sft", "--env-id", ENV_ID]
        cmd += ["--env-kwargs", json.dumps({"max_turns": 3}), "--output-dir", str(out), "--episodes", "300"]
        cmd += ["--max-steps", "150", "--lr", "0.002", "--threads", "1", "--eval-episodes", "0", "--no-progress"]
        subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return out


def _run(arm: str, seed: int, steps: int, sft: Path, work: Path) -> dict[str, Any]:
    from agents.training.config import FlowGRPOConfig
    from agents.training.flow_grpo import train

    spec = dict(ARMS[arm])
    env_kwargs: dict[str, Any] = {"max_turns": 3}
    if spec.pop("turn_rewards"):
        env_kwargs["turn_rewards"] = PENALTIES
    out = work / f"{arm}-seed{seed}"
    cfg = FlowGRPOConfig(
        output_dir=str(out),
        env_id=ENV_ID,
        seed=seed,
        steps=steps,
        resume=False,
        init_from=str(sft),
        env_kwargs=env_kwargs,
        questions_per_step=4,
        group_size=4,
        max_new_tokens=40,
        learning_rate=2e-4,
        minibatch_size=64,
        eval_every=steps,
        eval_tasks=16,
        checkpoint_every=0,
        progress=False,
        tensorboard=False,
        threads=1,
        **spec,
    )
    started = time.perf_counter()
    train(cfg)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
    steps_rows = [r for r in rows if "rollout/reward" in r]
    k = max(1, len(steps_rows) // 4)

    def mean(key: str, part: list[dict[str, Any]]) -> float:
        return sum(r[key] for r in part) / len(part)

    keys = {"error_turns": "rollout/tool_error_rate", "turns": "rollout/turns", "success": "rollout/success_rate"}
    return {
        "first_quarter": {name: mean(key, steps_rows[:k]) for name, key in keys.items()},
        "last_quarter": {name: mean(key, steps_rows[-k:]) for name, key in keys.items()},
        "validation_success": rows[-1].get(f"eval/{ENV_ID.split('/')[-1]}/success"),
        "seconds": time.perf_counter() - started,
    }


def main() -> int:
    args = _args()
    seeds, steps = (1, 8) if args.quick else (args.seeds, args.steps)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    sft = Path(args.sft_model) if args.sft_model else _sft(work)
    results: dict[str, Any] = {
        "command": " ".join(["python", "experiments/turn_rewards_compare.py", *sys.argv[1:]]),
        "steps": steps,
        "seeds": seeds,
        "penalties": PENALTIES,
        "arms": {},
    }
    for arm in ARMS:
        results["arms"][arm] = [_run(arm, seed, steps, sft, work) for seed in range(seeds)]
    text = json.dumps(results, indent=2)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text + "\n", encoding="utf-8")
    sys.stdout.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
