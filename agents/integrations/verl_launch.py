"""Launch the paper's training run on verl: the shipped ``flow_grpo`` config (AgentFlow's train/config.yaml,
field by field) with the data, model and GPU count filled in.

    python -m agents.integrations.verl_launch --gpus 8 --train-files data/train.parquet --val-files data/val.parquet
    python -m agents.integrations.verl_launch ... --dry-run          # print the command, run nothing

Extra ``key=value`` arguments are passed to verl as Hydra overrides (they win over the config).
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["CONFIG_DIR", "verl_command"]

CONFIG_DIR = Path(__file__).resolve().parent / "verl_configs"


def verl_command(
    train_files: str,
    val_files: str,
    model: str = "Qwen/Qwen2.5-7B-Instruct",
    gpus: int = 8,
    overrides: Sequence[str] = (),
) -> list[str]:
    """The ``python -m verl.trainer.main_ppo`` command line of one run."""
    return [
        sys.executable,
        "-m",
        "verl.trainer.main_ppo",
        "--config-path",
        str(CONFIG_DIR),
        "--config-name",
        "flow_grpo",
        f"data.train_files={train_files}",
        f"data.val_files={val_files}",
        f"actor_rollout_ref.model.path={model}",
        f"trainer.n_gpus_per_node={gpus}",
        *overrides,
    ]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m agents.integrations.verl_launch", description=__doc__.splitlines()[0])
    ap.add_argument("--train-files", required=True, help="verl rows (python -m agents.integrations.verl_data)")
    ap.add_argument("--val-files", required=True, help="verl rows of the validation set (AgentFlow: AIME24)")
    ap.add_argument("--model", default="Qwen/Qwen2.5-7B-Instruct", help="the planner to train (BASE_MODEL)")
    ap.add_argument("--gpus", type=int, default=8, help="GPUs on this node (N_GPUS)")
    ap.add_argument("--dry-run", action="store_true", help="print the command and exit")
    args, overrides = ap.parse_known_args(argv)
    bad = [o for o in overrides if "=" not in o or o.startswith("-")]
    if bad:
        ap.error(f"unexpected arguments {bad}; verl overrides look like key=value")
    command = verl_command(args.train_files, args.val_files, args.model, args.gpus, overrides)
    if args.dry_run:
        sys.stdout.write(shlex.join(command) + "\n")
        return 0
    env = {**os.environ, "AGENTFLOW_VERL_AGENT_LOOPS": str(CONFIG_DIR / "agent_loops.yaml")}
    return subprocess.call(command, env=env)


if __name__ == "__main__":
    sys.exit(main())
