"""Runs a policy over a protocol: batched episodes across envs, one ``act`` per policy per turn, resumable.

Each finished episode appends its trajectory, then its outcome line; a rerun skips every unit whose
outcome line is on disk, so an interrupted evaluation never redoes finished tasks.
"""

from __future__ import annotations

import inspect
import logging
import numbers
import shutil
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from agentflow_env.error import ConfigError, EngineError
from leaderboards.protocol import Protocol, WorkUnit, load_protocol
from leaderboards.store import (
    RUN_FILE,
    TASKS_FILE,
    TRAJECTORIES_FILE,
    EvalResult,
    JsonlAppender,
    RunRecord,
    TaskOutcome,
    git_state,
    load_run,
    lock_run_dir,
    read_jsonl,
    run_name_for,
    validate_run_name,
    write_json_atomic,
)

__all__ = ["EvalConfig", "build_env", "describe_scorer", "evaluate", "make_protocol_scorer", "normalize_actions"]

logger = logging.getLogger(__name__)


@dataclass
class EvalConfig:
    """What ``agentflow-env eval`` runs and where it writes."""

    policy: str
    protocol: str = "offline-v1"
    out: Path = Path("runs/leaderboard")  # under the current directory; references are written by --leaderboard-record
    name: str | None = None  # run folder name; default from the policy spec
    data_dir: str | None = None
    engine: str | None = None  # overrides the protocol's engine for llm modes or the paper flow (recorded)
    judge_engine: str | None = None  # overrides the protocol's [judge] engine (recorded in the result)
    batch_size: int = 16
    fast: bool = False  # only the first ``fast_tasks`` tasks of each benchmark
    fast_tasks: dict[str, int] | None = None  # with ``fast``: tasks per benchmark instead (the sized score guard)
    code_dir: Path | None = None  # whose git state the record names (default: agentflow-env's own checkout)
    overwrite: bool = False
    progress: bool = True
    notes: str = ""
    policy_factory: Callable[[str], Any] | None = field(default=None, repr=False)  # env_id -> policy (tests)

    @property
    def run_name(self) -> str:
        """The run's folder name under ``out/<protocol>/``: ``name`` (checked) or one made from the policy spec."""
        if self.name is None:
            return run_name_for(self.policy) + ("-fast" if self.fast else "")
        return validate_run_name(self.name)


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _accepts(fn: Callable[..., Any], name: str) -> bool:
    params = inspect.signature(fn).parameters.values()
    return any(p.name == name or p.kind is p.VAR_KEYWORD for p in params)


def build_env(
    protocol: Protocol,
    env_id: str,
    data_dir: str | None = None,
    engine: str | None = None,
    tasks: Any = None,
    *,
    trial_seed: int | None = None,
    scorer: Any = None,
    judge_engine: str | None = None,
) -> Any:
    """The env of one protocol benchmark, with the protocol's split, options, modes, turn budget and scorer.

    ``tasks`` reuses another instance's task source (loading or generating tasks once per benchmark and
    trial). ``trial_seed`` goes to the loader option the protocol names in ``trial_seed_option``.
    ``scorer`` is a ready scorer object (shared across envs); else one is built from the protocol entry,
    the judge's engine from ``judge_engine`` or the protocol's ``[judge] engine``.
    """
    import gymnasium as gym

    if env_id not in gym.registry:
        from agentflow_env.registration import registered_ids

        raise ConfigError(
            f"protocol {protocol.name} needs {env_id}, which is not registered here; "
            f"registered: {', '.join(registered_ids())}"
        )
    entry = protocol.benchmark(env_id)
    kwargs: dict[str, Any] = {**entry.options, **protocol.env_kwargs(engine)}
    kwargs["split"] = entry.split
    spec_kwargs = gym.spec(env_id).kwargs or {}
    bench = spec_kwargs.get("benchmark")
    if data_dir and bench is not None:
        from benchmarks.specs import get_spec

        if _accepts(get_spec(bench).load_tasks, "data_dir"):
            kwargs["data_dir"] = data_dir
    if protocol.trial_seed_option and trial_seed is not None and bench is not None:
        from benchmarks.specs import get_spec

        if _accepts(get_spec(bench).load_tasks, protocol.trial_seed_option):
            kwargs[protocol.trial_seed_option] = trial_seed
    if scorer is not None:
        kwargs["scorer"] = scorer
    elif entry.scorer != "default":
        kwargs["scorer"] = make_protocol_scorer(protocol, entry.scorer, judge_engine)
    if tasks is not None:
        kwargs["tasks"] = tasks
    return gym.make(env_id, disable_env_checker=True, **kwargs)


def make_protocol_scorer(protocol: Protocol, name: str, judge_engine: str | None = None) -> Any:
    """The scorer a protocol entry names; ``"judge"`` takes its engine from ``judge_engine`` or ``[judge]``."""
    from agentflow_env.scoring import make_scorer

    if name != "judge":
        return make_scorer(name)
    spec = protocol.judge_engine(judge_engine)
    if not spec:
        raise ConfigError(
            f'protocol {protocol.name} scores with scorer = "judge" but names no judge engine: '
            '`--judge-engine SPEC` (e.g. openai:gpt-4o@https://api.openai.com/v1) or [judge] engine = "SPEC"'
        )
    options = {k: v for k, v in protocol.judge.items() if k != "engine"}
    return make_scorer("judge", judge_engine=spec, **options)


def describe_scorer(scorer: Any) -> str:
    """How a result records a scorer: ``judge:<engine spec>`` or ``rule:<scorer>``."""
    from agentflow_env.scoring import scorer_kind

    describe = getattr(scorer, "describe", None)
    if scorer_kind(scorer) == "judge":
        return describe() if callable(describe) else f"judge:{type(scorer).__name__}"
    return f"rule:{scorer!r}" if type(scorer).__repr__ is not object.__repr__ else f"rule:{type(scorer).__name__}"


def normalize_actions(policy: Any, raw: Sequence[Any], n: int) -> tuple[list[str], list[dict[str, int] | None]]:
    """Action texts and per-action token counts from whatever ``act`` returned.

    Items may be strings, dicts with ``text``/``action``, or objects with ``.text`` (trainable
    policies); token counts come from ``prompt_ids``/``action_ids`` lengths, ``prompt_tokens``/
    ``completion_tokens``, or the policy's ``last_usage`` list. Missing counts are ``None``.
    """
    if not isinstance(raw, Sequence) or isinstance(raw, str) or len(raw) != n:
        raise ConfigError(
            f"{type(policy).__name__}.act returned {type(raw).__name__} of length "
            f"{len(raw) if hasattr(raw, '__len__') else '?'}; it must return one action per observation ({n})"
        )
    usage = getattr(policy, "last_usage", None)
    texts, tokens = [], []
    for i, item in enumerate(raw):
        get = item.get if isinstance(item, dict) else lambda k, d=None, it=item: getattr(it, k, d)
        text = item if isinstance(item, str) else get("text", get("action"))
        texts.append(text if isinstance(text, str) else str(text))
        count = _token_count(get) if not isinstance(item, str) else None
        if count is None and isinstance(usage, Sequence) and len(usage) == n and isinstance(usage[i], dict):
            count = _token_count(usage[i].get)
        tokens.append(count)
    return texts, tokens


MAX_TOKENS_PER_ACTION = 10_000_000  # a count past this (per prompt or completion) is not believed


def _token_count(get: Callable[..., Any]) -> dict[str, int] | None:
    """The action's token counts, or ``None`` when unknown. Counts come from the policy, which may be anyone's
    code: one that is not a whole number in [0, MAX_TOKENS_PER_ACTION] is reported (once) and counted as unknown,
    so a bad count neither ends the evaluation nor reaches the result."""
    prompt, completion = get("prompt_tokens", None), get("completion_tokens", None)
    if prompt is None and completion is None:
        pids, aids = get("prompt_ids", None), get("action_ids", get("response_ids", None))
        try:
            prompt = len(pids) if pids is not None else None
            completion = len(aids) if aids is not None else None
        except TypeError:
            _warn_token_count(f"token ids without a length ({type(pids).__name__}, {type(aids).__name__})")
            return None
    if prompt is None and completion is None:
        return None
    counts = {}
    for key, value in (("prompt", prompt), ("completion", completion)):
        if value is None:
            counts[key] = 0
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            if not (isinstance(value, float) and value.is_integer()):
                _warn_token_count(f"{key} tokens = {value!r} ({type(value).__name__}), not a whole number")
                return None
        number = int(value)
        if not 0 <= number <= MAX_TOKENS_PER_ACTION:
            _warn_token_count(f"{key} tokens = {number}, outside 0..{MAX_TOKENS_PER_ACTION:,}")
            return None
        counts[key] = number
    return counts


_TOKEN_WARNINGS: set[str] = set()


def _warn_token_count(problem: str) -> None:
    if problem not in _TOKEN_WARNINGS:
        _TOKEN_WARNINGS.add(problem)
        logger.warning("the policy reported %s; this action's token count is recorded as unknown", problem)


@dataclass
class _Episode:
    unit: WorkUnit
    env: Any
    obs: dict[str, str]
    started: float
    turns: int = 0
    tokens: dict[str, int] | None = None
    token_known: bool = True


class _EnvPool:
    """Reusable env instances per (env id, trial); a benchmark's envs close once its last episode ends.

    When the protocol gives trial seeds to the loaders, each trial has its own task source (GPQA's option
    order differs per trial); otherwise every trial shares one. Scorers are built once per env id.
    """

    def __init__(self, protocol: Protocol, data_dir: str | None, engine: str | None, judge_engine: str | None = None):
        self.protocol, self.data_dir, self.engine, self.judge_engine = protocol, data_dir, engine, judge_engine
        self.free: dict[tuple[str, int | None], list[Any]] = {}
        self.all: dict[tuple[str, int | None], list[Any]] = {}
        self.scorers: dict[str, Any] = {}

    def _key(self, env_id: str, seed: int | None) -> tuple[str, int | None]:
        return env_id, (seed if self.protocol.trial_seed_option else None)

    def scorer(self, env_id: str) -> Any:
        """The protocol entry's scorer, shared by every env of ``env_id`` (``None``: the benchmark's own)."""
        entry = self.protocol.benchmark(env_id)
        if entry.scorer == "default":
            return None
        if env_id not in self.scorers:
            same = [v for e, v in self.scorers.items() if self.protocol.benchmark(e).scorer == entry.scorer]
            if not same:
                same = [make_protocol_scorer(self.protocol, entry.scorer, self.judge_engine)]
            self.scorers[env_id] = same[0]
        return self.scorers[env_id]

    def acquire(self, env_id: str, seed: int | None = None) -> Any:
        key = self._key(env_id, seed)
        free = self.free.setdefault(key, [])
        if free:
            return free.pop()
        siblings = self.all.setdefault(key, [])
        tasks = siblings[0].unwrapped.tasks if siblings else None
        env = build_env(
            self.protocol,
            env_id,
            self.data_dir,
            self.engine,
            tasks=tasks,
            trial_seed=seed,
            scorer=self.scorer(env_id),
            judge_engine=self.judge_engine,
        )
        siblings.append(env)
        return env

    def release(self, env_id: str, env: Any, seed: int | None = None) -> None:
        self.free.setdefault(self._key(env_id, seed), []).append(env)

    def close_env_id(self, env_id: str) -> None:
        for key in [k for k in self.all if k[0] == env_id]:
            for env in self.all.pop(key, []):
                env.close()
            self.free.pop(key, None)

    def close(self) -> None:
        for env_id in {k[0] for k in self.all}:
            self.close_env_id(env_id)


def _policy_source(config: EvalConfig) -> dict[str, str] | None:
    """What code the policy spec named, by content hash (see ``agents.policies.registry.policy_source``)."""
    if config.policy_factory is not None:
        return None
    from agents.policies.registry import policy_source

    return policy_source(config.policy)


def _prepare_run_dir(config: EvalConfig, protocol: Protocol) -> tuple[Path, RunRecord, RunRecord | None]:
    """The run folder, the record this session will write, and the stored record when resuming."""
    from agentflow_env import __version__

    run_dir = Path(config.out) / protocol.name / config.run_name
    if config.overwrite and run_dir.exists():
        shutil.rmtree(run_dir)
    commit, dirty = git_state(config.code_dir)
    env = dict(protocol.env)
    if config.engine:
        env["engine"] = config.engine
    judge_engine = protocol.judge_engine(config.judge_engine) if protocol.uses_judge else None
    planner = protocol.planner()
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
        env=env,
        sampling={**planner.sampling, **planner.extra_body},  # as the planner sends it (frequency penalty too)
        benchmarks={
            b.env_id: {"label": b.label, "category": b.category, "split": b.split} for b in protocol.benchmarks
        },
        started_at=_now(),
        notes=config.notes,
        judge_engine=judge_engine,
        trial_seed_option=protocol.trial_seed_option,
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
            )
            if a != b
        ]
        if old.kind != "measured" or clash:
            raise ConfigError(
                f"{run_dir} holds a different run ({'; '.join(clash) or old.kind}); "
                "pass --name NEW to keep both or --overwrite to replace it"
            )
        fresh.started_at, fresh.wall_s, fresh.sessions = old.started_at, old.wall_s, old.sessions
        if (old.git_commit, old.package_version) != (commit, fresh.package_version):
            fresh.notes = (fresh.notes + f" resumed across code versions (first {old.git_commit}).").strip()
        return run_dir, fresh, old
    return run_dir, fresh, None


def _plan(protocol: Protocol, config: EvalConfig, pool: _EnvPool, record: RunRecord) -> list[WorkUnit]:
    """Every episode of the run; records how each benchmark is scored in ``record.scorers`` and, in the paper
    flow, the env's ``paper_settings`` (prompt source, toolbox, tools, sampling; per benchmark how questions
    were built)."""
    units: list[WorkUnit] = []
    seed = protocol.seeds[0]
    for entry in protocol.benchmarks:
        env = pool.acquire(entry.env_id, seed)
        num = len(env.unwrapped.tasks)
        record.scorers[entry.env_id] = describe_scorer(env.unwrapped.scorer)
        settings = getattr(env.unwrapped, "paper_settings", None)
        if protocol.flow == "paper" and isinstance(settings, dict):
            settings = dict(settings)
            questions = settings.pop("questions", None)
            if questions is not None:
                record.benchmarks.setdefault(entry.env_id, {})["questions"] = questions
            if record.paper_settings is None:
                record.paper_settings = settings
            elif settings != record.paper_settings:  # one toolbox and sampling for every benchmark, as in AgentFlow
                raise ConfigError(
                    f"{entry.env_id} runs with other paper settings than {protocol.benchmarks[0].env_id}; "
                    "the paper flow uses one prompt source, toolbox and sampling for all benchmarks"
                )
        pool.release(entry.env_id, env, seed)
        limit = (config.fast_tasks or {}).get(entry.env_id)
        units.extend(protocol.units(entry.env_id, num, fast=config.fast, limit=limit))
    return units


def evaluate(config: EvalConfig) -> EvalResult:
    """Run (or resume) ``config.policy`` on ``config.protocol``; returns the stored result."""
    if config.batch_size < 1:
        raise ConfigError(f"batch_size must be at least 1, got {config.batch_size}")
    config.run_name  # noqa: B018  (a bad --name fails before anything is loaded or written)
    protocol = load_protocol(config.protocol)
    if config.judge_engine and not protocol.uses_judge:
        logger.warning("--judge-engine is unused: protocol %s scores no benchmark with the judge", protocol.name)
    policies = _policies(config, protocol)  # a bad spec fails before anything is written
    run_dir = Path(config.out) / protocol.name / config.run_name
    with lock_run_dir(run_dir):  # a second eval on the same folder fails fast, naming this process
        return _evaluate_locked(config, protocol, policies)


def _evaluate_locked(config: EvalConfig, protocol: Protocol, policies: dict[str, Any]) -> EvalResult:
    run_dir, record, stored = _prepare_run_dir(config, protocol)
    pool = _EnvPool(protocol, config.data_dir, config.engine, config.judge_engine)
    try:
        units = _plan(protocol, config, pool, record)
        if record.paper_settings is not None:
            record.paper_settings["planner_sends"] = _planner_sends(policies, protocol)
            _check_same_prompts(stored, record, run_dir)
        done = {d.get("key") for d in read_jsonl(run_dir / TASKS_FILE, repair=True)}
        todo = deque(u for u in units if u.key not in done)
        if not todo and stored is not None and stored.complete:  # nothing to run: leave the stored run as it is
            logger.warning(
                "all %d episodes of this run are already stored: showing them. Pass --overwrite to run "
                "again, or --out DIR / --name NAME for a separate run",
                len(units),
            )
            return load_run(run_dir)
        record.sessions += 1
        write_json_atomic(run_dir / RUN_FILE, record.to_dict())
        session_start = time.monotonic()
        try:
            with JsonlAppender(run_dir / TRAJECTORIES_FILE) as traj, JsonlAppender(run_dir / TASKS_FILE) as tasks:
                _loop(todo, len(units), len(units) - len(todo), policies, pool, config, traj, tasks)
            record.complete = True
        finally:
            record.wall_s += time.monotonic() - session_start
            record.updated_at = _now()
            write_json_atomic(run_dir / RUN_FILE, record.to_dict())
    finally:
        pool.close()
    return load_run(run_dir)


def _policies(config: EvalConfig, protocol: Protocol) -> dict[str, Any]:
    if config.policy_factory is not None:
        return {e: config.policy_factory(e) for e in protocol.env_ids}
    from agents.policies.registry import make_policies

    planner = protocol.planner()  # the paper flow: AgentFlow's planner sampling, penalty and system prompt
    return make_policies(
        config.policy,
        protocol.env_ids,
        planner.sampling,
        extra_body=planner.extra_body,
        system_prompt=planner.system_prompt,
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


def _planner_sends(policies: dict[str, Any], protocol: Protocol) -> dict[str, bool | None]:
    """Whether the policies send the paper flow's planner sampling, extra fields and system prompt.

    A planner with ``sampling`` (LLMPlanner, HFPlanner) and no ``extra_body``/``system_prompt`` sends none
    (``False``); ``None``: a policy the runner cannot inspect (a ``module:attr`` policy may apply them itself).
    """
    planner = protocol.planner()
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


def _loop(
    todo: deque[WorkUnit],
    total: int,
    initial: int,
    policies: dict[str, Any],
    pool: _EnvPool,
    config: EvalConfig,
    traj: JsonlAppender,
    tasks: JsonlAppender,
) -> None:
    from tqdm.auto import tqdm

    remaining = {e: 0 for e in policies}
    for u in todo:
        remaining[u.env_id] = remaining.get(u.env_id, 0) + 1
    for env_id, count in remaining.items():
        if count == 0:
            pool.close_env_id(env_id)
    active: list[_Episode] = []
    if initial:
        logger.warning(
            "resuming: %d of %d episodes are already stored; running the other %d", initial, total, total - initial
        )
    bar = tqdm(
        total=total,
        initial=initial,
        desc=f"eval {config.policy}",
        unit="task",
        disable=not config.progress,
        dynamic_ncols=True,
    )
    scored, score_sum = 0, 0.0  # this session's episodes, for the bar's running mean score
    try:
        while todo or active:
            while todo and len(active) < config.batch_size:
                unit = todo.popleft()
                env = pool.acquire(unit.env_id, unit.seed)
                obs, _ = env.reset(seed=unit.episode_seed(), options={"index": unit.index})
                active.append(_Episode(unit, env, obs, time.perf_counter()))
            finished = _turn(active, policies)
            for ep, reward, info in finished:
                _check_judged(ep, info, pool)
                _record(ep, reward, info, traj, tasks)
                active.remove(ep)
                pool.release(ep.unit.env_id, ep.env, ep.unit.seed)
                remaining[ep.unit.env_id] -= 1
                if remaining[ep.unit.env_id] == 0:
                    pool.close_env_id(ep.unit.env_id)
                scored += 1
                score_sum += reward
                bar.set_postfix(score=f"{score_sum / scored:.3f}", refresh=False)
                bar.update(1)
    finally:
        bar.close()


def _turn(active: list[_Episode], policies: dict[str, Any]) -> list[tuple[_Episode, float, dict[str, Any]]]:
    """One planner turn for every active episode: one ``act`` call per distinct policy object."""
    groups: dict[int, list[_Episode]] = {}
    for ep in active:
        groups.setdefault(id(policies[ep.unit.env_id]), []).append(ep)
    finished = []
    for eps in groups.values():
        policy = policies[eps[0].unit.env_id]
        # trainable policies also return token ids (counted, not stored); plain ones return strings
        act = getattr(policy, "act_with_samples", None) or policy.act
        texts, tokens = normalize_actions(policy, act([ep.obs for ep in eps]), len(eps))
        for ep, text, count in zip(eps, texts, tokens):
            ep.turns += 1
            if count is None:
                ep.token_known = False
            else:
                ep.tokens = {k: (ep.tokens or {}).get(k, 0) + v for k, v in count.items()}
            ep.obs, reward, terminated, truncated, info = ep.env.step(text)
            if terminated or truncated:
                info["_terminated"] = bool(terminated)
                finished.append((ep, float(reward), info))
    return finished


def _check_judged(ep: _Episode, info: dict[str, Any], pool: _EnvPool) -> None:
    """A judge that failed (engine down, no reply) stops the run: storing 0 would blame the policy."""
    from agentflow_env.scoring import scorer_kind

    error = info.get("score_error")
    if error and scorer_kind(ep.env.unwrapped.scorer) == "judge":
        raise EngineError(f"the judge failed on {ep.unit.key} ({error}); this episode is not stored")


def _record(ep: _Episode, reward: float, info: dict[str, Any], traj: JsonlAppender, tasks: JsonlAppender) -> None:
    task = info.get("task") or {}
    unit = ep.unit
    offset, length = traj.append(
        {
            "key": unit.key,
            "env_id": unit.env_id,
            "task_id": info.get("task_id"),
            "question": task.get("question"),
            "gold": info.get("gold"),
            "answer": info.get("answer"),
            "score": info.get("score", reward),
            "trajectory": info.get("trajectory", []),
            # the paper flow's trace of every module call (query analysis, planner, executor, tool, verifier, ...)
            **({"module_calls": info["module_calls"]} if "module_calls" in info else {}),
        }
    )
    outcome = TaskOutcome(
        key=unit.key,
        env_id=unit.env_id,
        index=unit.index,
        seed=unit.seed,
        sample=unit.sample,
        task_id=str(info.get("task_id")),
        score=float(info.get("score", reward)),
        answer=str(info.get("answer", "")),
        gold=info.get("gold"),
        turns=ep.turns,
        terminated=info["_terminated"],
        truncated=not info["_terminated"],
        wall_s=round(time.perf_counter() - ep.started, 4),
        tokens=ep.tokens if ep.token_known else None,
        trajectory={"file": TRAJECTORIES_FILE, "offset": offset, "length": length},
        error=info.get("score_error"),
        episode_seed=unit.episode_seed(),
    )
    tasks.append(outcome.to_dict())
