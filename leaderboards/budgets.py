"""A run's time budget in results: which clock it counted on, how many episodes it cut, and the board's marks.

A protocol's ``[env] budget_clock`` names the clock (``agentflow_env.clock``): ``"wall"`` (the default,
AgentFlow's own: the episode's wall time, which grows when many calls share a server) or ``"tokens"`` (fixed
charges per LLM call by its tokens and per tool call, at ``[env.clock_rates]``: the same at any concurrency).
``run.json`` records the clock (:func:`clock_record`) and, per benchmark, how many episodes the budget cut
(:func:`budget_cut_counts`; each task line says ``budget_cut``). The board marks a row whose budget cut episodes,
and a row counted on another clock than the protocol's (:func:`budget_marks`): such rows are not like for like.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from agentflow_env.clock import BUDGET_CLOCKS, TokenRates
from agentflow_env.error import ConfigError

__all__ = ["budget_cut_counts", "budget_marks", "check_clock", "clock_of", "clock_record", "hashed_env"]


def check_clock(env: Mapping[str, Any], source: str) -> None:
    """A protocol's ``[env] budget_clock`` and ``[env.clock_rates]``, checked (a ConfigError names the file)."""
    clock = env.get("budget_clock", "wall")
    if clock not in BUDGET_CLOCKS:
        raise ConfigError(f"{source}: [env] budget_clock={clock!r}; choose one of {', '.join(BUDGET_CLOCKS)}")
    rates = env.get("clock_rates")
    if rates is None:
        return
    if clock != "tokens":
        raise ConfigError(f'{source}: [env.clock_rates] applies to budget_clock = "tokens" only')
    try:
        TokenRates.of(rates)
    except ConfigError as exc:
        raise ConfigError(f"{source}: [env] {exc}") from None


def hashed_env(env: Mapping[str, Any]) -> dict[str, Any]:
    """``[env]`` as the protocol hash counts it: ``budget_clock = "wall"`` (the default) stated or not, the same."""
    out = dict(env)
    if out.get("budget_clock") == "wall" and "clock_rates" not in out:
        del out["budget_clock"]
    return out


def clock_record(env: Mapping[str, Any]) -> dict[str, Any]:
    """What ``run.json`` records of the budget: its clock, ``time_budget_s`` and (token clock) the rates."""
    clock = str(env.get("budget_clock", "wall"))
    out: dict[str, Any] = {"clock": clock, "time_budget_s": env.get("time_budget_s")}
    if clock == "tokens":
        out["rates"] = TokenRates.of(env.get("clock_rates")).to_dict()
    return out


def budget_cut_counts(tasks: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Per env id, the episodes whose budget cut them, over a run's task lines (each key counted once)."""
    counts: dict[str, int] = {}
    seen: set[Any] = set()
    for task in tasks:
        key = task.get("key")
        if key in seen:
            continue
        seen.add(key)
        env_id = str(task.get("env_id"))
        counts[env_id] = counts.get(env_id, 0) + (1 if task.get("budget_cut") else 0)
    return counts


def clock_of(record: Any) -> str:
    """The clock a run's budget counted on: its record's, else ``"wall"`` (reported rows, older records)."""
    clock = getattr(record, "clock", None)
    return str(clock.get("clock", "wall")) if isinstance(clock, Mapping) else "wall"


def budget_marks(runs: Sequence[Any], protocol_clock: str | None = None) -> dict[str, list[tuple[str, str]]]:
    """``(short, full)`` marks per run name: the episodes its budget cut, and a clock other than the board's
    (``protocol_clock``, else the clock most measured rows used)."""
    clocks = {run.record.name: clock_of(run.record) for run in runs}
    measured = [clocks[run.record.name] for run in runs if run.record.kind == "measured"]
    main = protocol_clock or (max(set(measured), key=measured.count) if measured else "wall")
    marks: dict[str, list[tuple[str, str]]] = {}
    for run in runs:
        rec, row = run.record, []
        cut = sum(1 for o in run.outcomes if getattr(o, "budget_cut", None))
        if cut:
            budget = (rec.clock or {}).get("time_budget_s") if isinstance(rec.clock, Mapping) else None
            limit = f" of {budget:g} s" if isinstance(budget, (int, float)) else ""
            row.append(
                (
                    f"budget cut {cut}",
                    f"the {clocks[rec.name]}-clock time budget{limit} cut {cut} of {len(run.outcomes)} episodes",
                )
            )
        if clocks[rec.name] != main:
            row.append(
                (
                    f"{clocks[rec.name]} clock, not comparable",
                    f"budget counted on the {clocks[rec.name]} clock, not the {main} clock of the other rows: "
                    "not ranked like for like",
                )
            )
        marks[rec.name] = row
    return marks
