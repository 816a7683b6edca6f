"""The episodes of an eval: ``concurrency`` in flight on the scheduler, or lock-step turns for a stateful policy.

:func:`run_units` plays the remaining units of one :class:`EvalSession` (what the runner hands over: units,
policies, envs, config and result files) and appends each finished episode (trajectory, then outcome) as it ends.
An HTTP planner (``concurrent_act``) runs on :func:`agentflow_env.vector.scheduler.run_episodes`: each episode on
its own, asking the planner on its own thread (one request per turn; no batch window). Any other policy plays
lock-step turns (:func:`run_turns`): its actions may depend on how observations are batched, and a seeded run
must repeat. Either way each episode's clock counts only its own work.
"""

from __future__ import annotations

import functools
import logging
import numbers
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from agentflow_env.error import ConfigError, EngineError, MalformedReplyError
from leaderboards.leaks import episode_leaks
from leaderboards.ledger import enter_benchmark, observation_tokens, record_planner
from leaderboards.protocol import WorkUnit
from leaderboards.store import TRAJECTORIES_FILE, JsonlAppender, TaskOutcome

if TYPE_CHECKING:
    from leaderboards.config import EvalConfig
    from leaderboards.protocol import RunPlan

__all__ = ["EnvSource", "EvalSession", "normalize_actions", "run_turns", "run_units"]

logger = logging.getLogger(__name__)


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


class EnvSource(Protocol):
    """Where an eval's episodes take their envs from and give them back (the runner's env pool)."""

    plan: RunPlan
    ledger: Any  # the run's call ledger (leaderboards/ledger.py), or None

    def acquire(self, env_id: str, seed: int | None = None) -> Any: ...

    def release(self, env_id: str, env: Any, seed: int | None = None) -> None: ...

    def close_env_id(self, env_id: str) -> None: ...


@dataclass
class EvalSession:
    """One session of an eval: the units still to play (``todo``, of ``total``; ``initial`` already stored), each
    env id's policy, the envs, the config and the two result files (trajectories, then outcomes)."""

    todo: deque[WorkUnit]
    total: int
    initial: int
    policies: dict[str, Any]
    pool: EnvSource
    config: EvalConfig
    traj: JsonlAppender
    tasks: JsonlAppender


@dataclass
class _Episode:
    unit: WorkUnit
    env: Any
    obs: dict[str, str]
    started: float
    turns: int = 0
    tokens: dict[str, int] | None = None
    token_known: bool = True
    ledger: Any = None  # the run's call ledger (leaderboards/ledger.py)
    planner_s: float = 0.0
    acts: list[tuple[Any, ...]] | None = None  # per turn: action, token counts, observation estimate, unread reply


def _start_session(session: EvalSession) -> dict[str, int]:
    """Episodes left per env id (an env id with none left is closed at once); says when a run resumes."""
    remaining = {e: 0 for e in session.policies}
    for u in session.todo:
        remaining[u.env_id] = remaining.get(u.env_id, 0) + 1
    for env_id, count in remaining.items():
        if count == 0:
            session.pool.close_env_id(env_id)
    total, initial = session.total, session.initial
    if initial:
        logger.warning(
            "resuming: %d of %d episodes are already stored; running the other %d", initial, total, total - initial
        )
    return remaining


def _progress_bar(session: EvalSession, unit: str) -> Any:
    from tqdm.auto import tqdm

    return tqdm(
        total=session.total,
        initial=session.initial,
        desc=f"eval {session.config.policy}",
        unit=unit,
        disable=not session.config.progress,
        dynamic_ncols=True,
    )


def run_turns(session: EvalSession) -> None:
    """Lock-step turns, for a policy that takes one batch at a time and whose actions depend on the batch (a
    seeded random planner, a local model sampling with a seed): every episode in flight gets one ``act`` per
    turn, in the order they started, so a seeded run repeats exactly. The envs' steps run in parallel; each
    episode's clock is paused between its steps and charged the batch's ``act`` time."""
    from concurrent.futures import ThreadPoolExecutor

    from agentflow_env.vector.scheduler import pause_clock

    todo, policies, pool, config = session.todo, session.policies, session.pool, session.config
    remaining = _start_session(session)
    active: list[_Episode] = []
    bar = _progress_bar(session, unit="task")
    scored, score_sum = 0, 0.0  # this session's episodes, for the bar's running mean score
    steps = ThreadPoolExecutor(max_workers=max(1, min(config.concurrency or 1, 64)), thread_name_prefix="env-step")
    try:
        while todo or active:
            while todo and len(active) < (config.concurrency or 1):
                unit = todo.popleft()
                enter_benchmark(pool.ledger, unit.env_id)  # this thread's engine calls count for this benchmark
                env = pool.acquire(unit.env_id, unit.seed)
                obs, _ = env.reset(seed=unit.episode_seed(), options={"index": unit.index})
                pause_clock(env)
                active.append(_Episode(unit, env, obs, time.perf_counter(), ledger=pool.ledger, acts=[]))
            finished = _turn(active, policies, steps)
            for ep, reward, info in finished:
                _check_judged(ep.unit, ep.env, info, pool.plan.benchmark(ep.unit.env_id).entry.scorer)
                _record(_Finished.of(ep), reward, info, session.traj, session.tasks)
                record_planner(pool.ledger, ep.unit.env_id, ep.acts or [], ep.planner_s)
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
        steps.shutdown(wait=True)
        bar.close()
        enter_benchmark(None, "")  # this thread's later engine calls are no longer this run's


def _turn(active: list[_Episode], policies: dict[str, Any], steps: Any) -> list[tuple[_Episode, float, dict[str, Any]]]:
    """One planner turn for every active episode: one ``act`` call per distinct policy object."""
    groups: dict[int, list[_Episode]] = {}
    for ep in active:
        groups.setdefault(id(policies[ep.unit.env_id]), []).append(ep)
    finished = []
    for eps in groups.values():
        policy = policies[eps[0].unit.env_id]
        # trainable policies also return token ids (counted, not stored); plain ones return strings
        act = getattr(policy, "act_with_samples", None) or policy.act
        t0 = time.perf_counter()
        texts, tokens = normalize_actions(policy, act([ep.obs for ep in eps]), len(eps))
        seconds = time.perf_counter() - t0
        for ep, text, count in zip(eps, texts, tokens):
            ep.turns += 1
            ep.planner_s += seconds
            if ep.acts is not None:
                ep.acts.append((text, count, observation_tokens(ep.obs) if count is None else 0))
            if count is None:
                ep.token_known = False
            else:
                ep.tokens = {k: (ep.tokens or {}).get(k, 0) + v for k, v in count.items()}
        results = list(steps.map(functools.partial(_step_pair, seconds), zip(eps, texts)))
        for ep, (obs, reward, terminated, truncated, info) in zip(eps, results):
            ep.obs = obs
            if terminated or truncated:
                info["_terminated"] = bool(terminated)
                finished.append((ep, float(reward), info))
    return finished


def _batchers(policies: dict[str, Any], config: EvalConfig, stats: Any) -> dict[int, Any]:
    """One planner batcher per distinct policy object."""
    from agentflow_env.vector.scheduler import PlannerBatcher

    batchers: dict[int, Any] = {}
    for policy in policies.values():
        if id(policy) not in batchers:
            batchers[id(policy)] = PlannerBatcher(
                _act_function(policy),
                window_s=config.batch_window_s,
                max_batch=config.concurrency or 1,
                parallel=(config.concurrency or 1) if getattr(policy, "concurrent_act", False) else 1,
                stats=stats,
                direct=bool(getattr(policy, "concurrent_act", False)),  # independent requests: no batch to wait for
            )
    return batchers


def _show_progress(bar: Any, stats: Any, meter0: dict[str, float], mean_score: float | None) -> None:
    """Episodes/s, episodes and requests in flight, completion tokens/s and the running mean score."""
    from agentflow_env.engines.meter import METER

    now = METER.snapshot()
    seconds = max(now["seconds"] - meter0["seconds"], 1e-9)
    bar.set_postfix(
        score=f"{mean_score:.3f}" if mean_score is not None else "-",
        ep_s=f"{stats.episodes_per_s:.2f}",
        episodes=stats.in_flight,
        requests=int(now["in_flight"]),
        tok_s=f"{(now['completion_tokens'] - meter0['completion_tokens']) / seconds:.0f}",
        refresh=False,
    )


def _step_pair(seconds: float, pair: tuple[_Episode, str]) -> Any:
    from agentflow_env.vector.scheduler import timed_step

    enter_benchmark(pair[0].ledger, pair[0].unit.env_id)  # a pool thread: its engine calls count for this episode
    return timed_step(pair[0].env, pair[1], seconds)


def _act_function(policy: Any) -> Callable[[list[dict[str, str]]], list[tuple[Any, ...]]]:
    """``act`` of ``policy`` as the batcher calls it: one (action text, token counts, ...) per observation."""
    # trainable policies also return token ids (counted, not stored); plain ones return strings
    act = getattr(policy, "act_with_samples", None) or policy.act

    def call(batch: list[dict[str, str]]) -> list[tuple[Any, ...]]:
        """Per observation: (action, token counts, the observation's token estimate, why the reply was unread)."""
        try:
            texts, tokens = normalize_actions(policy, act(batch), len(batch))
        except MalformedReplyError as exc:  # the engine retried already: that observation's turn gets ""
            if len(batch) > 1:  # find which observation's reply it was; the others play on
                return [item for obs in batch for item in call([obs])]
            logger.warning("the policy's reply could not be read (%s); the turn is spent and the unit records it", exc)
            return [("", None, observation_tokens(batch[0]), f"the policy's reply could not be read: {exc}")]
        # the estimate serves the ledger when the policy reports no usage
        estimates = [observation_tokens(o) if t is None else 0 for o, t in zip(batch, tokens)]
        return [(text, count, estimate, None) for text, count, estimate in zip(texts, tokens, estimates)]

    return call


def run_units(session: EvalSession) -> None:
    """Every unit of ``todo``, ``config.concurrency`` episodes in flight (``vector.scheduler.run_episodes``).

    A policy that cannot take concurrent ``act`` calls (not ``concurrent_act``) plays in lock-step turns instead
    (:func:`run_turns`): its actions may depend on how observations are batched, and a seeded run must repeat.
    """
    todo, policies, pool, config = session.todo, session.policies, session.pool, session.config
    if not all(getattr(p, "concurrent_act", False) or getattr(p, "batch_free", False) for p in policies.values()):
        return run_turns(session)

    from agentflow_env.engines.meter import METER
    from agentflow_env.vector.scheduler import SchedulerStats, run_episodes

    remaining = _start_session(session)
    stats = SchedulerStats()
    batchers = _batchers(policies, config, stats)
    bar = _progress_bar(session, unit="ep")
    meter0 = METER.snapshot() if config.progress else {}
    scored, score_sum = 0, 0.0  # this session's episodes, for the bar's running mean score

    def start(unit: WorkUnit, slot: int) -> tuple[Any, Any]:
        enter_benchmark(pool.ledger, unit.env_id)  # this worker thread's engine calls count for this benchmark
        env = pool.acquire(unit.env_id, unit.seed)
        try:
            obs, _ = env.reset(seed=unit.episode_seed(), options={"index": unit.index})
        except BaseException:
            pool.release(unit.env_id, env, unit.seed)
            raise
        return env, obs

    def finish(ep: Any) -> None:
        pool.release(ep.job.env_id, ep.env, ep.job.seed)

    def done(ep: Any) -> None:
        nonlocal scored, score_sum
        info = dict(ep.info)
        info["_terminated"] = bool(ep.terminated)
        reward = ep.rewards[-1] if ep.rewards else 0.0
        _check_judged(ep.job, ep.env, info, pool.plan.benchmark(ep.job.env_id).entry.scorer)
        _record(ep, reward, info, session.traj, session.tasks)
        record_planner(pool.ledger, ep.job.env_id, ep.acts, ep.planner_s)
        remaining[ep.job.env_id] -= 1
        if remaining[ep.job.env_id] == 0:
            pool.close_env_id(ep.job.env_id)
        scored += 1
        score_sum += reward
        bar.update(1)

    def tick() -> None:
        if config.progress:
            _show_progress(bar, stats, meter0, score_sum / scored if scored else None)

    try:
        run_episodes(
            todo,
            concurrency=config.concurrency,
            start=start,
            batcher_for=lambda unit: batchers[id(policies[unit.env_id])],
            action_of=lambda item: item[0],
            finish=finish,
            on_done=done,
            stats=stats,
            on_tick=tick,
        )
    finally:
        for batcher in batchers.values():
            batcher.close()
        bar.close()


@dataclass
class _Finished:
    """What ``_record`` reads of a finished episode of the lock-step loop (the scheduler's ``Episode`` shape)."""

    job: WorkUnit
    turns: int
    acts: list[tuple[str, dict[str, int] | None]]
    seconds: float

    @classmethod
    def of(cls, ep: _Episode) -> _Finished:
        tokens = ep.tokens if ep.token_known else None
        acts: list[tuple[str, dict[str, int] | None]] = [("", tokens)] if tokens is not None else [("", None)]
        return cls(ep.unit, ep.turns, acts, time.perf_counter() - ep.started)


def _check_judged(unit: WorkUnit, env: Any, info: dict[str, Any], plan_scorer: str = "default") -> None:
    """A judge that failed (engine down, no reply) stops the run: storing 0 would blame the policy."""
    from agentflow_env.scoring import scorer_kind

    error = info.get("score_error")
    base = getattr(env, "unwrapped", None)  # a Ray proxy has none: the env's scorer lives in the actor
    judged = scorer_kind(base.scorer) == "judge" if base is not None else plan_scorer == "judge"
    if error and judged:
        raise EngineError(f"the judge failed on {unit.key} ({error}); this episode is not stored")


def _record(ep: Any, reward: float, info: dict[str, Any], traj: JsonlAppender, tasks: JsonlAppender) -> None:
    """Append a finished episode (a ``vector.scheduler.Episode`` of a unit): trajectory, then outcome."""
    task = info.get("task") or {}
    unit = ep.job
    counts = [item[1] for item in ep.acts]
    unread = [item[3] for item in ep.acts if len(item) > 3 and item[3]]  # turns whose policy reply could not be read
    tokens = None
    if counts and all(c is not None for c in counts):
        tokens = {k: sum(c.get(k, 0) for c in counts) for k in ("prompt", "completion")}
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
        wall_s=round(ep.seconds, 4),
        tokens=tokens,
        trajectory={"file": TRAJECTORIES_FILE, "offset": offset, "length": length},
        error=info.get("score_error") or ("; ".join(unread) if unread else None),
        episode_seed=unit.episode_seed(),
        leak=episode_leaks(task.get("question"), info.get("gold"), info.get("memory_steps") or [])
        if info.get("family") == "search"
        else None,
        budget_cut=info.get("budget_cut"),
    )
    tasks.append(outcome.to_dict())
