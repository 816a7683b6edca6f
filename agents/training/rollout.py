"""Rollout collection: a policy plays a vector of envs; ``Turn``/``Trajectory`` records.

Two schedules (``scheduler=``): ``"episodes"`` runs each episode on its own (one env per worker thread, the
policy's batches gather the episodes ready within ``window_s``, :mod:`agentflow_env.vector.scheduler`): nothing waits
for the slowest env of a turn or for a reset. ``"turns"`` plays lock-step turns, one batched ``act`` over every
running episode per turn. ``"auto"`` (default) picks episodes for a policy that takes concurrent ``act`` calls
(an HTTP planner) and turns otherwise (a local model: full batches, and seeded runs repeat exactly).

Group rollouts (G per task, for Flow-GRPO) record token ids and log-probs when the policy is trainable.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentflow_env.error import ConfigError
from agentflow_env.vector.threaded import ThreadedVectorEnv, VectorRunner
from agents.policies.policy import Policy
from agents.training.packing import TurnSample

__all__ = [
    "EpisodeSpec",
    "RolloutStats",
    "Rollouts",
    "Trajectory",
    "Turn",
    "collect_group_rollouts",
    "collect_rollouts",
    "load_jsonl",
    "save_jsonl",
    "to_rollouts",
]

logger = logging.getLogger(__name__)


@dataclass
class Turn:
    """One planner turn: what the planner saw and said, and what the env did with it.

    ``prompt_ids``/``response_ids``/``logprobs`` are filled when the policy is trainable (see
    ``agents.policies.hf_policy.PolicySample`` for the log-prob convention).
    """

    turn: int
    prompt: str
    action: str
    tool: str | None = None
    command: str | None = None
    result: str | None = None
    error: str | None = None
    reward: float = 0.0
    prompt_ids: list[int] | None = None
    response_ids: list[int] | None = None
    logprobs: list[float] | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Turn:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


@dataclass
class Trajectory:
    """One episode: the task, every turn, the final answer and its reward.

    ``group`` is the index of the task in a group-rollout call and ``sample`` the index of this
    rollout within its group (0..G-1); plain rollouts number episodes in ``episode``.
    ``reward`` is the env's episode return (the scorer's value, given at the last step).
    """

    task_id: str
    env_id: str
    question: str = ""
    turns: list[Turn] = field(default_factory=list)
    answer: str | None = None
    reward: float = 0.0
    score: float | None = None
    terminated: bool = False
    truncated: bool = False
    group: int | None = None
    sample: int | None = None
    episode: int = 0
    seed: int | None = None
    seconds: float = 0.0

    @property
    def num_turns(self) -> int:
        return len(self.turns)

    @property
    def success(self) -> bool:
        return (self.score if self.score is not None else self.reward) >= 1.0

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["num_turns"] = self.num_turns
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Trajectory:
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in d.items() if k in names and k != "turns"}
        return cls(turns=[Turn.from_dict(t) for t in d.get("turns", [])], **kwargs)


def save_jsonl(trajectories: Iterable[Trajectory], path: str | Path) -> Path:
    """Write one trajectory per line (UTF-8 JSON); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for traj in trajectories:
            fh.write(json.dumps(traj.to_dict(), ensure_ascii=False, default=str) + "\n")
    return path


def load_jsonl(path: str | Path) -> list[Trajectory]:
    """Read trajectories written by :func:`save_jsonl`."""
    out = []
    with Path(path).open(encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, 1):
            if line.strip():
                try:
                    out.append(Trajectory.from_dict(json.loads(line)))
                except (json.JSONDecodeError, TypeError) as exc:
                    raise ValueError(f"{path}:{line_no} is not a trajectory record: {exc}") from exc
    return out


@dataclass
class EpisodeSpec:
    """What one episode should play: reset ``options`` (e.g. ``{"task_id": ...}``), ``seed``, group labels."""

    options: dict[str, Any] | None = None
    seed: int | None = None
    group: int | None = None
    sample: int | None = None


@dataclass
class RolloutStats:
    """Counters of one collection call (``turns_per_s`` is planner turns per wall-clock second)."""

    episodes: int = 0
    turns: int = 0
    policy_calls: int = 0
    policy_seconds: float = 0.0
    env_seconds: float = 0.0
    seconds: float = 0.0

    @property
    def turns_per_s(self) -> float:
        return self.turns / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "turns_per_s": self.turns_per_s}


def _as_runner(envs: VectorRunner | Sequence[Callable[[], Any]], max_workers: int | None) -> tuple[VectorRunner, bool]:
    if isinstance(envs, VectorRunner):
        if envs.autoreset_mode != "disabled":
            raise ConfigError(
                f"rollouts need a vector env with autoreset_mode='disabled' (got "
                f"{envs.autoreset_mode!r}): the collector resets each env to the next episode itself"
            )
        return envs, False
    fns = list(envs)
    if not fns or not all(callable(f) for f in fns):
        raise ConfigError("envs must be a vector env (autoreset_mode='disabled') or a list of env factories")
    return ThreadedVectorEnv(fns, autoreset_mode="disabled", max_workers=max_workers), True


def _fill_from_env(traj: Trajectory, info: Mapping[str, Any]) -> None:
    """Copy tool, command, result and error of each turn from the env's final trajectory record."""
    records = info.get("trajectory")
    if not isinstance(records, list):
        return
    for turn, rec in zip(traj.turns, records):
        if isinstance(rec, Mapping):
            turn.tool, turn.command = rec.get("tool"), rec.get("command")
            turn.result, turn.error = rec.get("result"), rec.get("error")


class _EpisodeLoop:
    """Plays a list of episode specs on a runner, each exactly once, one batched ``act`` per turn."""

    def __init__(
        self,
        runner: VectorRunner,
        policy: Policy,
        specs: Sequence[EpisodeSpec],
        env_id: str,
        record_samples: bool,
        progress: Callable[[Trajectory], None] | None,
        stats: RolloutStats,
        max_turns: int,
    ):
        self.runner, self.policy, self.specs, self.env_id = runner, policy, specs, env_id
        self.use_samples = record_samples and callable(getattr(policy, "act_with_samples", None))
        self.progress, self.stats, self.max_turns = progress, stats, max_turns
        n = runner.num_envs
        self.queue = list(range(len(specs)))[::-1]
        self.slot: list[int | None] = [None] * n  # episode index each env is playing
        self.obs: list[dict[str, Any]] = [{} for _ in range(n)]
        self.running: dict[int, Trajectory] = {}
        self.done: dict[int, Trajectory] = {}
        self.started: dict[int, float] = {}

    def run(self) -> list[Trajectory]:
        self.refill(list(range(self.runner.num_envs)))
        while self.running:
            active = [i for i, k in enumerate(self.slot) if k is not None]
            actions = self.act(active)
            t0 = time.perf_counter()
            new_obs, rewards, terminated, truncated, infos = self.runner.step(actions)
            self.stats.env_seconds += time.perf_counter() - t0
            self.stats.turns += len(active)
            finished = [
                i
                for i in active
                if self.record_step(i, new_obs[i], float(rewards[i]), bool(terminated[i]), bool(truncated[i]), infos[i])
            ]
            if finished:
                self.refill(finished)
        return [self.done[k] for k in range(len(self.specs))]

    def refill(self, slots: list[int]) -> None:
        """Reset each env in ``slots`` to the next pending episode (or leave it idle when none is left)."""
        n = self.runner.num_envs
        mask = [False] * n
        seeds: list[int | None] = [None] * n
        options: list[dict[str, Any] | None] = [None] * n
        for i in slots:
            self.slot[i] = self.queue.pop() if self.queue else None
            k = self.slot[i]
            if k is not None:
                mask[i], seeds[i], options[i] = True, self.specs[k].seed, self.specs[k].options
        if not any(mask):
            return
        t0 = time.perf_counter()
        new_obs, infos = self.runner.reset(seed=seeds, options=options, mask=mask)
        self.stats.env_seconds += time.perf_counter() - t0
        for i in (i for i in range(n) if mask[i]):
            k = self.slot[i]
            assert k is not None
            spec, self.obs[i] = self.specs[k], new_obs[i]
            self.running[k] = Trajectory(
                task_id=str(infos[i].get("task_id", "")),
                env_id=self.env_id,
                question=str(new_obs[i].get("question", "")),
                group=spec.group,
                sample=spec.sample,
                episode=k,
                seed=spec.seed,
            )
            self.started[k] = time.perf_counter()

    def act(self, active: list[int]) -> list[str | None]:
        """One batched policy call over the active envs; appends a turn to each running trajectory."""
        batch = [self.obs[i] for i in active]
        t0 = time.perf_counter()
        samples = self.policy.act_with_samples(batch) if self.use_samples else None  # type: ignore[attr-defined]
        actions = [s.text for s in samples] if samples is not None else list(self.policy.act(batch))
        self.stats.policy_seconds += time.perf_counter() - t0
        self.stats.policy_calls += 1
        if len(actions) != len(active):
            raise RuntimeError(f"the policy returned {len(actions)} actions for {len(active)} observations")
        full: list[str | None] = [None] * self.runner.num_envs
        for j, i in enumerate(active):
            traj = self.running[self.slot[i]]  # type: ignore[index]
            turn = Turn(turn=traj.num_turns + 1, prompt=str(self.obs[i].get("prompt", "")), action=str(actions[j]))
            if samples is not None:
                s = samples[j]
                turn.prompt_ids, turn.response_ids = list(s.prompt_ids), list(s.response_ids)
                turn.logprobs = list(s.logprobs)
            traj.turns.append(turn)
            full[i] = turn.action
        return full

    def record_step(
        self, i: int, obs: dict[str, Any], reward: float, terminated: bool, truncated: bool, info: Mapping[str, Any]
    ) -> bool:
        """Book one env's step; returns True when its episode is over."""
        k = self.slot[i]
        assert k is not None
        traj = self.running[k]
        self.obs[i] = obs
        traj.turns[-1].reward = reward
        traj.reward += reward
        over_budget = traj.num_turns >= self.max_turns and not (terminated or truncated)
        if not (terminated or truncated or over_budget):
            return False
        if over_budget:  # a runaway env: stop it here rather than loop forever
            logger.warning("episode %d hit the collector's max_turns=%d without ending", k, self.max_turns)
        traj.terminated, traj.truncated = terminated, truncated or over_budget
        traj.answer = info.get("answer")
        traj.score = float(info["score"]) if "score" in info else None
        _fill_from_env(traj, info)
        traj.seconds = time.perf_counter() - self.started.pop(k)
        self.done[k] = self.running.pop(k)
        self.stats.episodes += 1
        if self.progress is not None:
            self.progress(traj)
        return True


def _env_id(runner: VectorRunner, env_id: str | None) -> str:
    if env_id:
        return env_id
    envs = getattr(runner, "envs", None)
    spec = getattr(envs[0], "spec", None) if envs else None
    return str(getattr(spec, "id", "") or "")


def collect_rollouts(
    envs: VectorRunner | Sequence[Callable[[], Any]],
    policy: Policy,
    *,
    num_episodes: int | None = None,
    task_ids: Sequence[str] | None = None,
    seed: int | None = None,
    record_samples: bool = True,
    env_id: str | None = None,
    max_turns: int = 1000,
    max_workers: int | None = None,
    progress: Callable[[Trajectory], None] | None = None,
    stats: RolloutStats | None = None,
    scheduler: str = "auto",
    window_s: float = 0.005,
    concurrency: int | None = None,
) -> list[Trajectory]:
    """Play ``num_episodes`` random-task episodes (or one episode per id in ``task_ids``) on ``envs``.

    Each turn makes ONE batched ``policy.act`` (or ``act_with_samples`` when the policy has it and
    ``record_samples``) over every env with a running episode. When an episode ends its env is
    reset to the next pending episode, so no action ever reaches a finished env and every
    requested episode is played exactly once. Episode ``k`` is reset with ``seed + k`` (when
    ``seed`` is given), so which env plays it does not change its task. ``max_turns`` is a safety
    net for envs that never end. Returns trajectories in episode order; ``stats`` (if given) is
    filled with counters. ``scheduler``/``window_s``: see the module docstring; ``concurrency``: at most this
    many episodes in flight (default: one per env).
    """
    if (num_episodes is None) == (task_ids is None):
        raise ConfigError("give exactly one of num_episodes or task_ids")
    if task_ids is not None:
        specs = [
            EpisodeSpec(options={"task_id": t}, seed=None if seed is None else seed + k) for k, t in enumerate(task_ids)
        ]
    else:
        assert num_episodes is not None
        if num_episodes < 0:
            raise ConfigError(f"num_episodes must be >= 0, got {num_episodes}")
        specs = [EpisodeSpec(seed=None if seed is None else seed + k) for k in range(num_episodes)]
    options = _Options(
        record_samples, env_id, max_turns, max_workers, progress, stats, scheduler, window_s, concurrency
    )
    return _collect(envs, policy, specs, options)


def collect_group_rollouts(
    envs: VectorRunner | Sequence[Callable[[], Any]],
    policy: Policy,
    task_ids: Sequence[str],
    *,
    group_size: int,
    seed: int | None = None,
    record_samples: bool = True,
    env_id: str | None = None,
    max_turns: int = 1000,
    max_workers: int | None = None,
    progress: Callable[[Trajectory], None] | None = None,
    stats: RolloutStats | None = None,
    scheduler: str = "auto",
    window_s: float = 0.005,
    concurrency: int | None = None,
) -> list[list[Trajectory]]:
    """G = ``group_size`` rollouts of each task in ``task_ids`` (Flow-GRPO's groups).

    Returns one list per task id, in order, each holding its G trajectories (``group`` = task
    position, ``sample`` = 0..G-1). All G x len(task_ids) episodes share the vector env, so a
    group's samples usually run in the same batched ``act`` call. With a trainable policy each
    turn records ``prompt_ids``, ``response_ids`` and ``logprobs``.
    """
    if group_size < 1:
        raise ConfigError(f"group_size must be at least 1, got {group_size}")
    specs = [
        EpisodeSpec(options={"task_id": t}, seed=None if seed is None else seed + g * group_size + s, group=g, sample=s)
        for g, t in enumerate(task_ids)
        for s in range(group_size)
    ]
    options = _Options(
        record_samples, env_id, max_turns, max_workers, progress, stats, scheduler, window_s, concurrency
    )
    flat = _collect(envs, policy, specs, options)
    return [flat[g * group_size : (g + 1) * group_size] for g in range(len(task_ids))]


class _Scheduled:
    """Plays episode specs with :func:`agentflow_env.vector.scheduler.run_episodes`: env ``i`` of the vector belongs to
    worker ``i``, each episode runs on its own, and the policy's batches gather the episodes ready within
    ``window_s`` (several calls in flight for a ``concurrent_act`` policy). No turn waits for the slowest env and
    no reset waits for other episodes."""

    def __init__(
        self,
        runner: VectorRunner,
        policy: Policy,
        specs: Sequence[EpisodeSpec],
        env_id: str,
        record_samples: bool,
        progress: Callable[[Trajectory], None] | None,
        stats: RolloutStats,
        max_turns: int,
        window_s: float,
        concurrency: int | None,
    ):
        self.envs = list(runner.envs)  # type: ignore[attr-defined]
        if concurrency is not None:
            self.envs = self.envs[:concurrency]
        self.policy, self.specs, self.env_id = policy, specs, env_id
        self.use_samples = record_samples and callable(getattr(policy, "act_with_samples", None))
        self.progress, self.stats, self.max_turns, self.window_s = progress, stats, max_turns, window_s
        self.done: dict[int, Trajectory] = {}

    def act(self, batch: list[dict[str, Any]]) -> list[tuple[str, Any, str]]:
        """(action text, policy sample or None, the prompt it answered) per observation."""
        prompts = [str(obs.get("prompt", "")) for obs in batch]
        if self.use_samples:
            samples = list(self.policy.act_with_samples(batch))  # type: ignore[attr-defined]
            return [(s.text, s, p) for s, p in zip(samples, prompts)]
        return [(str(a), None, p) for a, p in zip(self.policy.act(batch), prompts)]

    def start(self, k: int, slot: int) -> tuple[Any, Any]:
        spec, env = self.specs[k], self.envs[slot]
        obs, info = env.reset(seed=spec.seed, options=spec.options)
        self.done[k] = Trajectory(
            task_id=str(info.get("task_id", "")),
            env_id=self.env_id,
            question=str(obs.get("question", "")),
            group=spec.group,
            sample=spec.sample,
            episode=k,
            seed=spec.seed,
        )
        return env, obs

    def record(self, ep: Any) -> None:
        """Book a finished episode (the calling thread, in finishing order)."""
        traj = self.done[ep.job]
        for i, ((text, sample, prompt), reward) in enumerate(zip(ep.acts, ep.rewards)):
            turn = Turn(turn=i + 1, prompt=prompt, action=text, reward=reward)
            if sample is not None:
                turn.prompt_ids, turn.response_ids = list(sample.prompt_ids), list(sample.response_ids)
                turn.logprobs = list(sample.logprobs)
            traj.turns.append(turn)
            traj.reward += reward
        traj.terminated, traj.truncated = bool(ep.terminated), bool(ep.truncated)
        traj.answer = ep.info.get("answer")
        traj.score = float(ep.info["score"]) if "score" in ep.info else None
        _fill_from_env(traj, ep.info)
        traj.seconds = ep.seconds
        self.stats.episodes += 1
        self.stats.turns += ep.turns
        if self.progress is not None:
            self.progress(traj)

    def run(self) -> list[Trajectory]:
        from agentflow_env.vector.scheduler import PlannerBatcher, SchedulerStats, run_episodes

        sched = SchedulerStats()
        n = len(self.envs)
        parallel = n if getattr(self.policy, "concurrent_act", False) else 1
        batcher = PlannerBatcher(self.act, window_s=self.window_s, max_batch=n, parallel=parallel, stats=sched)
        try:
            run_episodes(
                range(len(self.specs)),
                concurrency=min(n, len(self.specs)),
                start=self.start,
                batcher_for=lambda k: batcher,
                action_of=lambda item: item[0],
                finish=lambda ep: None,
                on_done=self.record,
                max_turns=self.max_turns,
                stats=sched,
            )
        finally:
            batcher.close()
            self.stats.policy_calls += sched.act_calls
            self.stats.policy_seconds += sched.act_seconds
        return [self.done[k] for k in range(len(self.specs))]


SCHEDULERS = ("auto", "episodes", "turns")


def _schedulable(runner: VectorRunner, policy: Policy, scheduler: str) -> bool:
    """Whether episodes run on their own (``"episodes"``) rather than in lock-step turns (``"turns"``).

    ``"auto"``: on their own when the policy takes concurrent ``act`` calls (an HTTP planner, whose actions do
    not depend on how observations are batched); in turns otherwise: a local model wants full batches, and its
    seeded sampling depends on the batch, so a seeded run repeats exactly only in turns.
    """
    if scheduler not in SCHEDULERS:
        raise ConfigError(f"scheduler={scheduler!r}; choose one of {', '.join(SCHEDULERS)}")
    if not hasattr(runner, "envs"):
        if scheduler == "episodes":
            raise ConfigError(f"{type(runner).__name__} does not expose its envs; scheduler='episodes' needs them")
        return False
    return scheduler == "episodes" or (scheduler == "auto" and bool(getattr(policy, "concurrent_act", False)))


@dataclass
class _Options:
    record_samples: bool
    env_id: str | None
    max_turns: int
    max_workers: int | None
    progress: Callable[[Trajectory], None] | None
    stats: RolloutStats | None
    scheduler: str
    window_s: float
    concurrency: int | None


def _collect(
    envs: VectorRunner | Sequence[Callable[[], Any]], policy: Policy, specs: list[EpisodeSpec], o: _Options
) -> list[Trajectory]:
    if o.concurrency is not None and o.concurrency < 1:
        raise ConfigError(f"concurrency must be at least 1, got {o.concurrency}")
    if not specs:
        return []
    runner, owned = _as_runner(envs, o.max_workers)
    stats = o.stats if o.stats is not None else RolloutStats()
    t0 = time.perf_counter()
    try:
        name = _env_id(runner, o.env_id)
        if _schedulable(runner, policy, o.scheduler):
            args = (o.record_samples, o.progress, stats, o.max_turns, o.window_s, o.concurrency)
            return _Scheduled(runner, policy, specs, name, *args).run()
        loop = _EpisodeLoop(runner, policy, specs, name, o.record_samples, o.progress, stats, o.max_turns)
        return loop.run()
    finally:
        stats.seconds += time.perf_counter() - t0
        if owned:
            runner.close()


@dataclass
class Rollouts:
    """One step's rollouts: B*G trajectories in group order, with rewards and per-turn samples."""

    rewards: list[float]
    turns: list[list[TurnSample]]
    turn_rewards: list[list[float]] = field(default_factory=list)  # each rollout's step rewards, in turn order
    scores: list[float] = field(default_factory=list)  # the env's score of each final answer (success: >= 1)
    tool_errors: int = 0
    num_turns: int = 0
    generated_tokens: int = 0


def to_rollouts(trajectories: Sequence[Any], reward_fn: Any = None) -> Rollouts:
    """Trajectories (from ``agents.training.rollout``) -> rewards and one :class:`TurnSample` per planner turn."""
    rewards, turns, turn_rewards, scores = [], [], [], []
    errors = n_turns = gen_tokens = 0
    for traj in trajectories:
        rewards.append(float(reward_fn(traj)) if reward_fn is not None else float(traj.reward))
        turn_rewards.append([float(turn.reward) for turn in traj.turns])
        scores.append(float(traj.score) if traj.score is not None else float(traj.reward))
        samples = []
        for turn in traj.turns:
            samples.append(
                TurnSample(
                    prompt_ids=list(turn.prompt_ids),
                    response_ids=list(turn.response_ids),
                    advantage=0.0,
                    rollout_logprobs=list(turn.logprobs or []),
                )
            )
            gen_tokens += len(turn.response_ids or [])
            errors += bool(getattr(turn, "error", None))
        n_turns += len(traj.turns)
        turns.append(samples)
    return Rollouts(
        rewards=rewards,
        turns=turns,
        turn_rewards=turn_rewards,
        scores=scores,
        tool_errors=errors,
        num_turns=n_turns,
        generated_tokens=gen_tokens,
    )
