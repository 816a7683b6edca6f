"""The policy-only control: a protocol re-run with every non-planner LLM on one fixed engine.

``agentflow-env eval --control-engine SPEC`` keeps the planner (the policy under test) and replaces the engine
of every module and LLM tool: in the paper flow query analysis, executor, verifier, final output and the LLM
tools (``tool_engine`` too, so a per-tool engine of the protocol is replaced as well); in the env's own modes
the ``llm`` executor, verifier and generator. ``--control-engine offline`` runs the env's offline stand-ins
instead (direct executor, rule verifier, the planner's own answer); the paper flow has none (its modules are
LLM calls), so there it takes an engine spec (a fixed small model, or a scripted engine). The judge stays the
protocol's: it grades, it does not help. The record keeps ``control`` so a comparison says which side it is;
the paired difference of a normal run and its control (``leaderboard compare``) is what the modules' and
tools' LLMs add on top of the planner.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from agentflow_env.error import ConfigError
from leaderboards.protocol import RunPlan

__all__ = ["OFFLINE", "OFFLINE_MODES", "apply_control", "control_record"]

OFFLINE = "offline"
OFFLINE_MODES = {"executor": "direct", "verifier": "rule", "generator": "planner"}


def control_record(plan: RunPlan, spec: str) -> dict[str, Any]:
    """What run.json keeps of a control run: the fixed engine, what it replaced, the protocol's own engine."""
    protocol = plan.protocol
    if protocol.flow == "paper":
        replaced = ["query_analysis", "executor", "verifier", "final_output", "LLM tools"]
    else:
        replaced = [k for k in OFFLINE_MODES if protocol.env.get(k) == "llm"]
    return {
        "engine": spec,
        "replaces": replaced or ["nothing: this protocol's modules and tools call no LLM"],
        "protocol_engine": protocol.env.get("engine"),
    }


def apply_control(plan: RunPlan, spec: str) -> RunPlan:
    """``plan`` with every non-planner LLM on ``spec`` (or, for ``offline``, the env's offline modules)."""
    spec = str(spec).strip()
    if not spec:
        raise ConfigError("--control-engine needs an engine spec, or 'offline' for the env's offline modules")
    paper = plan.protocol.flow == "paper"
    if spec == OFFLINE and paper:
        raise ConfigError(
            "--control-engine offline: the paper flow's modules are LLM calls and have no offline stand-in; "
            "give a fixed engine instead (e.g. --control-engine openai:MODEL@URL, or scripted:FILE.json)"
        )
    if spec != OFFLINE:
        from agentflow_env.engines import parse_spec

        parse_spec(spec)  # a malformed spec fails before anything runs
    benchmarks = []
    uses_llm = False
    for planned in plan.benchmarks:
        kwargs = dict(planned.make_kwargs)
        if paper:
            kwargs["engine"] = spec
            kwargs["tool_engine"] = spec
        elif spec == OFFLINE:
            kwargs.update(OFFLINE_MODES)
            kwargs.pop("engine", None)
        elif any(kwargs.get(k) == "llm" for k in OFFLINE_MODES):
            kwargs["engine"] = spec
            uses_llm = True
        benchmarks.append(dataclasses.replace(planned, make_kwargs=kwargs))
    env = dict(plan.env)
    engine: str | None = plan.engine
    if spec == OFFLINE:
        env.update(OFFLINE_MODES)
        env.pop("engine", None)
        engine = None
    elif paper or uses_llm:
        env["engine"] = spec
        engine = spec
    return dataclasses.replace(plan, benchmarks=tuple(benchmarks), env=env, engine=engine)
