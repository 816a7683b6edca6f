"""``agentflow-env list``: the registered env ids with their family, size, tools and source."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

__all__ = ["configure_list", "tool_display_names"]


def configure_list(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--no-size", action="store_true", help="skip computing task counts")
    parser.add_argument("--all", action="store_true", help="also list superseded versions (e.g. the -v0 ids)")
    parser.set_defaults(func=_run_list)


def tool_display_names(keys: Sequence[str]) -> list[str]:
    """The names actions use (``Tool Name: Python_Coder_Tool``) for tool registry keys (``python``)."""
    from agentflow_env.tools import available_tools

    table = available_tools()
    names = []
    for key in keys:
        name = key
        if key in table:
            module, _, attr = table[key].partition(":")
            try:
                name = str(getattr(getattr(importlib.import_module(module), attr), "name", key))
            except Exception:  # an optional tool whose module cannot import here keeps its key
                name = key
        names.append(name)
    return names


def _env_rows(with_size: bool, latest_only: bool = True) -> list[dict[str, object]]:
    import gymnasium as gym

    from agentflow_env.registration import registered_ids

    rows = []
    for env_id in registered_ids(latest_only=latest_only):
        spec = gym.spec(env_id)
        row: dict[str, object] = {"id": env_id, "entry_point": str(spec.entry_point)}
        bench = (spec.kwargs or {}).get("benchmark")
        if bench is not None and str(spec.entry_point).startswith("benchmarks."):
            try:
                from benchmarks.specs import get_spec

                bspec = get_spec(bench)
                row.update(
                    family=bspec.family,
                    source=bspec.source,
                    max_turns=bspec.max_turns,
                    tools=", ".join(tool_display_names(list(bspec.tools))),
                    tool_keys=list(bspec.tools),
                )
                if with_size and bspec.size is not None:
                    row["size"] = bspec.size()
            except Exception as exc:  # list must still show the other ids
                row["error"] = f"{type(exc).__name__}: {exc}"
        rows.append(row)
    return rows


def _run_list(args: argparse.Namespace) -> int:
    import json

    rows = _env_rows(with_size=not args.no_size, latest_only=not args.all)
    if args.json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title="agentflow-env registry (tools: the names actions use in 'Tool Name:')")
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
