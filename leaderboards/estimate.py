"""Cost estimates before a run: ``eval --dry-run --sample-episodes N`` plays N episodes per benchmark (the first
tasks, into a temporary folder, with the run's own policy and engines), reads their ledger, and scales each
benchmark's per-episode calls, tokens and seconds by role to the run's episode count. Wall time is the
sample's wall time per episode, scaled to the episodes and to the run's concurrency (a rough bound: latency
under load differs). A sample of the first tasks is not a random sample: the estimate says so.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path
from typing import Any

from agentflow_env.error import ConfigError
from leaderboards.ledger import role_totals

__all__ = ["calls_by_role", "estimate_eval", "format_estimate", "format_roles", "scale_ledger"]


def scale_ledger(ledger: dict[str, Any], played: dict[str, int], planned: dict[str, int]) -> dict[str, dict[str, Any]]:
    """Per benchmark and role row, the sample's tallies times ``planned / played`` episodes."""
    out: dict[str, dict[str, Any]] = {}
    for env_id, episodes in planned.items():
        n = played.get(env_id, 0)
        if n == 0:
            continue
        factor = episodes / n
        for row, tally in role_totals(ledger, [env_id]).items():
            out.setdefault(env_id, {})[row] = {
                "calls": round(tally.calls * factor),
                "prompt_tokens": round(tally.prompt_tokens * factor),
                "completion_tokens": round(tally.completion_tokens * factor),
                "seconds": round(tally.seconds * factor, 2),
                "estimated_token_calls": round(tally.estimated_calls * factor),
            }
    return out


def _total(scaled: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    total: dict[str, dict[str, float]] = {}
    for rows in scaled.values():
        for row, t in rows.items():
            acc = total.setdefault(row, {k: 0 for k in t})
            for k, v in t.items():
                acc[k] += v
    return total


def estimate_eval(config: Any, sample_episodes: int) -> dict[str, Any]:
    """The run's calls, tokens and seconds by role, from ``sample_episodes`` played episodes per benchmark."""
    from leaderboards.runner import _EnvPool, _policies, _units, default_concurrency, evaluate, plan_run
    from leaderboards.store import RunRecord

    if sample_episodes < 1:
        raise ConfigError(f"--sample-episodes must be at least 1, got {sample_episodes}")
    plan = plan_run(config)
    pool = _EnvPool(plan)
    try:
        units = _units(plan, pool, RunRecord(name="", protocol=plan.name, protocol_hash=plan.protocol.hash, policy=""))
    finally:
        pool.close()
    planned: dict[str, int] = {}
    for unit in units:
        planned[unit.env_id] = planned.get(unit.env_id, 0) + 1
    per_trial = len(plan.protocol.seeds) * plan.protocol.samples_per_task
    tasks = max(1, -(-sample_episodes // per_trial))  # the sample plays whole tasks (every trial of each)
    with tempfile.TemporaryDirectory(prefix="agentflow-dry-run-") as tmp:
        sample = dataclasses.replace(
            config,
            out=Path(tmp),
            name="dry-run-sample",
            fast=True,
            fast_tasks={e: tasks for e in plan.env_ids},
            overwrite=True,
            progress=False,
        )
        result = evaluate(sample)
    played: dict[str, int] = {}
    for o in result.outcomes:
        played[o.env_id] = played.get(o.env_id, 0) + 1
    scaled = scale_ledger(result.record.ledger or {}, played, planned)
    total_planned, total_played = sum(planned.values()), max(sum(played.values()), 1)
    concurrency = config.concurrency or default_concurrency(plan, _policies(config, plan))
    sample_conc = min(concurrency, total_played)
    wall = result.record.wall_s * total_planned / total_played * sample_conc / max(concurrency, 1)
    return {
        "protocol": plan.name,
        "policy": config.policy,
        "episodes": planned,
        "sample_episodes": played,
        "by_benchmark": scaled,
        "total": _total(scaled),
        "wall_s": round(wall, 1),
        "concurrency": concurrency,
        "note": "from the first tasks of each benchmark (not a random sample); seconds are the time callers waited",
    }


def format_estimate(estimate: dict[str, Any]) -> str:
    lines = [
        f"estimate for {estimate['policy']} on {estimate['protocol']}: {sum(estimate['episodes'].values())} episodes, "
        f"from {sum(estimate['sample_episodes'].values())} sample episodes",
        "",
        "| role | calls | prompt tokens | completion tokens | LLM seconds |",
        "|---|---:|---:|---:|---:|",
    ]
    for row, t in estimate["total"].items():
        lines.append(
            f"| {row} | {t['calls']:.0f} | {t['prompt_tokens']:.0f} | {t['completion_tokens']:.0f} "
            f"| {t['seconds']:.1f} |"
        )
    lines.append("")
    lines.append(f"wall time about {estimate['wall_s']:.0f} s at {estimate['concurrency']} episodes in flight")
    lines.append(f"note: {estimate['note']}")
    return "\n".join(lines)


def calls_by_role(plan: Any, turns: float) -> dict[str, float]:
    """LLM calls of one episode of ``turns`` planner turns, by role, from the protocol alone (no sample)."""
    judged = 1.0 if plan.judge_engine else 0.0
    if plan.protocol.flow == "paper":
        rows = {
            "planner": turns,
            "modules:query_analysis": 1.0,
            "modules:executor": turns,
            "modules:verifier": turns,
            "modules:final_output": 1.0,
            "tools (LLM tools; at most)": turns,
        }
    else:
        env = plan.env
        rows = {"planner": turns}
        for name, per in (("executor", turns), ("verifier", turns), ("generator", 1.0)):
            if env.get(name) == "llm":
                rows[f"modules:{name}"] = per
    if judged:
        rows["judge"] = judged
    return rows


def format_roles(plan: Any) -> str:
    """The protocol's LLM calls per episode by role, typical (2 turns) and worst case (the turn budget)."""
    worst = float(plan.protocol.max_turns)
    typical, most = calls_by_role(plan, 2.0), calls_by_role(plan, worst)
    lines = ["  LLM calls per episode by role (typical 2 turns / worst case):"]
    lines += [f"    {row}: {typical[row]:g} / {most[row]:g}" for row in most]
    lines.append("  tokens by role: add --sample-episodes N to measure them on N episodes per benchmark")
    return "\n".join(lines)
