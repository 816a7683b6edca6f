"""A run's ledger in ``run.json``: calls, tokens and seconds by role per benchmark, and how the board shows it.

The modules', tools' and judge's calls are tagged where they call their engines
(:mod:`agentflow_env.engines.ledger`); the planner's are counted here, per finished episode, from what the
policy returned (one call per turn; tokens as the policy reported them, else estimated from the observation and
action text, and counted in ``estimated_calls``; seconds the episode waited for its actions).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agentflow_env.engines.ledger import NAMED_ROLES, ROLES, Ledger, Tally, enter_benchmark, estimate_tokens

__all__ = [
    "enter_benchmark",
    "judge_warning",
    "ledger_rows",
    "ledger_table",
    "observation_tokens",
    "record_planner",
    "role_totals",
]


def observation_tokens(obs: Any) -> int:
    """The estimated prompt tokens of one planner observation (used when the policy reports no usage)."""
    return estimate_tokens(obs)


def record_planner(ledger: Ledger | None, env_id: str, acts: Iterable[Any], seconds: float) -> None:
    """Add one finished episode's planner calls.

    ``acts`` are its turns' ``(action, tokens[, prompt estimate[, unread reply]])``.
    """
    if ledger is None:
        return
    tally = Tally(seconds=float(seconds))
    for act in acts:
        tally.calls += 1
        counts = act[1] if len(act) > 1 else None
        if isinstance(counts, dict):
            tally.prompt_tokens += int(counts.get("prompt", 0))
            tally.completion_tokens += int(counts.get("completion", 0))
        else:
            tally.estimated_calls += 1
            tally.prompt_tokens += int(act[2]) if len(act) > 2 else 0
            tally.completion_tokens += estimate_tokens(act[0])
    ledger.add(env_id, "planner", None, tally)


def role_totals(ledger: dict[str, Any] | None, benchmarks: Iterable[str] | None = None) -> dict[str, Tally]:
    """Totals over benchmarks (all, or ``benchmarks``) per row label: ``planner``, ``modules:NAME``,
    ``tools:NAME``, ``judge``."""
    out: dict[str, Tally] = {}
    wanted = set(benchmarks) if benchmarks is not None else None
    for env_id, roles in (ledger or {}).items():
        if wanted is not None and env_id not in wanted:
            continue
        for label, tally in _rows_of(roles):
            out.setdefault(label, Tally()).add(tally)
    return dict(sorted(out.items(), key=lambda kv: (_role_order(kv[0]), kv[0])))


def _rows_of(roles: dict[str, Any]) -> list[tuple[str, Tally]]:
    rows: list[tuple[str, Tally]] = []
    for role in ROLES:
        value = roles.get(role)
        if not value:
            continue
        if role in NAMED_ROLES:
            rows.extend((f"{role}:{name}", Tally.from_dict(t)) for name, t in value.items())
        else:
            rows.append((role, Tally.from_dict(value)))
    return rows


def _role_order(label: str) -> int:
    return ROLES.index(label.split(":", 1)[0]) if label.split(":", 1)[0] in ROLES else len(ROLES)


def ledger_rows(record: Any) -> list[tuple[str, str, Tally]]:
    """(benchmark label, role row, tally) for each benchmark of a record's ledger, then ``all`` benchmarks."""
    ledger = getattr(record, "ledger", None) or {}
    rows: list[tuple[str, str, Tally]] = []
    for env_id, roles in ledger.items():
        label = str((record.benchmarks.get(env_id) or {}).get("label", env_id))
        rows.extend((label, row, tally) for row, tally in _rows_of(roles))
    if len(ledger) > 1:
        rows.extend(("all", row, tally) for row, tally in role_totals(ledger).items())
    return rows


def ledger_table(record: Any) -> str:
    """The ledger as a Markdown table (a line saying there is none for records older than the ledger)."""
    rows = ledger_rows(record)
    if not rows:
        return f"{record.name}: no ledger (a run.json older than the ledger, or a reported row)"
    lines = [
        f"{record.name}: LLM calls by role",
        "",
        "| benchmark | role | calls | prompt tokens | completion tokens | seconds | tokens estimated |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for label, role, t in rows:
        estimated = f"{t.estimated_calls} calls" if t.estimated_calls else ""
        lines.append(
            f"| {label} | {role} | {t.calls} | {t.prompt_tokens} | {t.completion_tokens} | {t.seconds:.2f} "
            f"| {estimated} |"
        )
    control = getattr(record, "control", None)
    if control:
        lines.append("")
        lines.append(f"policy-only control: every non-planner LLM ran on {control.get('engine')}")
    return "\n".join(lines)


def judge_warning(records: Iterable[Any]) -> str | None:
    """A warning when the judged runs of one board used different judges (by fingerprint, else engine spec)."""
    seen: dict[str, list[str]] = {}
    for record in records:
        if getattr(record, "scoring", "") not in ("judge", "mixed"):
            continue
        judges = getattr(record, "judges", None) or {}
        if judges:
            keys = {_judge_key(v) for v in judges.values()}
        else:
            keys = {f"engine {getattr(record, 'judge_engine', None)} (no fingerprint recorded)"}
        for key in keys:
            seen.setdefault(key, []).append(record.name)
    if len(seen) <= 1:
        return None
    parts = "; ".join(f"{key}: {', '.join(sorted(set(names)))}" for key, names in sorted(seen.items()))
    return f"warning: the judged runs here used different judges ({parts}); their scores are not like for like"


def _judge_key(fingerprint: Any) -> str:
    if isinstance(fingerprint, dict):
        return f"{fingerprint.get('engine')} model {fingerprint.get('model')} prompt {fingerprint.get('prompt_hash')}"
    return str(fingerprint)
