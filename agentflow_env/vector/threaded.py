"""``ThreadedVectorEnv``: N agentflow envs stepped concurrently in a thread pool, with lists in and out.

It defines the small vector interface rollouts use (a Ray-backed runner provides the same surface).

Why lists and not ``gymnasium.vector.VectorEnv``: observations are dicts of free text and infos
carry whole trajectories, so a list of per-env dicts is what every consumer (an LLM policy, the
rollout collector) wants; ``gymnasium.make_vec`` still gives the standard batched form.

The interface (``VectorRunner``):

* ``num_envs``; ``autoreset_mode`` in ``{"next_step", "same_step", "disabled"}``.
* ``reset(*, seed=None, options=None, mask=None) -> (obs_list, info_list)``. ``seed`` is an int
  (env ``i`` gets ``seed + i``) or a per-env list (``None`` entries keep the env's RNG);
  ``options`` is one dict for all envs or a per-env list (e.g. ``[{"task_id": ...}, ...]``);
  ``mask`` (bools) resets only those envs; the others report their current observation and
  ``{"reset": False}``.
* ``step(actions) -> (obs_list, rewards, terminated, truncated, info_list)``; ``actions`` has one
  entry per env and ``None`` skips an env (its last observation comes back with reward 0, both
  flags false and ``{"skipped": True}``). Rewards and flags are numpy arrays.
* ``close()``; the runner is also a context manager.

Autoreset (what happens to an env whose episode just ended):

* ``"next_step"`` (Gymnasium's default): the step that ends an episode returns its final
  observation and info; the *next* ``step`` resets that env instead of applying its action and
  returns the reset observation with reward 0, both flags false and ``info["autoreset"] = True``.
* ``"same_step"``: the env is reset inside the step that ended it; that step returns the new
  episode's first observation, the true reward and flags, and the ended episode's last
  observation and info under ``info["final_obs"]`` / ``info["final_info"]``.
* ``"disabled"``: nothing happens by itself; stepping a finished env with a non-``None`` action
  raises. The caller resets envs with ``reset(mask=..., options=...)``. Multi-turn rollout
  collection uses this mode so that it decides which task each env plays next.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, runtime_checkable

import numpy as np

from agentflow_env.error import ConfigError

__all__ = ["AUTORESET_MODES", "ThreadedVectorEnv", "VectorRunner", "make_vector_env"]

logger = logging.getLogger(__name__)

AUTORESET_MODES = ("next_step", "same_step", "disabled")

StepResult = tuple[list[dict[str, Any]], np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]


@runtime_checkable
class VectorRunner(Protocol):
    """The vector surface rollouts rely on (see the module docstring for the exact semantics)."""

    num_envs: int
    autoreset_mode: str

    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: Mapping[str, Any] | Sequence[Mapping[str, Any] | None] | None = None,
        mask: Sequence[bool] | None = None,
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]: ...

    def step(self, actions: Sequence[str | None]) -> StepResult: ...

    def close(self) -> None: ...


def _per_env(value: Any, n: int, name: str, scalar: Callable[[Any, int], Any]) -> list[Any]:
    if value is None:
        return [None] * n
    if isinstance(value, Mapping) or isinstance(value, (int, np.integer)):
        return [scalar(value, i) for i in range(n)]
    values = list(value)
    if len(values) != n:
        raise ValueError(f"{name} has {len(values)} entries but there are {n} envs; give one per env")
    return values


class ThreadedVectorEnv:
    """N envs behind the :class:`VectorRunner` interface; ``reset``/``step`` of the envs run in threads.

    Threads suit these envs: their time goes to tools (Python code runs in worker processes,
    searches release the GIL in numpy, HTTP engines wait on sockets), not to Python bytecode.
    ``max_workers`` defaults to ``num_envs`` (capped at 64); ``max_workers=0`` runs in the caller's
    thread (handy for debugging and for deterministic profiling).
    """

    def __init__(
        self, env_fns: Sequence[Callable[[], Any]], *, autoreset_mode: str = "next_step", max_workers: int | None = None
    ):
        if not env_fns:
            raise ConfigError("ThreadedVectorEnv needs at least one env factory")
        if autoreset_mode not in AUTORESET_MODES:
            raise ConfigError(f"autoreset_mode={autoreset_mode!r}; choose one of {', '.join(AUTORESET_MODES)}")
        self.envs = [fn() for fn in env_fns]
        self.num_envs = len(self.envs)
        self.autoreset_mode = autoreset_mode
        workers = min(self.num_envs, 64) if max_workers is None else int(max_workers)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="agentflow-env") if workers else None
        self._obs: list[dict[str, Any] | None] = [None] * self.num_envs
        self._done = [True] * self.num_envs  # no episode running until reset
        self._pending_reset = [False] * self.num_envs
        self._closed = False
        first = self.envs[0]
        self.single_observation_space = getattr(first, "observation_space", None)
        self.single_action_space = getattr(first, "action_space", None)
        self.metadata = getattr(first, "metadata", {})

    # ------------------------------------------------------------------ helpers
    def _map(self, fn: Callable[[int], Any], indices: Sequence[int]) -> list[Any]:
        if self._pool is None or len(indices) <= 1:
            return [fn(i) for i in indices]
        return list(self._pool.map(fn, indices))

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this vector env is closed; build a new one")

    @property
    def episode_done(self) -> list[bool]:
        """Per env: True when no episode is running (ended, or never reset)."""
        return list(self._done)

    # ------------------------------------------------------------------ API
    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: Mapping[str, Any] | Sequence[Mapping[str, Any] | None] | None = None,
        mask: Sequence[bool] | None = None,
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        self._check_open()
        seeds = _per_env(seed, self.num_envs, "seed", lambda s, i: int(s) + i)
        opts = _per_env(options, self.num_envs, "options", lambda o, i: dict(o))
        todo = _per_env(mask, self.num_envs, "mask", lambda m, i: m)
        indices = [i for i in range(self.num_envs) if mask is None or bool(todo[i])]

        def one(i: int) -> tuple[dict[str, Any], dict[str, Any]]:
            return self.envs[i].reset(seed=None if seeds[i] is None else int(seeds[i]), options=opts[i])

        results = dict(zip(indices, self._map(one, indices)))
        infos: list[dict[str, Any]] = []
        for i in range(self.num_envs):
            if i in results:
                self._obs[i], info = results[i]
                self._done[i] = False
                self._pending_reset[i] = False
                infos.append(dict(info))
            else:
                infos.append({"reset": False})
        return [dict(o) if o is not None else {} for o in self._obs], infos

    def step(self, actions: Sequence[str | None]) -> StepResult:
        self._check_open()
        actions = list(actions)
        if len(actions) != self.num_envs:
            raise ValueError(f"got {len(actions)} actions for {self.num_envs} envs; give one per env (None skips)")
        for i, a in enumerate(actions):
            if a is None or self._pending_reset[i]:
                continue
            if self._done[i]:
                raise RuntimeError(
                    f"env {i} has no running episode (autoreset_mode={self.autoreset_mode!r}); "
                    "reset it (reset(mask=...)) or pass None as its action"
                )
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminated = np.zeros(self.num_envs, dtype=bool)
        truncated = np.zeros(self.num_envs, dtype=bool)
        infos: list[dict[str, Any]] = [{"skipped": True} for _ in range(self.num_envs)]
        indices = [i for i in range(self.num_envs) if actions[i] is not None or self._pending_reset[i]]
        for i, result in zip(indices, self._map(lambda i: self._step_one(i, actions[i]), indices)):
            self._obs[i], rewards[i], terminated[i], truncated[i], infos[i] = result
        return [dict(o) if o is not None else {} for o in self._obs], rewards, terminated, truncated, infos

    def _step_one(self, i: int, action: str | None) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        env = self.envs[i]
        if self._pending_reset[i]:  # next_step autoreset: this call only resets
            obs, info = env.reset()
            self._pending_reset[i] = False
            self._done[i] = False
            return obs, 0.0, False, False, {**info, "autoreset": True}
        obs, reward, term, trunc, info = env.step(action)
        info = dict(info)
        if term or trunc:
            self._done[i] = True
            if self.autoreset_mode == "next_step":
                self._pending_reset[i] = True
            elif self.autoreset_mode == "same_step":
                final_obs, final_info = obs, info
                obs, reset_info = env.reset()
                self._done[i] = False
                info = {**reset_info, "final_obs": final_obs, "final_info": final_info}
        return obs, float(reward), bool(term), bool(trunc), info

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        for env in self.envs:
            try:
                env.close()
            except Exception:  # one env failing to close must not leak the others
                logger.exception("closing an env failed")

    def __enter__(self) -> ThreadedVectorEnv:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __len__(self) -> int:
        return self.num_envs

    def __repr__(self) -> str:
        return f"ThreadedVectorEnv(num_envs={self.num_envs}, autoreset_mode={self.autoreset_mode!r})"


def make_vector_env(
    env_id: str, num_envs: int, *, autoreset_mode: str = "next_step", max_workers: int | None = None, **env_kwargs: Any
) -> ThreadedVectorEnv:
    """``num_envs`` copies of ``gymnasium.make(env_id, **env_kwargs)`` in a :class:`ThreadedVectorEnv`."""
    import gymnasium as gym

    if num_envs < 1:
        raise ConfigError(f"num_envs must be at least 1, got {num_envs}")
    return ThreadedVectorEnv(
        [lambda: gym.make(env_id, **env_kwargs) for _ in range(num_envs)],
        autoreset_mode=autoreset_mode,
        max_workers=max_workers,
    )
