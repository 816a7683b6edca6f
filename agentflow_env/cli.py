"""The ``agentflow-env`` command: subcommands are looked up in a table and imported only when run."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# name -> ("module:configure", help). ``configure(parser)`` adds arguments and sets ``func``.
COMMANDS: dict[str, tuple[str, str]] = {
    "list": ("agentflow_env.cli:configure_list", "list the registered env ids with size and source"),
    "eval": ("leaderboards.cli:configure_eval", "evaluate a policy on a leaderboard protocol (resumable)"),
    "leaderboard": ("leaderboards.cli:configure_leaderboard", "render or show the leaderboard from stored results"),
    "play": ("agentflow_env.play:configure", "play an env in the terminal: you are the planner"),
    "train": ("agents.train_cli:configure_train", "train the planner with Flow-GRPO from a config file"),
    "build-index": ("agentflow_env.tools.wikipedia:configure", "build a BM25 index folder from a Wikipedia dump"),
    "sft": ("agents.sft:configure", "fine-tune a planner LM (the tiny LM by default) on scripted demonstrations"),
    "serve": ("agentflow_env.engines.server:configure", "serve an engine (hf:, vllm:, ...) over the OpenAI HTTP API"),
    "env-server": ("agentflow_env.env_server:configure", "serve reset/step of any agentflow/* id over HTTP"),
}


def configure_list(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--no-size", action="store_true", help="skip computing task counts")
    parser.set_defaults(func=_run_list)


def _env_rows(with_size: bool) -> list[dict[str, object]]:
    import gymnasium as gym

    from agentflow_env.registration import registered_ids

    rows = []
    for env_id in registered_ids():
        spec = gym.spec(env_id)
        row: dict[str, object] = {"id": env_id, "entry_point": str(spec.entry_point)}
        bench = (spec.kwargs or {}).get("benchmark")
        if bench is not None and str(spec.entry_point).startswith("benchmarks."):
            try:
                from benchmarks.specs import get_spec

                bspec = get_spec(bench)
                row.update(
                    family=bspec.family, source=bspec.source, max_turns=bspec.max_turns, tools=", ".join(bspec.tools)
                )
                if with_size and bspec.size is not None:
                    row["size"] = bspec.size()
            except Exception as exc:  # list must still show the other ids
                row["error"] = f"{type(exc).__name__}: {exc}"
        rows.append(row)
    return rows


def _run_list(args: argparse.Namespace) -> int:
    import json

    rows = _env_rows(with_size=not args.no_size)
    if args.json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title="agentflow-env registry")
    for col in ("id", "family", "size", "max_turns", "tools", "source"):
        table.add_column(col)
    for row in rows:
        table.add_row(
            *(
                str(row.get(c, row.get("error", "")) if c != "size" else row.get("size", "?"))
                for c in ("id", "family", "size", "max_turns", "tools", "source")
            )
        )
    Console(width=200).print(table)
    return 0


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentflow-env", description="AgentFlow environments, agents and leaderboards"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (target, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text)
        if name == command:  # only the chosen command's module is imported
            module, _, attr = target.partition(":")
            getattr(importlib.import_module(module), attr)(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(command if command in COMMANDS else None)
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 2 if command is None else 1
    import agentflow_env  # noqa: F401  (registers the env ids)

    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
