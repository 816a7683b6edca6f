"""The ``eval`` and ``leaderboard`` subcommands of ``agentflow-env`` (argument parsing and terminal output).

The work is done by :mod:`leaderboards.runner` and :mod:`leaderboards.render`; this module only wires them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from leaderboards.places import default_out, default_results, default_site
from leaderboards.science_cli import (
    add_compare,
    add_dry_run_flags,
    add_ledger_flag,
    dry_run_estimate,
    dry_run_roles,
    show_extras,
)

__all__ = ["configure_eval", "configure_leaderboard", "default_out", "default_results", "default_site", "print_result"]


def configure_eval(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``agentflow-env eval``: one flag per :class:`~leaderboards.runner.EvalConfig` field,
    generated from it, plus the command's own ``--dry-run``, ``--latency`` and ``--json``."""
    from agentflow_env.config import add_dataclass_flags
    from agents.policies.registry import POLICY_SPECS
    from leaderboards.protocol import list_protocols
    from leaderboards.runner import EvalConfig

    specs = "; ".join(f"{k}: {v}" for k, v in POLICY_SPECS.items())
    extra = {"policy": f"({specs})", "protocol": f"({', '.join(list_protocols())})"}
    add_dataclass_flags(parser, EvalConfig, help_extra=extra)
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the run plan and a time estimate (see --latency), run nothing",
    )
    parser.add_argument(
        "--latency", type=float, default=1.5, help="seconds per LLM call, for the --dry-run estimate (default 1.5)"
    )
    parser.add_argument("--json", action="store_true", help="print the summary as JSON instead of a table")
    add_dry_run_flags(parser)
    parser.set_defaults(func=_run_eval)


def _run_eval(args: argparse.Namespace) -> int:
    import json

    from agentflow_env.config import flag_values
    from agentflow_env.error import AgentFlowError, ConfigError
    from leaderboards.runner import EvalConfig, dry_run, evaluate

    try:
        config = EvalConfig(**flag_values(args, EvalConfig))
        if args.dry_run and getattr(args, "sample_episodes", 0):
            sys.stdout.write(dry_run_estimate(config, args.sample_episodes, args.json) + "\n")
            return 0
        if args.dry_run:
            sys.stdout.write(dry_run(config, args.latency) + "\n" + dry_run_roles(config) + "\n")
            return 0
        result = evaluate(config)
    except ConfigError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("\ninterrupted: finished tasks are saved; run the same command again to resume\n")
        return 130
    except AgentFlowError as exc:  # an engine or tool failure mid-run: what finished is kept
        sys.stderr.write(
            f"error: {type(exc).__name__}: {exc}\nfinished tasks are saved; fix the cause and run "
            "the same command again to resume\n"
        )
        return 1
    if args.json:
        sys.stdout.write(json.dumps({"run": str(result.path), **result.summary()}, indent=2) + "\n")
    else:
        print_result(result)
    return 0


def print_result(result: Any) -> None:
    """A rich table: accuracy per benchmark with 95% Wilson intervals, then the paper's category averages."""
    from rich.console import Console
    from rich.table import Table

    rec = result.record
    table = Table(title=f"{rec.policy} on {rec.protocol}{' (fast)' if rec.fast else ''} [{rec.protocol_hash}]")
    for col, just in (
        ("benchmark", "left"),
        ("category", "left"),
        ("n", "right"),
        ("accuracy %", "right"),
        ("95% CI", "right"),
    ):
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    for env_id, s in result.scores().items():
        meta = rec.benchmarks.get(env_id, {})
        ci = f"[{100 * s.interval[0]:.1f}, {100 * s.interval[1]:.1f}]" if s.n else "-"
        table.add_row(
            meta.get("label", env_id), meta.get("category", ""), str(s.n), f"{100 * s.accuracy:.1f}" if s.n else "-", ci
        )
    table.add_section()
    for cat, acc in result.categories().items():
        table.add_row(f"{cat} avg", cat, "", f"{100 * acc:.1f}", "")
    overall = result.overall()
    if overall is not None:
        table.add_row("overall avg", "", str(len(result.outcomes)), f"{100 * overall:.1f}", "")
    console = Console(width=120)
    console.print(table)
    console.print(scoring_note(rec))
    paper = paper_settings_note(rec)
    if paper:
        console.print(paper, markup=False)  # fingerprints in [...] are text, not rich markup
    comparable = comparability_note(rec)
    if comparable:
        console.print(comparable, markup=False)
    tokens = result.tokens()
    console.print(
        f"wall time {rec.wall_s:.1f} s over {rec.sessions} session(s); tokens: "
        f"{tokens if tokens is not None else 'not reported by the policy'}; commit {rec.git_commit}"
        f"{' (dirty)' if rec.git_dirty else ''}; stored in {result.path}"
    )


def scoring_note(record: Any) -> str:
    """One line on how a run was scored, and whether its numbers compare with the paper's."""
    from leaderboards.protocol import load_protocol

    try:
        paper = load_protocol(record.protocol).mode == "paper"
    except Exception:  # a protocol no longer shipped
        paper = record.protocol.startswith("paper")
    scoring = record.scoring
    if scoring == "judge":
        return f"scored by the LLM judge {record.judge_engine or ''}".rstrip() + (
            " (the paper's metric)" if paper and getattr(record, "comparability", None) is None else ""
        )
    text = {"rule": "scored by rules (exact match, numeric equality, checkers)", "mixed": "scored partly by rules"}
    note = text.get(scoring, "scorer not recorded")
    return note + (": NOT comparable with the paper's LLM-judged numbers" if paper else "")


def comparability_note(record: Any) -> str | None:
    """One line on whether a paper-v2-style run used AgentFlow's own prompts and judge, or ``None``."""
    label = getattr(record, "comparability", None)
    if not label:
        return None
    used = getattr(record, "agentflow", None) or {}
    if used.get("source"):
        return (
            f"{label} (from {used['source']}: prompts [{used.get('prompt_fingerprint')}], "
            f"judge [{used.get('judge_fingerprint')}])"
        )
    return label


def paper_settings_note(record: Any) -> str | None:
    """One line on the paper flow's settings a run stored (prompt source, toolbox, sampling), or ``None``."""
    settings = getattr(record, "paper_settings", None)
    if not settings:
        return None
    planner = settings.get("planner_sampling") or {}
    knobs = ", ".join(f"{k} {v}" for k, v in planner.items() if v or k == "temperature")
    sends = settings.get("planner_sends") or {}
    missing = [k for k, v in sends.items() if v is False]
    return (
        f"paper flow: prompts {settings.get('prompts')} [{settings.get('prompt_fingerprint', '?')}], "
        f"toolbox {settings.get('toolbox')} "
        f"({', '.join(settings.get('tools') or {})}), planner sampling {settings.get('sampling')} ({knobs})"
        + (f"; the policy did NOT send AgentFlow's planner {', '.join(missing)}" if missing else "")
    )


def configure_leaderboard(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    render = sub.add_parser("render", help="write Markdown, HTML and bar charts from stored results")
    results_help = (
        "results folder to read; repeat to show several together (default: the stored references, plus "
        f"./{default_out()} when it exists)"
    )
    render.add_argument("--results", type=Path, action="append", default=None, help=results_help)
    render.add_argument(
        "--output-dir",
        type=Path,
        default=default_site(),
        help=f"site folder to (re)write (default: ./{default_site()})",
    )
    render.add_argument("--no-charts", action="store_true", help="skip the PNG charts (no matplotlib needed)")
    render.set_defaults(func=_run_render)
    show = sub.add_parser("show", help="print the stored results as tables")
    show.add_argument("--results", type=Path, action="append", default=None, help=results_help)
    show.add_argument("--protocol", default=None, help="only this protocol")
    add_ledger_flag(show)
    show.set_defaults(func=_run_show)
    add_compare(sub, results_help)

    def _help(args: argparse.Namespace) -> int:
        parser.print_help()
        return 2

    parser.set_defaults(func=_help)


def _require_results(args: argparse.Namespace) -> list[Path]:
    results = args.results or default_results()
    for folder in results:
        if not Path(folder).is_dir():
            from agentflow_env.error import ConfigError

            raise ConfigError(
                f"results folder {folder} does not exist; pass --results DIR (eval writes to --output-dir)"
            )
    return results


def _run_render(args: argparse.Namespace) -> int:
    from leaderboards.render import render_site

    results = _require_results(args)
    written = render_site(results, args.output_dir, charts=not args.no_charts)
    sys.stdout.write(f"wrote {len(written)} files to {args.output_dir} (open {args.output_dir / 'index.html'})\n")
    return 0


def _run_show(args: argparse.Namespace) -> int:
    from leaderboards.render import board_rows, group_by_protocol, markdown_table

    results = _require_results(args)
    for protocol, runs in group_by_protocol(results).items():
        if args.protocol and protocol != args.protocol:
            continue
        # plain Markdown, never wrapped, so it pastes into an issue or a README as is
        sys.stdout.write(f"## {protocol}\n\n{markdown_table(board_rows(runs))}\n\n")
        notes = [(run.record.name, paper_settings_note(run.record)) for run in runs]
        lines = [f"- {name}: {note}" for name, note in notes if note]
        if lines:
            sys.stdout.write("\n".join(lines) + "\n\n")
        sys.stdout.write(show_extras(args, runs))
    return 0
