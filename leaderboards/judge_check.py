"""``agentflow-env judge-check --judge-engine SPEC``: how far a judge can be trusted, before it grades a run.

The judge (this project's fenced judge, or AgentFlow's with ``--rules agentflow:PATH``) grades a labelled set
(:mod:`leaderboards.judge_labels`: gold answers and their variants that must pass, hedges and near misses that
must fail); the report gives its agreement with the labels (overall and per kind, with Wilson intervals),
its false accepts and false rejects, its agreement with each benchmark's rule scorer on the same candidates,
and the judge's fingerprint (engine spec, model, prompt hash), which every judged run also records.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentflow_env.error import ConfigError, EngineError
from agentflow_env.scoring.intervals import wilson_interval
from leaderboards.judge_labels import MUST_PASS, LabelledAnswer, build_labelled_set, read_labelled_set

__all__ = ["check_judge", "configure", "format_report"]


def _rule_scorers(items: Sequence[LabelledAnswer], data_dir: str | None) -> dict[str, Any]:
    """Each benchmark's own (rule) scorer."""
    import gymnasium as gym

    import agentflow_env  # noqa: F401

    scorers = {}
    for env_id in dict.fromkeys(i.env_id for i in items):
        kwargs: dict[str, Any] = {"data_dir": data_dir} if data_dir and "Gen-" not in env_id else {}
        try:
            env = gym.make(env_id, disable_env_checker=True, **kwargs)
        except Exception:  # a benchmark whose data is not here: no rule comparison for it
            continue
        scorers[env_id] = env.unwrapped.scorer  # type: ignore[attr-defined]
        env.close()
    return scorers


def _share(hits: int, n: int) -> dict[str, Any]:
    lo, hi = wilson_interval(hits, n)
    return {"agree": hits, "n": n, "rate": hits / n if n else None, "ci95": [lo, hi]}


def check_judge(
    judge_engine: str, items: Sequence[LabelledAnswer], rules: str = "builtin", data_dir: str | None = None
) -> dict[str, Any]:
    """The judge's verdict on every item, summarised (see the module doc)."""
    from agentflow_env.scoring import make_scorer
    from agentflow_env.scoring.fingerprint import judge_fingerprint

    if not items:
        raise ConfigError("the labelled set is empty")
    judge = make_scorer("judge", judge_engine=judge_engine, rules=rules)
    rule = _rule_scorers(items, data_dir)
    rows = []
    for item in items:
        try:
            verdict = judge(item.candidate, item.task) >= 0.5
        except EngineError as exc:
            raise EngineError(f"the judge failed on {item.env_id} {item.kind} ({exc}); nothing is reported") from exc
        scorer = rule.get(item.env_id)
        rule_pass = scorer(item.candidate, item.task) >= 0.5 if scorer is not None else None
        rows.append(
            {"env_id": item.env_id, "kind": item.kind, "label": item.label, "judge": verdict, "rule": rule_pass}
        )
    by_kind = {}
    for kind in dict.fromkeys(r["kind"] for r in rows):
        these = [r for r in rows if r["kind"] == kind]
        by_kind[kind] = _share(sum(r["judge"] == r["label"] for r in these), len(these))
    ruled = [r for r in rows if r["rule"] is not None]
    engine = getattr(judge, "engine", None)
    close = getattr(engine, "close", None)
    if callable(close):
        close()
    return {
        "judge": judge_fingerprint(judge),
        "items": len(rows),
        "labels": _share(sum(r["judge"] == r["label"] for r in rows), len(rows)),
        "by_kind": by_kind,
        "false_accepts": sum(r["judge"] and not r["label"] for r in rows),
        "false_rejects": sum(r["label"] and not r["judge"] for r in rows),
        "rules": _share(sum(r["judge"] == r["rule"] for r in ruled), len(ruled)),
        "rules_vs_labels": _share(sum(r["rule"] == r["label"] for r in ruled), len(ruled)),
        "disagreements": [r for r in rows if r["judge"] != r["label"]][:50],
        "must_pass_kinds": list(MUST_PASS),
    }


def format_report(report: dict[str, Any]) -> str:
    def pct(share: dict[str, Any]) -> str:
        if not share["n"]:
            return "n/a"
        lo, hi = share["ci95"]
        return f"{100 * share['rate']:.1f}% ({share['agree']}/{share['n']}, 95% CI {100 * lo:.1f}-{100 * hi:.1f})"

    j = report["judge"] or {}
    lines = [
        f"judge {j.get('engine')} (model {j.get('model')}, {j.get('rules')} prompt {j.get('prompt_hash')})",
        f"agreement with the labels: {pct(report['labels'])}",
    ]
    for kind, share in report["by_kind"].items():
        must = "must pass" if kind in report["must_pass_kinds"] else "must fail"
        lines.append(f"  {kind} ({must}): {pct(share)}")
    lines.append(f"false accepts {report['false_accepts']}, false rejects {report['false_rejects']}")
    lines.append(f"agreement with the rule scorers: {pct(report['rules'])}")
    lines.append(f"(the rule scorers' own agreement with the labels: {pct(report['rules_vs_labels'])})")
    return "\n".join(lines)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--judge-engine", required=True, help="engine spec of the judge to check")
    parser.add_argument(
        "--rules", default="builtin", help="builtin (this project's judge) or agentflow:PATH (AgentFlow's grading)"
    )
    parser.add_argument(
        "--data-dir",
        default=None,
        help="the AgentFlow test sets to build the labelled set from (default $AGENTFLOW_DATA_DIR; "
        "neither: this project's generated families)",
    )
    parser.add_argument("--labels", type=Path, default=None, help="a labelled set written by leaderboards.judge_labels")
    parser.add_argument("--tasks-per-benchmark", type=int, default=3, help="tasks per benchmark (default 3)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--output", type=Path, default=None, help="also write the JSON report here")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    import os

    data_dir = args.data_dir or os.environ.get("AGENTFLOW_DATA_DIR") or None
    try:
        if args.tasks_per_benchmark < 1:
            raise ConfigError(f"--tasks-per-benchmark must be at least 1, got {args.tasks_per_benchmark}")
        items = (
            read_labelled_set(args.labels) if args.labels else build_labelled_set(data_dir, args.tasks_per_benchmark)
        )
        report = check_judge(args.judge_engine, items, rules=args.rules, data_dir=data_dir)
    except ConfigError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    except EngineError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    report["labelled_set"] = str(args.labels) if args.labels else (data_dir or "generated families")
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    sys.stdout.write((json.dumps(report, indent=2) if args.json else format_report(report)) + "\n")
    return 0
