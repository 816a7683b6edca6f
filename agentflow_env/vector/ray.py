"""``RayVectorEnv``: the envs live in Ray actors, behind the same ``VectorRunner`` surface as the local runner.

Each actor hosts a slice of the envs; the driver keeps the autoreset logic of
:class:`~agentflow_env.vector.threaded.ThreadedVectorEnv` by giving it one proxy per env. When an actor dies,
a new one replaces it and every episode it hosted is reported as truncated (``info["worker_lost"]``),
so no episode is silently lost. Needs the ``ray`` extra; Ray is imported only here.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from agentflow_env.error import ConfigError, DependencyNotInstalled
from agentflow_env.vector.threaded import ThreadedVectorEnv

__all__ = ["RayVectorEnv", "make_ray_vector_env"]

logger = logging.getLogger(__name__)


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:  # pragma: no cover - depends on the extra
        raise DependencyNotInstalled("ray", "ray") from exc
    return ray


def _identity(x: Any) -> Any:
    return x


class _EnvHost:
    """Actor body: builds its envs once and steps them on request (one thread per env)."""

    def __init__(self, env_fns: list[Callable[[], Any]]):
        self.envs = [fn() for fn in env_fns]

    def reset(self, j: int, seed: int | None, options: dict[str, Any] | None) -> tuple[Any, dict[str, Any]]:
        return self.envs[j].reset(seed=seed, options=options)

    def step(self, j: int, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        return self.envs[j].step(action)

    def step_timed(self, j: int, action: Any, planner_s: float) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """A step with the episode clock charged the planner's time and running only during the step."""
        from agentflow_env.vector.scheduler import timed_step

        return timed_step(self.envs[j], action, planner_s)

    def pause_clock(self, j: int) -> None:
        from agentflow_env.vector.scheduler import pause_clock

        pause_clock(self.envs[j])

    def pid(self) -> int:
        import os

        return os.getpid()

    def close(self) -> None:
        for env in self.envs:
            env.close()


class _Worker:
    """Driver-side handle of one actor; respawns it after a failure (once per failure generation)."""

    def __init__(self, actor_cls: Any, env_fns: list[Callable[[], Any]], actor_options: dict[str, Any]):
        self._cls, self._fns, self._opts = actor_cls, env_fns, actor_options
        self._lock = threading.Lock()
        self.generation = 0
        self.restarts = 0
        self.actor = self._spawn()

    def _spawn(self) -> Any:
        return self._cls.options(max_concurrency=max(len(self._fns), 1), **self._opts).remote(self._fns)

    def replace(self, seen_generation: int) -> None:
        with self._lock:
            if self.generation != seen_generation:  # another env of this actor already replaced it
                return
            ray = _ray()
            try:
                ray.kill(self.actor, no_restart=True)
            except Exception:  # it may already be gone
                pass
            self.actor = self._spawn()
            self.generation += 1
            self.restarts += 1
            logger.warning("a Ray env worker died; replaced it (restart %d)", self.restarts)


class _EnvProxy:
    """Looks like one env to ``ThreadedVectorEnv``; forwards to env ``j`` of a worker actor."""

    def __init__(self, worker: _Worker, j: int, timeout_s: float | None):
        self.worker, self.j, self.timeout_s = worker, j, timeout_s
        self.last_obs: Any = None
        self.episode_generation = -1  # the actor generation the running episode lives in

    def _call(self, method: str, *args: Any) -> Any:
        ray = _ray()
        actor = self.worker.actor
        return ray.get(getattr(actor, method).remote(self.j, *args), timeout=self.timeout_s)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        ray = _ray()
        for attempt in range(2):
            generation = self.worker.generation
            try:
                obs, info = self._call("reset", seed, options)
                self.last_obs, self.episode_generation = obs, generation
                return obs, info
            except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
                if attempt:
                    raise
                self.worker.replace(generation)
        raise AssertionError("unreachable")  # pragma: no cover

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        return self._step("step", action)

    def step_timed(self, action: Any, planner_s: float) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """``step`` with the remote env's episode clock handled there (see :mod:`agentflow_env.vector.scheduler`)."""
        return self._step("step_timed", action, planner_s)

    def pause_clock(self) -> None:
        ray = _ray()
        try:
            self._call("pause_clock")
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
            pass  # the next step finds the worker gone and reports the episode lost

    def _step(self, method: str, *args: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        ray = _ray()
        generation = self.worker.generation
        lost = generation != self.episode_generation  # the actor was replaced since this episode began
        if not lost:
            try:
                obs, reward, term, trunc, info = self._call(method, *args)
                self.last_obs = obs
                return obs, reward, term, trunc, info
            except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError) as exc:
                self.worker.replace(generation)
                error = f"{type(exc).__name__}: the env worker died or hung"
        else:
            error = "the env worker was replaced during this episode"
        # the episode is gone with its worker: report it truncated, with no reward, and keep going
        return self.last_obs, 0.0, False, True, {"worker_lost": True, "error": error, "answer": "", "score": 0.0}

    def close(self) -> None:
        """Actors are closed by :meth:`RayVectorEnv.close`."""


class RayVectorEnv(ThreadedVectorEnv):
    """N envs in ``num_workers`` Ray actors; same ``reset``/``step``/autoreset semantics as the local runner.

    ``env_fns`` must be picklable by Ray (lambdas and closures are fine). ``ray.init`` is called with
    ``ray_init`` kwargs when Ray is not running yet.
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], Any]],
        *,
        num_workers: int | None = None,
        autoreset_mode: str = "next_step",
        step_timeout_s: float | None = 600.0,
        actor_options: dict[str, Any] | None = None,
        ray_init: dict[str, Any] | None = None,
    ):
        if not env_fns:
            raise ConfigError("RayVectorEnv needs at least one env factory")
        ray = _ray()
        if not ray.is_initialized():
            ray.init(**{"include_dashboard": False, "log_to_driver": False, **(ray_init or {})})
        n = len(env_fns)
        workers = min(num_workers or n, n)
        if workers < 1:
            raise ConfigError(f"num_workers must be at least 1, got {num_workers}")
        actor_cls = ray.remote(num_cpus=0)(_EnvHost) if actor_options is None else ray.remote(_EnvHost)
        slices: list[list[int]] = [list(range(w, n, workers)) for w in range(workers)]
        self.workers = [_Worker(actor_cls, [env_fns[i] for i in idx], dict(actor_options or {})) for idx in slices]
        proxies: list[_EnvProxy | None] = [None] * n
        for worker, idx in zip(self.workers, slices):
            for j, i in enumerate(idx):
                proxies[i] = _EnvProxy(worker, j, step_timeout_s)
        factories: list[Callable[[], Any]] = [functools.partial(_identity, p) for p in proxies]
        super().__init__(factories, autoreset_mode=autoreset_mode, max_workers=n)

    @property
    def restarts(self) -> int:
        """How many actors were replaced after failures."""
        return sum(w.restarts for w in self.workers)

    def close(self) -> None:
        if self._closed:
            return
        super().close()
        ray = _ray()
        for worker in self.workers:
            try:
                ray.get(worker.actor.close.remote(), timeout=30)
            except Exception:  # a dead actor has nothing to close
                pass
            try:
                ray.kill(worker.actor, no_restart=True)
            except Exception:
                pass


def make_ray_vector_env(
    env_id: str, num_envs: int, *, num_workers: int | None = None, autoreset_mode: str = "next_step", **env_kwargs: Any
) -> RayVectorEnv:
    """``num_envs`` copies of ``gymnasium.make(env_id, **env_kwargs)`` spread over Ray actors."""

    def make() -> Any:
        import gymnasium as gym

        import agentflow_env  # noqa: F401  (registers the ids inside the actor)

        return gym.make(env_id, **env_kwargs)

    return RayVectorEnv([make] * num_envs, num_workers=num_workers, autoreset_mode=autoreset_mode)
