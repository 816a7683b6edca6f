"""Runs a policy over a protocol: the protocol resolves once into a :class:`~leaderboards.protocol.RunPlan`, then
``concurrency`` episodes run in flight, each on its own (:mod:`agentflow_env.vector.scheduler`), resumable.

An HTTP planner (``concurrent_act``) is asked on each episode's own thread, one request per turn (its server
batches them); a local or stateful policy plays lock-step turns so a seeded run repeats. Each episode's
``time_budget_s`` clock counts only its own work, so scores do not depend on the concurrency.

Each finished episode appends its trajectory, then its outcome line; a rerun skips every unit whose
outcome line is on disk, so an interrupted evaluation never redoes finished tasks.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import shutil
import threading
import time
from collections import deque
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from agentflow_env.engines.ledger import Ledger
from agentflow_env.error import ConfigError
from agentflow_env.scoring.fingerprint import judge_fingerprint
from leaderboards.budgets import budget_cut_counts, clock_record
from leaderboards.config import EvalConfig
from leaderboards.control import apply_control, control_record
from leaderboards.episodes import EvalSession, normalize_actions, run_units
from leaderboards.group_commit import GroupCommit
from leaderboards.protocol import NOT_COMPARABLE, PlannerSetup, Protocol, RunPlan, WorkUnit, load_protocol
from leaderboards.retrieval import check_search_backends, collect_retrieval, tools_comparability
from leaderboards.store import (
    RUN_FILE,
    TASKS_FILE,
    TRAJECTORIES_FILE,
    EvalResult,
    RunRecord,
    git_state,
    load_run,
    lock_run_dir,
    read_tasks,
    write_json_atomic,
)

# EvalConfig lives in leaderboards.config; it is named here too, where callers have always imported it from
__all__ = [
    "EvalConfig",
    "build_env",
    "describe_scorer",
    "evaluate",
    "make_protocol_scorer",
    "normalize_actions",
    "plan_run",
    "run_plan",
]

logger = logging.getLogger(__name__)


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def build_env(
    plan: RunPlan,
    env_id: str,
    *,
    tasks: Any = None,
    trial_seed: int | None = None,
    scorer: Any = None,
    shared_engine: Any = None,
    tool_calling: bool = False,
) -> Any:
    """The env of one benchmark of ``plan``: its split, options, modes, turn budget and scorer.

    ``tasks`` reuses another instance's task source (loading or generating tasks once per benchmark and
    trial). ``trial_seed`` goes to the loader option the protocol names in ``trial_seed_option``.
    ``scorer`` is a ready scorer object (shared across envs); else one is built from the plan.
    ``shared_engine``: an engine object built from the plan's engine spec, given to the env instead of the spec
    (one HTTP client for every env of a run: building a client per env costs about 0.2 s of CPU).
    ``tool_calling``: the env in tool mode (plain content without a call is the final answer).
    """
    import gymnasium as gym

    planned = plan.benchmark(env_id)
    kwargs = plan.make_kwargs(env_id, trial_seed)
    if scorer is not None:
        kwargs["scorer"] = scorer
    elif planned.entry.scorer != "default":
        kwargs["scorer"] = make_protocol_scorer(plan, planned.entry.scorer)
    if tasks is not None:
        kwargs["tasks"] = tasks
    if shared_engine is not None and isinstance(kwargs.get("engine"), str):
        kwargs["engine"] = shared_engine
    env = gym.make(env_id, disable_env_checker=True, **kwargs)
    if tool_calling:
        from agents.policies.tool_calling import set_tool_mode

        set_tool_mode(env)
    return env


def make_protocol_scorer(plan: RunPlan, name: str) -> Any:
    """The scorer a protocol entry names; ``"judge"`` takes the plan's judge engine and ``[judge]`` options."""
    from agentflow_env.scoring import make_scorer

    if name != "judge":
        return make_scorer(name)
    if not plan.judge_engine:
        raise ConfigError(
            f'protocol {plan.name} scores with scorer = "judge" but names no judge engine: '
            '`--judge-engine SPEC` (e.g. openai:gpt-4o@https://api.openai.com/v1) or [judge] engine = "SPEC"'
        )
    return make_scorer("judge", judge_engine=plan.judge_engine, rules=plan.protocol.judge_rules, **plan.judge_options)


def describe_scorer(scorer: Any) -> str:
    """How a result records a scorer: ``judge:<engine spec>`` or ``rule:<scorer>``."""
    from agentflow_env.scoring import scorer_kind

    describe = getattr(scorer, "describe", None)
    if scorer_kind(scorer) == "judge":
        return describe() if callable(describe) else f"judge:{type(scorer).__name__}"
    return f"rule:{scorer!r}" if type(scorer).__repr__ is not object.__repr__ else f"rule:{type(scorer).__name__}"


class _EnvPool:
    """The run's envs per (env id, trial), reused episode after episode; a benchmark's envs close once its last
    episode ends.

    Envs of this process are borrowed from a shared :class:`~agentflow_env.vector.EnvPool` keyed by the env id
    and the trial; with ``--ray`` they live in Ray actors instead. When the protocol gives trial seeds to the
    loaders, each trial has its own task source (GPQA's option order differs per trial); otherwise every trial
    shares one. Scorers are built once per env id.
    """

    def __init__(self, plan: RunPlan):
        from agentflow_env.vector import EnvPool

        self.plan = plan
        self.lock = threading.RLock()  # the scorers, the engine and the Ray vectors
        self.judge_concurrency: int | None = None
        self.concurrency: int | None = None  # set: every env shares one engine allowing that many requests
        self._engine: Any = None
        self.ray: str | None = None  # set: episodes' envs live in Ray actors (agentflow_env.vector.ray)
        self.ray_workers: int | None = None
        self.tool_calling = False  # set: every env in tool mode (``--tool-calling``)
        # episodes in flight bound the envs built per key, so none given back is closed for room
        self.envs = EnvPool(self._build, max_idle=1 << 20)
        self._tasks: dict[tuple[str, int | None], Any] = {}  # the first env's task source, for its siblings
        self._vectors: dict[tuple[str, int | None], Any] = {}
        self.free: dict[tuple[str, int | None], list[Any]] = {}  # Ray proxies not in use
        self.all: dict[tuple[str, int | None], list[Any]] = {}  # Ray proxies
        self.scorers: dict[str, Any] = {}
        self.ledger: Ledger | None = None  # set: engine calls of the episodes are tallied here (run.json ledger)

    def _key(self, env_id: str, seed: int | None) -> tuple[str, int | None]:
        return env_id, self.plan.trial_key(env_id, seed)

    def scorer(self, env_id: str) -> Any:
        """The protocol entry's scorer, shared by every env of ``env_id`` (``None``: the benchmark's own)."""
        name = self.plan.benchmark(env_id).entry.scorer
        if name == "default":
            return None
        with self.lock:
            if env_id not in self.scorers:
                same = [v for e, v in self.scorers.items() if self.plan.benchmark(e).entry.scorer == name]
                if not same:
                    same = [make_protocol_scorer(self.plan, name)]
                    engine = getattr(same[0], "engine", None)  # the judge's own connection limit
                    if self.judge_concurrency and callable(getattr(engine, "set_concurrency", None)):
                        engine.set_concurrency(self.judge_concurrency)
                self.scorers[env_id] = same[0]
            return self.scorers[env_id]

    def acquire(self, env_id: str, seed: int | None = None) -> Any:
        key = self._key(env_id, seed)
        if not self.ray:
            return self.envs.borrow(env_id, trial=key[1])
        with self.lock:
            free = self.free.setdefault(key, [])
            return free.pop() if free else self._remote(key, env_id, seed)

    def _build(self, env_id: str, trial: int | None) -> Any:
        """A new env of ``(env_id, trial)``, sharing the task source of the key's first env (the pool's ``make``).
        Builds take turns, so the first one's tasks are there for the next."""
        with self.lock:
            env = build_env(
                self.plan,
                env_id,
                tasks=self._tasks.get((env_id, trial)),
                trial_seed=trial,
                scorer=self.scorer(env_id),
                shared_engine=self._engine_(),
                tool_calling=self.tool_calling,
            )
            self._tasks.setdefault((env_id, trial), env.unwrapped.tasks)
            return env

    def local(self, env_id: str, seed: int | None) -> Any:
        """An env of this process, to read a benchmark's tasks, scorer and settings (released by ``give_back``)."""
        if not self.ray:
            return self.acquire(env_id, seed)
        return build_env(self.plan, env_id, trial_seed=seed, scorer=self.scorer(env_id), tool_calling=self.tool_calling)

    def give_back(self, env_id: str, env: Any, seed: int | None) -> None:
        if self.ray:
            env.close()
        else:
            self.release(env_id, env, seed)

    def _remote(self, key: tuple[str, int | None], env_id: str, seed: int | None) -> Any:
        """The first of ``concurrency`` envs of ``key`` built in Ray actors (proxies that step them there)."""
        from agentflow_env.vector.ray import RayVectorEnv

        if key in self._vectors:
            raise RuntimeError(f"every remote env of {key} is in use; more episodes in flight than envs")
        n = max(self.concurrency or 1, 1)
        fns = [functools.partial(_remote_env, self.plan, env_id, seed, self.tool_calling) for _ in range(n)]
        workers = min(self.ray_workers or _ray_cpus(self.ray), n)
        vec = RayVectorEnv(fns, num_workers=workers, autoreset_mode="disabled", ray_init=_ray_init(self.ray))
        self._vectors[key] = vec
        self.all.setdefault(key, []).extend(vec.envs)
        self.free[key] = list(vec.envs[1:])
        return vec.envs[0]

    def _engine_(self) -> Any:
        """One engine for the modules of every env, when it is thread-safe (an HTTP client); else None."""
        if self.concurrency is None:
            return None
        if self._engine is None:
            spec = self.plan.engine
            if not isinstance(spec, str):
                self._engine = False
                return None
            from agentflow_env.engines import make_engine

            engine = make_engine(spec)
            if getattr(engine, "thread_safe", False) and callable(getattr(engine, "set_concurrency", None)):
                engine.set_concurrency(max(self.concurrency, getattr(engine, "concurrency", 1)))
                self._engine = engine
            else:
                self._engine = False
        return self._engine or None

    def release(self, env_id: str, env: Any, seed: int | None = None) -> None:
        if not self.ray:
            self.envs.give_back(env)
            return
        with self.lock:
            self.free.setdefault(self._key(env_id, seed), []).append(env)

    def close_env_id(self, env_id: str) -> None:
        self.envs.close_env_id(env_id)
        with self.lock:
            for key in [k for k in self.all if k[0] == env_id]:
                for env in self.all.pop(key, []):
                    env.close()
                self.free.pop(key, None)
                vec = self._vectors.pop(key, None)
                if vec is not None:
                    vec.close()
            for key in [k for k in self._tasks if k[0] == env_id]:
                del self._tasks[key]

    def close(self) -> None:
        self.envs.close()
        for env_id in {k[0] for k in self.all}:
            self.close_env_id(env_id)
        if self._engine:
            self._engine.close()


def _remote_env(plan: RunPlan, env_id: str, seed: int | None, tool_calling: bool = False) -> Any:
    """Builds one env of ``plan`` inside a Ray actor (with its own scorer and engine there)."""
    return build_env(plan, env_id, trial_seed=seed, tool_calling=tool_calling)


def _ray_init(address: str) -> dict[str, Any]:
    """``ray.init`` kwargs for ``--ray`` (used only when Ray is not initialised in this process yet)."""
    return {} if address == "local" else {"address": address}


def _ray_cpus(address: str) -> int:
    import ray

    if not ray.is_initialized():
        ray.init(include_dashboard=False, log_to_driver=False, **_ray_init(address))
    return max(int(ray.cluster_resources().get("CPU", 1)), 1)


def _policy_source(config: EvalConfig) -> dict[str, str] | None:
    """What code the policy spec named, by content hash (see ``agents.policies.registry.policy_source``)."""
    if config.policy_factory is not None:
        return None
    from agents.policies.registry import policy_source

    return policy_source(config.policy)


def _prepare_run_dir(
    config: EvalConfig, plan: RunPlan, retrieval: dict[str, Any] | None = None
) -> tuple[Path, RunRecord, RunRecord | None]:
    """The run folder, the record this session will write, and the stored record when resuming."""
    from agentflow_env import __version__

    protocol, planner = plan.protocol, plan.planner
    run_dir = Path(config.out) / protocol.name / config.run_name
    if config.overwrite and run_dir.exists():
        shutil.rmtree(run_dir)
    commit, dirty = git_state(config.code_dir)
    fresh = RunRecord(
        name=config.run_name,
        protocol=protocol.name,
        protocol_hash=protocol.hash,
        policy=config.policy,
        policy_source=_policy_source(config),
        fast=config.fast,
        package_version=__version__,
        git_commit=commit,
        git_dirty=dirty,
        seeds=list(protocol.seeds),
        samples_per_task=protocol.samples_per_task,
        max_turns=protocol.max_turns,
        env=dict(plan.env),
        sampling={**planner.sampling, **planner.extra_body},  # as the planner sends it (frequency penalty too)
        benchmarks={
            b.env_id: {"label": b.label, "category": b.category, "split": b.split} for b in protocol.benchmarks
        },
        started_at=_now(),
        notes=config.notes,
        judge_engine=plan.judge_engine,
        trial_seed_option=protocol.trial_seed_option,
        comparability=tools_comparability(protocol.comparability, retrieval),
        control=control_record(plan, config.control_engine) if config.control_engine else None,
        retrieval=retrieval,
        clock=clock_record(protocol.env),
    )
    if (run_dir / RUN_FILE).exists():
        old = load_run(run_dir).record
        clash = [
            f"{k}: stored {a!r}, now {b!r}"
            for k, a, b in (
                ("protocol_hash", old.protocol_hash, fresh.protocol_hash),
                ("policy", old.policy, fresh.policy),
                ("fast", old.fast, fresh.fast),
                ("engine", old.env.get("engine"), fresh.env.get("engine")),
                ("judge_engine", old.judge_engine, fresh.judge_engine),
                ("comparability", old.comparability, fresh.comparability),
                ("control", old.control, fresh.control),
            )
            if a != b
        ]
        if old.kind != "measured" or clash:
            raise ConfigError(
                f"{run_dir} holds a different run ({'; '.join(clash) or old.kind}); "
                "pass --name NEW to keep both or --overwrite to replace it"
            )
        fresh.started_at, fresh.wall_s, fresh.sessions = old.started_at, old.wall_s, old.sessions
        fresh.ledger = old.ledger
        if (old.git_commit, old.package_version) != (commit, fresh.package_version):
            fresh.notes = (fresh.notes + f" resumed across code versions (first {old.git_commit}).").strip()
        return run_dir, fresh, old
    return run_dir, fresh, None


def _units(plan: RunPlan, pool: _EnvPool, record: RunRecord) -> list[WorkUnit]:
    """Every episode of the run; records how each benchmark is scored in ``record.scorers`` and, in the paper
    flow, the env's ``paper_settings`` (prompt source, toolbox, tools, sampling; per benchmark how questions
    were built)."""
    units: list[WorkUnit] = []
    seed = plan.protocol.seeds[0]
    for entry in (b.entry for b in plan.benchmarks):
        env = pool.local(entry.env_id, seed)
        num = len(env.unwrapped.tasks)
        record.scorers[entry.env_id] = describe_scorer(env.unwrapped.scorer)
        judge = judge_fingerprint(env.unwrapped.scorer)
        if judge is not None:
            record.judges[entry.env_id] = judge
        settings = getattr(env.unwrapped, "paper_settings", None)
        if plan.protocol.flow == "paper" and isinstance(settings, dict):
            settings = dict(settings)
            questions = settings.pop("questions", None)
            if questions is not None:
                record.benchmarks.setdefault(entry.env_id, {})["questions"] = questions
            if record.paper_settings is None:
                record.paper_settings = settings
            elif settings != record.paper_settings:  # one toolbox and sampling for every benchmark, as in AgentFlow
                raise ConfigError(
                    f"{entry.env_id} runs with other paper settings than {plan.env_ids[0]}; "
                    "the paper flow uses one prompt source, toolbox and sampling for all benchmarks"
                )
        pool.give_back(entry.env_id, env, seed)
        units.extend(plan.units(entry.env_id, num))
    if plan.protocol.wants_agentflow_src:
        record.agentflow = _agentflow_fingerprints(plan.protocol, record, pool)
    return units


def _retrieval(plan: RunPlan, pool: _EnvPool) -> dict[str, Any] | None:
    """What answers each benchmark's search tools (:func:`leaderboards.retrieval.collect_retrieval`)."""
    seed = plan.protocol.seeds[0]
    envs = []
    for entry in (b.entry for b in plan.benchmarks):
        env = pool.local(entry.env_id, seed)
        envs.append((entry.env_id, env))
    try:
        return collect_retrieval(envs)
    finally:
        for env_id, env in envs:
            pool.give_back(env_id, env, seed)


def _agentflow_fingerprints(protocol: Protocol, record: RunRecord, pool: _EnvPool) -> dict[str, Any]:
    """Which AgentFlow text this run used: the checkout, the prompts' and the judge's fingerprints."""
    judges = {getattr(s, "fingerprint", None) for s in pool.scorers.values()} - {None}
    return {
        "source": protocol.agentflow_src,
        "prompts": (record.paper_settings or {}).get("prompts"),
        "prompt_fingerprint": (record.paper_settings or {}).get("prompt_fingerprint"),
        "judge": protocol.judge_rules,
        "judge_fingerprint": judges.pop() if len(judges) == 1 else sorted(judges) or None,
    }


def evaluate(config: EvalConfig) -> EvalResult:
    """Run (or resume) ``config.policy`` on ``config.protocol``; returns the stored result."""
    if config.concurrency is not None and config.concurrency < 1:
        raise ConfigError(f"concurrency must be at least 1, got {config.concurrency}")
    if config.batch_window_s < 0:
        raise ConfigError(f"batch_window_s must be >= 0 seconds, got {config.batch_window_s}")
    config.run_name  # noqa: B018  (a bad --name fails before anything is loaded or written)
    return run_plan(plan_run(config), config)


def run_plan(plan: RunPlan, config: EvalConfig) -> EvalResult:
    """Execute ``plan`` (``config.protocol`` resolved by :func:`plan_run`) with ``config``'s policy and folders."""
    policies = _policies(config, plan)  # a bad spec fails before anything is written
    config = dataclasses.replace(config, concurrency=config.concurrency or default_concurrency(plan, policies))
    _raise_engine_limits(policies, config.concurrency or 1)
    run_dir = Path(config.out) / plan.name / config.run_name
    with lock_run_dir(run_dir):  # a second eval on the same folder fails fast, naming this process
        return _evaluate_locked(config, plan, policies)


def plan_run(config: EvalConfig) -> RunPlan:
    """``config.protocol`` resolved with the run's engines, data folder and task selection."""
    protocol = _with_agentflow_src(load_protocol(config.protocol), config.agentflow_src)
    if config.judge_engine and not protocol.uses_judge:
        logger.warning("--judge-engine is unused: protocol %s scores no benchmark with the judge", protocol.name)
    plan = protocol.resolve(
        engine=config.engine,
        judge_engine=config.judge_engine,
        data_dir=config.data_dir,
        fast=config.fast,
        fast_tasks=config.fast_tasks,
    )
    if config.control_engine:
        if config.engine:
            raise ConfigError("--control-engine replaces the modules' engine: leave --engine out")
        plan = apply_control(plan, config.control_engine)
    return plan


def _with_agentflow_src(protocol: Protocol, given: str | None) -> Protocol:
    """The protocol reading ``"agentflow_src"`` from ``given`` or ``$AGENTFLOW_SRC`` (neither: own wording)."""
    path = given or os.environ.get("AGENTFLOW_SRC") or None
    if not protocol.wants_agentflow_src:
        if given:
            logger.warning("--agentflow-src is unused: protocol %s reads nothing from a checkout", protocol.name)
        return protocol
    if path is None:
        logger.warning(
            "protocol %s runs without AgentFlow's checkout (--agentflow-src PATH or $AGENTFLOW_SRC): this project's "
            "own prompt wording and judge; the run is labelled %r",
            protocol.name,
            NOT_COMPARABLE,
        )
    return protocol.with_agentflow_src(path)


def dry_run(config: EvalConfig, latency_s: float) -> str:
    """The plan of ``config`` and its time estimate at ``latency_s`` per LLM call; runs no episode.

    Builds one env per benchmark to count its tasks (no LLM call: the paper flow's first call is at reset).
    """
    plan = plan_run(config)
    policies = _policies(config, plan)
    concurrency = config.concurrency or default_concurrency(plan, policies)
    pool = _EnvPool(plan)
    try:
        units = _units(plan, pool, RunRecord(name="", protocol=plan.name, protocol_hash=plan.protocol.hash, policy=""))
    finally:
        pool.close()
    episodes: dict[str, int] = {}
    for unit in units:
        episodes[unit.env_id] = episodes.get(unit.env_id, 0) + 1
    return f"policy {config.policy}\n" + plan.describe(episodes, concurrency, latency_s)


def _evaluate_locked(config: EvalConfig, plan: RunPlan, policies: dict[str, Any]) -> EvalResult:
    pool = _EnvPool(plan)
    pool.judge_concurrency = config.judge_concurrency
    pool.concurrency = config.concurrency
    pool.ray, pool.ray_workers = config.ray, config.ray_workers
    pool.tool_calling = config.tool_calling
    try:
        retrieval = _retrieval(plan, pool)
        check_search_backends(plan.protocol, retrieval, config.allow_missing_tools)  # before anything is written
        run_dir, record, stored = _prepare_run_dir(config, plan, retrieval)
        pool.ledger = Ledger.from_dict(record.ledger)
        units = _units(plan, pool, record)
        if record.paper_settings is not None:
            record.paper_settings["planner_sends"] = _planner_sends(policies, plan.planner)
            _check_same_prompts(stored, record, run_dir)
        done = {d.get("key") for d in read_tasks(run_dir, repair=True)}
        todo = deque(u for u in units if u.key not in done)
        if not todo and stored is not None and stored.complete:  # nothing to run: leave the stored run as it is
            logger.warning(
                "all %d episodes of this run are already stored: showing them. Pass --overwrite to run "
                "again, or --output-dir DIR / --name NAME for a separate run",
                len(units),
            )
            return load_run(run_dir)
        record.sessions += 1
        write_json_atomic(run_dir / RUN_FILE, record.to_dict())
        session_start = time.monotonic()
        try:
            with GroupCommit() as group:  # lines reach disk in batches, trajectories before their outcomes
                traj, tasks = group.appender(run_dir / TRAJECTORIES_FILE), group.appender(run_dir / TASKS_FILE)
                run_units(EvalSession(todo, len(units), len(units) - len(todo), policies, pool, config, traj, tasks))
            record.complete = True
        finally:
            record.wall_s += time.monotonic() - session_start
            record.updated_at = _now()
            record.ledger = pool.ledger.to_dict()
            record.budget_cut = budget_cut_counts(read_tasks(run_dir))
            write_json_atomic(run_dir / RUN_FILE, record.to_dict())
    finally:
        pool.close()
    return load_run(run_dir)


def default_concurrency(plan: RunPlan, policies: dict[str, Any]) -> int:
    """64 episodes in flight when an HTTP server does the work (an HTTP planner, the paper flow's or the llm
    modes' engine), else 16 (a local model batches its turns; offline modules are quick)."""
    http_policy = any(getattr(p, "concurrent_act", False) for p in policies.values())
    return 64 if http_policy or plan.http_modules else 16


def _raise_engine_limits(policies: dict[str, Any], concurrency: int) -> None:
    """An HTTP planner's engine allows as many requests in flight as there are episodes."""
    for policy in {id(p): p for p in policies.values()}.values():
        engine = getattr(policy, "engine", None)
        if callable(getattr(engine, "set_concurrency", None)) and getattr(engine, "concurrency", 0) < concurrency:
            engine.set_concurrency(concurrency)


def _policies(config: EvalConfig, plan: RunPlan) -> dict[str, Any]:
    if config.policy_factory is not None:
        return {e: config.policy_factory(e) for e in plan.env_ids}
    from agents.policies.registry import make_policies

    planner = plan.planner  # the paper flow: AgentFlow's planner sampling, penalty and system prompt
    return make_policies(
        config.policy,
        plan.env_ids,
        planner.sampling,
        extra_body=planner.extra_body,
        system_prompt=planner.system_prompt,
        **({"tool_calling": True} if config.tool_calling else {}),
    )


def _check_same_prompts(stored: RunRecord | None, record: RunRecord, run_dir: Path) -> None:
    """A resumed paper-flow run must show the modules the same wording as its stored episodes did."""
    before = (stored.paper_settings or {}).get("prompt_fingerprint") if stored is not None else None
    now = (record.paper_settings or {}).get("prompt_fingerprint")
    if before is not None and before != now:
        raise ConfigError(
            f"{run_dir} was run with other prompts (fingerprint {before}, now {now}: another prompt source, "
            "checkout or code version); pass --name NEW to keep both or --overwrite to replace it"
        )


def _planner_sends(policies: dict[str, Any], planner: PlannerSetup) -> dict[str, bool | None]:
    """Whether the policies send the paper flow's planner sampling, extra fields and system prompt.

    A planner with ``sampling`` (LLMPlanner, HFPlanner) and no ``extra_body``/``system_prompt`` sends none
    (``False``); ``None``: a policy the runner cannot inspect (a ``module:attr`` policy may apply them itself).
    """
    found: dict[str, set[bool | None]] = {"sampling": set(), "extra_body": set(), "system_prompt": set()}
    for policy in {id(p): p for p in policies.values()}.values():
        sampling = getattr(policy, "sampling", None)
        if sampling is None:
            for seen in found.values():
                seen.add(None)
            continue
        found["sampling"].add(all(getattr(sampling, k, None) == v for k, v in planner.sampling.items()))
        body = getattr(policy, "extra_body", None) or {}
        found["extra_body"].add(all(k in body and body[k] == v for k, v in planner.extra_body.items()))
        found["system_prompt"].add(getattr(policy, "system_prompt", None) == planner.system_prompt)
    return {k: (v.pop() if len(v) == 1 else False if False in v else None) for k, v in found.items()}
