"""Episodes as independent units of work: N in flight, each on its own thread, the planner batched by a window.

``run_episodes`` keeps ``concurrency`` episodes in flight. Each one runs on a worker thread of its own: it takes
an env, resets it, asks the planner for an action, steps, and so on until the episode ends (the env's module
calls, tools, final answer and grading, a judge included, all run inside ``reset``/``step``), then the next
episode starts on that thread. No episode waits for another's turn.

The planner: episodes that need an action hand their observation to a :class:`PlannerBatcher`, which gathers
the observations that arrive within ``window_s`` of the first (or until every episode of that policy is
waiting, or ``max_batch`` are) and sends them in one ``act`` call. A policy that says ``concurrent_act``
may have several such calls in flight, so a batch never waits for the previous one; any other policy (a local
model) gets one call at a time, and the episodes that come ready meanwhile form the next batch. Batching is
never a barrier. An HTTP planner's calls are independent requests that its server batches itself, so the
runner asks it ``direct``: each episode's thread makes its own one-observation call, with no window.

Each episode's clock (:class:`~agentflow_env.clock.EpisodeClock`) counts only its own work: it is paused while
the episode waits (for a batch to fill, for its turn at the policy) and charged the planner call's duration,
so ``time_budget_s`` gives the same episode at concurrency 1 and 64.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from agentflow_env.error import ConfigError

__all__ = ["Episode", "PlannerBatcher", "SchedulerStats", "pause_clock", "run_episodes", "timed_step"]

logger = logging.getLogger(__name__)


def _clock(env: Any) -> Any:
    return getattr(getattr(env, "unwrapped", env), "clock", None)


def pause_clock(env: Any) -> None:
    """Stop ``env``'s episode clock (the episode now waits for its planner); no-op for envs without one."""
    pause = getattr(env, "pause_clock", None)  # a remote env proxy does it where the env lives
    if callable(pause):
        pause()
        return
    clock = _clock(env)
    if clock is not None:
        clock.pause()


def timed_step(env: Any, action: Any, planner_s: float = 0.0) -> tuple[Any, float, bool, bool, dict[str, Any]]:
    """``env.step(action)`` with the episode clock charged ``planner_s`` and running only during the step."""
    remote = getattr(env, "step_timed", None)
    if callable(remote):
        return remote(action, planner_s)
    clock = _clock(env)
    if clock is None:
        return env.step(action)
    clock.charge(planner_s)
    clock.resume()
    try:
        return env.step(action)
    finally:
        clock.pause()


@dataclass
class Episode:
    """One episode in flight: its job (the caller's), env, last observation and what happened so far."""

    job: Any
    slot: int
    env: Any = None
    obs: Any = None
    turns: int = 0
    acts: list[Any] = field(default_factory=list)  # per turn: what the act function gave for this episode
    rewards: list[float] = field(default_factory=list)
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = field(default_factory=dict)
    started: float = 0.0
    seconds: float = 0.0
    planner_s: float = 0.0  # the planner calls' time charged to this episode


@dataclass
class SchedulerStats:
    """Counters of one ``run_episodes`` call (read them while it runs for a progress bar)."""

    episodes: int = 0
    turns: int = 0
    in_flight: int = 0
    act_calls: int = 0
    act_seconds: float = 0.0
    batch_items: int = 0
    started: float = field(default_factory=time.monotonic)

    @property
    def episodes_per_s(self) -> float:
        return self.episodes / max(time.monotonic() - self.started, 1e-9)

    @property
    def mean_batch(self) -> float:
        return self.batch_items / self.act_calls if self.act_calls else 0.0


class PlannerBatcher:
    """Gathers observations of ready episodes within ``window_s`` into one ``act(batch)`` call.

    ``act`` takes a list of observations and returns one item per observation. ``parallel`` calls may be in
    flight at once. ``ask`` blocks its caller (an episode's thread) until its item is back and returns it with
    the call's duration.

    ``direct``: every ``ask`` is an ``act([obs])`` call of its own, made on the asking thread, with no window,
    dispatcher or pool in between (for a policy whose calls are independent requests to a server that batches
    them itself: an HTTP planner; gathering them first only adds the window and two thread hops per call).
    """

    def __init__(
        self,
        act: Callable[[list[Any]], list[Any]],
        *,
        window_s: float = 0.005,
        max_batch: int = 64,
        parallel: int = 1,
        stats: SchedulerStats | None = None,
        direct: bool = False,
    ):
        if window_s < 0 or max_batch < 1 or parallel < 1:
            raise ConfigError("window_s must be >= 0, max_batch and parallel >= 1")
        self.act, self.window_s, self.max_batch, self.parallel = act, window_s, max_batch, parallel
        self.stats = stats if stats is not None else SchedulerStats()
        self.direct = direct
        self._cond = threading.Condition()
        self._waiting: list[tuple[Any, Future[tuple[Any, float]], float]] = []
        self._active = 0  # episodes of this policy in flight
        self._in_act = 0  # of which inside an act call now
        self._calls = 0  # act calls in flight
        self._closed = False
        self._pool: ThreadPoolExecutor | None = None
        self._thread: threading.Thread | None = None
        if not direct:
            self._pool = ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="planner")
            self._thread = threading.Thread(target=self._dispatch, name="planner-batcher", daemon=True)
            self._thread.start()

    def enter(self) -> None:
        with self._cond:
            self._active += 1

    def leave(self) -> None:
        with self._cond:
            self._active -= 1
            self._cond.notify_all()

    def ask(self, obs: Any) -> tuple[Any, float]:
        if self.direct:
            return self._ask_directly(obs)
        fut: Future[tuple[Any, float]] = Future()
        with self._cond:
            if self._closed:
                raise RuntimeError("the planner batcher is closed")
            self._waiting.append((obs, fut, time.monotonic()))
            self._cond.notify_all()
        return fut.result()

    def _ask_directly(self, obs: Any) -> tuple[Any, float]:
        if self._closed:
            raise RuntimeError("the planner batcher is closed")
        t0 = time.perf_counter()
        out = list(self.act([obs]))
        seconds = time.perf_counter() - t0
        if len(out) != 1:
            raise RuntimeError(f"the policy returned {len(out)} actions for 1 observation")
        with self._cond:
            self.stats.act_calls += 1
            self.stats.act_seconds += seconds
            self.stats.batch_items += 1
        return out[0], seconds

    def _ready(self) -> bool:
        if not self._waiting or self._calls >= self.parallel:
            return False
        n = len(self._waiting)
        if n >= self.max_batch or n + self._in_act >= self._active:  # nobody else can join this batch
            return True
        return time.monotonic() >= self._waiting[0][2] + self.window_s

    def _dispatch(self) -> None:
        while True:
            with self._cond:
                while not self._closed and not self._ready():
                    timeout = None
                    if self._waiting and self._calls < self.parallel:
                        timeout = max(self._waiting[0][2] + self.window_s - time.monotonic(), 0.0)
                    self._cond.wait(timeout)
                if self._closed:
                    for _, fut, _ in self._waiting:
                        fut.set_exception(RuntimeError("the planner batcher closed"))
                    self._waiting.clear()
                    return
                batch, self._waiting = self._waiting[: self.max_batch], self._waiting[self.max_batch :]
                self._calls += 1
                self._in_act += len(batch)
            self._pool.submit(self._call, batch)

    def _call(self, batch: list[tuple[Any, Future[tuple[Any, float]], float]]) -> None:
        t0 = time.perf_counter()
        try:
            out = list(self.act([obs for obs, _, _ in batch]))
            if len(out) != len(batch):
                raise RuntimeError(f"the policy returned {len(out)} actions for {len(batch)} observations")
            error = None
        except BaseException as exc:  # every waiting episode gets the error
            out, error = [], exc
        seconds = time.perf_counter() - t0
        with self._cond:
            self._calls -= 1
            self._in_act -= len(batch)
            self.stats.act_calls += 1
            self.stats.act_seconds += seconds
            self.stats.batch_items += len(batch)
            self._cond.notify_all()
        for i, (_, fut, _) in enumerate(batch):
            if error is not None:
                fut.set_exception(error)
            else:
                fut.set_result((out[i], seconds))

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._pool is not None:
            self._pool.shutdown(wait=False)


_DONE = object()


def run_episodes(
    jobs: Iterable[Any],
    *,
    concurrency: int,
    start: Callable[[Any, int], tuple[Any, Any]],
    batcher_for: Callable[[Any], PlannerBatcher],
    action_of: Callable[[Any], Any],
    finish: Callable[[Episode], None],
    on_done: Callable[[Episode], None],
    max_turns: int | None = None,
    stats: SchedulerStats | None = None,
    on_tick: Callable[[], None] | None = None,
) -> SchedulerStats:
    """Play every job, ``concurrency`` at a time; returns when all are done or one failed (then it raises).

    - ``start(job, slot)`` (worker thread): an env and its first observation (acquire an env and reset it).
    - ``batcher_for(job)``: the :class:`PlannerBatcher` of the job's policy; its item per observation is kept
      in ``Episode.acts`` and ``action_of(item)`` is the action the env is stepped with.
    - ``finish(episode)`` (worker thread, also after a failure): give the env back.
    - ``on_done(episode)`` (the calling thread, in finishing order): store the finished episode.
    - ``max_turns``: a safety net for envs that never end (the episode counts as truncated).
    - ``on_tick``: called about every 0.2 s on the calling thread (a progress bar).
    A failure in any episode stops new ones from starting; the episodes in flight end after their current
    call, are not passed to ``on_done``, and the error is raised here.
    """
    if concurrency < 1:
        raise ConfigError(f"concurrency must be at least 1, got {concurrency}")
    run = _Run(jobs, start, batcher_for, action_of, finish, max_turns, stats or SchedulerStats())
    return run.play_all(concurrency, on_done, on_tick)


class _Run:
    """The state of one ``run_episodes`` call: the job source, the stop flag, the queue of finished episodes."""

    def __init__(
        self,
        jobs: Iterable[Any],
        start: Callable[[Any, int], tuple[Any, Any]],
        batcher_for: Callable[[Any], PlannerBatcher],
        action_of: Callable[[Any], Any],
        finish: Callable[[Episode], None],
        max_turns: int | None,
        stats: SchedulerStats,
    ):
        self.source = iter(jobs)
        self.start, self.batcher_for, self.action_of, self.finish = start, batcher_for, action_of, finish
        self.max_turns, self.stats = max_turns, stats
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.done: queue.Queue[Any] = queue.Queue()

    def take(self) -> Any:
        """The next job, already counted by its batcher (so a batch knows who else will come)."""
        with self.lock:
            job = next(self.source, _DONE) if not self.stop.is_set() else _DONE
        if job is not _DONE:
            self.batcher_for(job).enter()
        return job

    def play(self, job: Any, slot: int) -> tuple[Episode | None, Any]:
        """Play ``job``; returns it (None when stopped) and the next job, taken before this one leaves."""
        ep = Episode(job=job, slot=slot, started=time.perf_counter())
        batcher = self.batcher_for(job)
        try:
            ep.env, ep.obs = self.start(job, slot)
            pause_clock(ep.env)
            while not self.stop.is_set():
                if self.step(ep, batcher):
                    ep.seconds = time.perf_counter() - ep.started
                    return ep, self.take()
            return None, _DONE
        finally:
            batcher.leave()
            if ep.env is not None:
                self.finish(ep)

    def step(self, ep: Episode, batcher: PlannerBatcher) -> bool:
        """One planner turn and env step of ``ep``; True when the episode is over."""
        item, seconds = batcher.ask(ep.obs)
        ep.acts.append(item)
        ep.planner_s += seconds
        ep.obs, reward, ep.terminated, ep.truncated, ep.info = timed_step(ep.env, self.action_of(item), seconds)
        ep.turns += 1
        ep.rewards.append(float(reward))
        with self.lock:
            self.stats.turns += 1
        if ep.terminated or ep.truncated:
            return True
        if self.max_turns is not None and ep.turns >= self.max_turns:
            logger.warning("an episode hit the scheduler's max_turns=%d without ending", self.max_turns)
            ep.truncated = True
            return True
        return False

    def worker(self, slot: int, job: Any) -> None:
        try:
            while job is not _DONE:
                with self.lock:
                    self.stats.in_flight += 1
                try:
                    ep, job = self.play(job, slot)
                finally:
                    with self.lock:
                        self.stats.in_flight -= 1
                if ep is not None:
                    self.done.put(ep)
        except BaseException as exc:
            self.stop.set()
            self.done.put(exc)
        finally:
            self.done.put(_DONE)

    def play_all(
        self, concurrency: int, on_done: Callable[[Episode], None], on_tick: Callable[[], None] | None
    ) -> SchedulerStats:
        firsts = [job for job in (self.take() for _ in range(concurrency)) if job is not _DONE]
        for i, job in enumerate(firsts):
            threading.Thread(target=self.worker, args=(i, job), name=f"episode-{i}", daemon=True).start()
        running, error = len(firsts), None
        try:
            while running:
                try:
                    item = self.done.get(timeout=0.2)
                except queue.Empty:
                    item = None
                if item is _DONE:
                    running -= 1
                elif isinstance(item, BaseException):
                    error = error or item
                elif item is not None and error is None:
                    error = self.deliver(item, on_done)
                if on_tick is not None:
                    on_tick()
        except BaseException:
            self.stop.set()
            raise
        if error is not None:
            raise error
        return self.stats

    def deliver(self, ep: Episode, on_done: Callable[[Episode], None]) -> BaseException | None:
        try:
            on_done(ep)
        except BaseException as exc:
            self.stop.set()
            return exc
        with self.lock:
            self.stats.episodes += 1
        return None
