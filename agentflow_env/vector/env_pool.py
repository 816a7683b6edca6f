"""``EnvPool``: envs to borrow and give back, by env id and keyword arguments, so episodes reuse built envs.

Building an ``agentflow/*`` env loads its tasks, scorer and tools (an index, a sandbox); a runner that plays one
episode after another borrows an env, plays, and gives it back, and the next borrower of the same
``(env id, kwargs)`` gets it again, reset by its own ``reset``. The pool is thread-safe and bounded: at most
``max_idle`` idle envs per key are kept (one given back beyond that is closed), and with ``max_envs`` at most that
many envs live at once (idle and borrowed together): a borrow then waits for a give-back, closing an idle env of
another key to make room, and raises :class:`~agentflow_env.error.ConfigError` after ``timeout_s``.
``close()`` (or leaving ``with EnvPool(...) as pool:``) closes every idle env, and any env given back afterwards.

    from agentflow_env.vector import EnvPool

    with EnvPool() as pool:
        env = pool.borrow("agentflow/Gen-GameOf24-v3", max_turns=4)
        try:
            obs, info = env.reset(seed=0)
        finally:
            pool.give_back(env)
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from agentflow_env.error import ConfigError

__all__ = ["EnvPool", "pool_key"]

logger = logging.getLogger(__name__)


def _gym_make(env_id: str, **kwargs: Any) -> Any:
    import gymnasium as gym

    import agentflow_env  # noqa: F401  (registers the agentflow/* ids)

    return gym.make(env_id, **kwargs)


def pool_key(env_id: str, kwargs: dict[str, Any]) -> str:
    """The key envs are pooled under: the id and the kwargs, as canonical JSON (``repr`` for other values)."""
    return json.dumps([env_id, kwargs], sort_keys=True, default=repr)


class EnvPool:
    """Envs by ``(env id, kwargs)``, borrowed and given back; see the module docstring.

    ``make(env_id, **kwargs)`` builds an env (default: ``gymnasium.make``); ``max_idle``: idle envs kept per key;
    ``max_envs``: envs alive at once (None: no limit); ``timeout_s``: how long a borrow waits for room.
    """

    def __init__(
        self,
        make: Callable[..., Any] = _gym_make,
        *,
        max_idle: int = 64,
        max_envs: int | None = None,
        timeout_s: float = 600.0,
    ):
        if max_idle < 0 or (max_envs is not None and max_envs < 1):
            raise ConfigError(f"EnvPool: max_idle={max_idle} must be >= 0 and max_envs={max_envs} >= 1 (or None)")
        self.make, self.max_idle, self.max_envs, self.timeout_s = make, int(max_idle), max_envs, float(timeout_s)
        self._idle: dict[str, list[Any]] = {}
        self._borrowed: dict[int, tuple[str, Any]] = {}  # id(env) -> (key, env)
        self._doomed: set[int] = set()  # id(env) of borrowed envs that close when given back (close_env_id)
        self._live = 0  # idle + borrowed + being built
        self._cond = threading.Condition()
        self._closed = False

    # ------------------------------------------------------------------ borrow and give back
    def borrow(self, env_id: str, **kwargs: Any) -> Any:
        """An idle env of ``(env_id, kwargs)``, or a new one (built outside the lock)."""
        key = pool_key(env_id, kwargs)
        deadline = time.monotonic() + self.timeout_s
        while True:
            victim = None
            with self._cond:
                if self._closed:
                    raise ConfigError("EnvPool: borrow after close()")
                idle = self._idle.get(key)
                if idle:
                    env = idle.pop()
                    self._borrowed[id(env)] = (key, env)
                    return env
                if self.max_envs is None or self._live < self.max_envs:
                    self._live += 1
                    break
                victim = next((envs.pop() for envs in self._idle.values() if envs), None)
                if victim is None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise ConfigError(
                            f"EnvPool: all {self.max_envs} envs (max_envs) stayed borrowed for {self.timeout_s:g} s"
                        )
                    self._cond.wait(left)
                    continue
                self._live -= 1  # room for this key: an idle env of another key goes (closed outside the lock)
            _close(victim)
        try:
            env = self.make(env_id, **kwargs)
        except BaseException:
            with self._cond:
                self._live -= 1
                self._cond.notify()
            raise
        with self._cond:
            self._borrowed[id(env)] = (key, env)
        return env

    def give_back(self, env: Any, *, broken: bool = False) -> None:
        """Return a borrowed env: kept idle for the next borrower, or closed (``broken``, the pool closed, its key
        closed by :meth:`close_env_id`, or ``max_idle`` idle already)."""
        with self._cond:
            entry = self._borrowed.pop(id(env), None)
            if entry is None:
                raise ConfigError("EnvPool.give_back: this env was not borrowed from this pool (or given back twice)")
            key, doomed = entry[0], id(env) in self._doomed
            self._doomed.discard(id(env))
            idle = self._idle.setdefault(key, [])
            keep = not (broken or doomed or self._closed or len(idle) >= self.max_idle)
            if keep:
                idle.append(env)
            else:
                self._live -= 1
            self._cond.notify()
        if not keep:
            _close(env)

    @contextmanager
    def env(self, env_id: str, **kwargs: Any) -> Iterator[Any]:
        """``with pool.env(id, **kwargs) as env:`` borrows and gives back (closed, not reused, if the body raised)."""
        env = self.borrow(env_id, **kwargs)
        ok = False
        try:
            yield env
            ok = True
        finally:
            self.give_back(env, broken=not ok)

    # ------------------------------------------------------------------ closing
    def close_env_id(self, env_id: str) -> None:
        """Close the idle envs of ``env_id`` (any kwargs) now and its borrowed ones when given back."""
        with self._cond:
            self._doomed.update(i for i, (k, _) in self._borrowed.items() if json.loads(k)[0] == env_id)
            doomed = [env for k in [k for k in self._idle if json.loads(k)[0] == env_id] for env in self._idle.pop(k)]
            self._live -= len(doomed)
            self._cond.notify_all()
        for env in doomed:
            _close(env)

    def close(self) -> None:
        """Close every idle env; envs still borrowed close when given back. Borrowing afterwards raises."""
        with self._cond:
            self._closed = True
            doomed = [env for idle in self._idle.values() for env in idle]
            self._idle.clear()
            self._live -= len(doomed)
            self._cond.notify_all()
        for env in doomed:
            _close(env)

    def __enter__(self) -> EnvPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ reading
    def counts(self) -> dict[str, int]:
        """``{"idle": ..., "borrowed": ..., "live": ...}`` (live: idle, borrowed and being built)."""
        with self._cond:
            idle = sum(len(v) for v in self._idle.values())
            return {"idle": idle, "borrowed": len(self._borrowed), "live": self._live}


def _close(env: Any) -> None:
    try:
        env.close()
    except Exception:  # a failing close must not lose the other envs, nor the caller's episode
        logger.exception("closing a pooled env failed")
