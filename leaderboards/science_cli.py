"""The evaluation-science commands' wiring: ``leaderboard compare``, ``leaderboard show --ledger`` and the judge
warning of ``show``, and ``eval --dry-run --sample-episodes N``. The work is in :mod:`leaderboards.compare`,
:mod:`leaderboards.ledger` and :mod:`leaderboards.estimate`; this module only parses and prints.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_compare", "add_dry_run_flags", "add_ledger_flag", "dry_run_estimate", "dry_run_roles", "show_extras"]


def add_compare(sub: Any, results_help: str) -> None:
    """``leaderboard compare RUN_A RUN_B``."""
    p = sub.add_parser(
        "compare",
        help="paired difference of two runs on their shared tasks (McNemar / paired bootstrap, interval, p, MDE)",
    )
    p.add_argument("run_a", help="run A: its folder, or its name under --results")
    p.add_argument("run_b", help="run B (the difference is B minus A)")
    p.add_argument("--protocol", default=None, help="the protocol of runs given by name (when names repeat)")
    p.add_argument("--results", type=Path, action="append", default=None, help=results_help)
    p.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples (default 10000)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.set_defaults(func=_run_compare)


def _run_compare(args: argparse.Namespace) -> int:
    from agentflow_env.error import ConfigError
    from leaderboards.compare import compare_runs, find_run, format_comparison
    from leaderboards.places import default_results

    results = args.results or default_results()
    try:
        if args.resamples < 100:
            raise ConfigError(f"--resamples must be at least 100, got {args.resamples}")
        a = find_run(args.run_a, results, args.protocol)
        b = find_run(args.run_b, results, args.protocol)
        comparison = compare_runs(a, b, resamples=args.resamples, seed=args.seed)
    except ConfigError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    if args.json:
        sys.stdout.write(json.dumps(comparison.to_dict(), indent=2) + "\n")
    else:
        sys.stdout.write(format_comparison(comparison) + "\n")
    return 0


def add_ledger_flag(show: argparse.ArgumentParser) -> None:
    show.add_argument(
        "--ledger", action="store_true", help="also print each run's LLM calls, tokens and seconds by role"
    )


def show_extras(args: argparse.Namespace, runs: list[Any]) -> str:
    """What ``show`` prints after a protocol's table: the judge warning, and with ``--ledger`` the ledgers."""
    from leaderboards.ledger import judge_warning, ledger_table

    parts = []
    warning = judge_warning(run.record for run in runs)
    if warning:
        parts.append(warning)
    if getattr(args, "ledger", False):
        parts.extend(ledger_table(run.record) for run in runs if run.record.kind == "measured")
    return "\n\n".join(parts) + ("\n\n" if parts else "")


def add_dry_run_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sample-episodes",
        type=int,
        default=0,
        help="with --dry-run: play this many episodes per benchmark (first tasks, into a temporary folder) and "
        "estimate the run's calls, tokens and time by role from them (0: the protocol's arithmetic only)",
    )


def dry_run_estimate(config: Any, sample_episodes: int, as_json: bool) -> str:
    from leaderboards.estimate import estimate_eval, format_estimate

    estimate = estimate_eval(config, sample_episodes)
    return json.dumps(estimate, indent=2) if as_json else format_estimate(estimate)


def dry_run_roles(config: Any) -> str:
    from leaderboards.estimate import format_roles
    from leaderboards.runner import plan_run

    return format_roles(plan_run(config))
