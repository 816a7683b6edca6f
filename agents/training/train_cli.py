"""``agentflow-env train --config FILE|NAME [--key value ...]``: run the Flow-GRPO learner from a config file
(or a shipped config by name; ``--list-configs`` lists them).

Every config field is also a ``--kebab-case`` option (its docstring is the help; the config file spells
it in ``snake_case``); options override the file. A tqdm bar shows the step, the
rollout reward and the KL; ``--json`` prints the summary as JSON.

Data-parallel: ``torchrun --nproc-per-node N -m agentflow_env.cli train ...`` (or ``accelerate launch
--multi_gpu --num_processes N -m agentflow_env.cli train ...``) runs N ranks (see ``agents.training.data_parallel``).
"""

from __future__ import annotations

import argparse
import json
import sys

from agents.training.config import (
    add_config_arguments,
    config_from_args,
    describe_config,
    packaged_configs,
    packaged_configs_dir,
)

__all__ = ["configure_train"]


def configure_train(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Train the planner with Flow-GRPO. Settings come from --config (TOML or JSON, keys are "
        "the options below in snake_case) and are overridden by the options given here."
    )
    parser.add_argument(
        "--config",
        metavar="FILE|NAME",
        help="a .toml or .json config file, or the name of a shipped one (e.g. tiny-cpu-game24; see --list-configs)",
    )
    parser.add_argument("--list-configs", action="store_true", help="list the shipped configs and exit")
    parser.add_argument("--print-config", action="store_true", help="print the resolved config as JSON and exit")
    parser.add_argument("--log-level", default="WARNING", help="logging level (DEBUG, INFO, WARNING, ...)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument(
        "--dry-run", action="store_true", help="print rollouts, tokens and GPU-hours (at --throughput); train nothing"
    )
    parser.add_argument(
        "--throughput", type=float, default=2000.0, help="tokens per second per GPU, for --dry-run (default 2000)"
    )
    parser.add_argument("--dry-run-turns", type=int, default=None, help="turns per rollout (default: the budget)")
    add_config_arguments(parser)
    parser.set_defaults(func=_run_train)


def _run_train(args: argparse.Namespace) -> int:
    from agentflow_env.cli import require_env_id, route_logging

    route_logging(args.log_level)  # records print above the progress bar, never through it
    if args.list_configs:
        sys.stdout.write(_config_listing())
        return 0
    config = config_from_args(args)  # a ConfigError becomes one `error:` line (exit status 2)
    if args.print_config:
        sys.stdout.write(json.dumps(config.to_dict(), indent=2) + "\n")
        return 0
    require_env_id(config.env_id)
    if args.dry_run:
        from agents.training.dry_run import estimate_training, format_training_estimate

        estimate = estimate_training(config, args.throughput, args.dry_run_turns)
        sys.stdout.write((json.dumps(estimate, indent=2) if args.json else format_training_estimate(estimate)) + "\n")
        return 0
    from agents.training.flow_grpo import train

    learner = train(config)
    if not learner.dp.is_main:  # data-parallel (torchrun / accelerate launch): rank 0 reports
        return 0
    summary = {
        "step": learner.step,
        "output_dir": str(learner.out),
        "metrics": str(learner.out / "metrics.jsonl"),
        "model": str(learner.out / "final"),
    }
    if args.json:
        sys.stdout.write(json.dumps(summary) + "\n")
    else:
        sys.stdout.write(
            f"trained {learner.step} steps; model in {summary['model']}, metrics in {summary['metrics']}\n"
            f"evaluate it: agentflow-env eval --policy hf:{summary['model']}\n"
        )
    return 0


def _config_listing() -> str:
    shipped = packaged_configs()
    width = max((len(n) for n in shipped), default=0)
    lines = [f"shipped configs (in {packaged_configs_dir()}); use one with --config NAME:"]
    lines += [f"  {name:<{width}}  {describe_config(path)}" for name, path in shipped.items()]
    return "\n".join(lines) + "\n"
