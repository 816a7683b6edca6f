"""``agentflow-env train --config FILE [--key value ...]``: run the Flow-GRPO learner from a config file.

Every config field is also a ``--field`` option (its docstring is the help); options override the file.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

from agents.flow_grpo_config import add_config_arguments, config_from_args

__all__ = ["configure_train"]


def configure_train(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Train the planner with Flow-GRPO. Settings come from --config (TOML or JSON, keys are "
        "the options below) and are overridden by the options given here."
    )
    parser.add_argument("--config", metavar="FILE", help="a .toml or .json config (e.g. agents/configs/*.toml)")
    parser.add_argument("--print-config", action="store_true", help="print the resolved config as JSON and exit")
    parser.add_argument("--log-level", default="WARNING", help="logging level (DEBUG, INFO, WARNING, ...)")
    add_config_arguments(parser)
    parser.set_defaults(func=_run_train)


def _run_train(args: argparse.Namespace) -> int:
    from agentflow_env.error import ConfigError

    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.WARNING),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        config = config_from_args(args)
    except ConfigError as exc:
        sys.stderr.write(f"agentflow-env train: {exc}\n")
        return 2
    if args.print_config:
        sys.stdout.write(json.dumps(config.to_dict(), indent=2) + "\n")
        return 0
    from agents.flow_grpo import train

    learner = train(config)
    summary = {
        "step": learner.step,
        "output_dir": str(learner.out),
        "metrics": str(learner.out / "metrics.jsonl"),
        "model": str(learner.out / "final"),
    }
    sys.stdout.write(json.dumps(summary) + "\n")
    return 0
