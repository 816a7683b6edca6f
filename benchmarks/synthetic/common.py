"""Shared machinery of the generated families: content-hash splits, lazily generated task sources, and
parameter objects (``WorldOptions``) offered as keyword options.

A task belongs to a split by a hash of its *content* (never of its index), so train, validation
and test are disjoint by construction, whatever the seed or size. Families whose splits draw from
separate material (Gen-MultiHop and Gen-Agentic: one generated world per split) are disjoint by that
material instead, and skip the hash filter.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import threading
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from typing import Any, TypeVar

import numpy as np

from agentflow_env.error import ConfigError
from agentflow_env.types import Task

SPLITS = ("train", "validation", "test")
# hash bucket (0..99) ranges per split
_BUCKETS = {"train": (0, 80), "validation": (80, 90), "test": (90, 100)}


_F = TypeVar("_F", bound=Callable[..., Any])


def built_once(maxsize: int | None = 16) -> Callable[[_F], _F]:
    """Memoise a shared precompute (a puzzle pool, a world, an index) so that concurrent first calls with
    the same arguments build it once: the others wait for it (``lru_cache`` alone lets every thread that
    misses build its own copy, as 64 env creations at once on a fresh env server did)."""

    def decorate(fn: _F) -> _F:
        cached = functools.lru_cache(maxsize=maxsize)(fn)
        locks: dict[Any, threading.RLock] = {}
        guard = threading.Lock()

        @functools.wraps(fn)
        def wrapper(*args: Any) -> Any:
            with guard:
                lock = locks.setdefault(args, threading.RLock())
            with lock:
                return cached(*args)

        wrapper.cache_clear = cached.cache_clear  # type: ignore[attr-defined]
        wrapper.cache_info = cached.cache_info  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return decorate


def options_as_keywords(
    param: str, options: type, names: Sequence[str] | None = None, defaults: Mapping[str, Any] | None = None
) -> Callable[[_F], _F]:
    """Let ``fn(..., <param>: options)`` be called with the fields of the dataclass ``options`` (or ``names`` of
    them) as keyword-only options, with the dataclass's defaults (or ``defaults``).

    The wrapper's signature lists those fields in place of ``param``, so ``BenchmarkSpec`` (which reads the
    options a loader takes from its signature), ``make_env``, protocols and ``help()`` see plain keywords,
    while the body receives one parameter object.
    """
    fields = {f.name: f for f in dataclasses.fields(options)}
    picked = list(fields) if names is None else list(names)
    unknown = set(picked) - set(fields) or set(defaults or {}) - set(picked)
    if unknown:
        raise TypeError(f"{options.__name__} has no keyword option {', '.join(sorted(unknown))} to expose")
    keywords = [
        inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            default=(defaults or {}).get(name, fields[name].default),
            annotation=fields[name].type,
        )
        for name in picked
    ]

    def decorate(fn: _F) -> _F:
        own = inspect.signature(fn)
        if param not in own.parameters:
            raise TypeError(f"{fn.__qualname__} takes no {param!r} to build from keyword options")
        signature = own.replace(parameters=[p for p in own.parameters.values() if p.name != param] + keywords)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            values = {name: bound.arguments.pop(name) for name in picked}
            return fn(*bound.args, **bound.kwargs, **{param: options(**values)})

        wrapper.__signature__ = signature  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return decorate


def check_split(split: str) -> str:
    aliases = {"val": "validation", "valid": "validation", "dev": "validation", "eval": "test"}
    split = aliases.get(split, split)
    if split not in SPLITS:
        raise ConfigError(f"split={split!r}; choose one of {', '.join(SPLITS)}")
    return split


@functools.lru_cache(maxsize=1 << 16)  # pools re-split the same keys at every env creation
def split_of(content_key: str) -> str:
    """The split a piece of content belongs to (stable across machines and Python versions)."""
    bucket = int(hashlib.sha1(content_key.encode("utf-8")).hexdigest()[:8], 16) % 100
    for name, (lo, hi) in _BUCKETS.items():
        if lo <= bucket < hi:
            return name
    raise AssertionError(bucket)  # pragma: no cover


class GeneratedTasks:
    """A lazily generated, indexable task source of ``num_tasks`` tasks of one split.

    ``make(rng) -> (content_key, Task)`` draws one candidate; candidates whose content key hashes
    to another split, or that repeat an earlier key, are skipped. Task ``i`` depends only on
    ``(family, seed, split, i)``, so sources of any size agree on their common prefix.

    ``by_content_hash=False`` keeps every new key: for a ``make`` that already draws only from its
    split's own material (its own world), where the hash would just throw draws away.
    """

    def __init__(
        self,
        family: str,
        split: str,
        make: Callable[[np.random.Generator], tuple[str, Task]],
        num_tasks: int = 500,
        seed: int = 0,
        max_tries: int = 10_000,
        by_content_hash: bool = True,
    ):
        if num_tasks < 1:
            raise ConfigError(f"num_tasks must be positive, got {num_tasks}")
        self.family, self.split, self.seed = family, check_split(split), int(seed)
        self.num_tasks = int(num_tasks)
        self._make = make
        self._max_tries = max_tries
        self._by_content_hash = by_content_hash
        self._tasks: list[Task] = []
        self._keys: set[str] = set()
        self._draws = 0
        self._by_id: dict[str, int] = {}
        # envs of a concurrent run share this source: two threads drawing at once would swap tasks' contents
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:  # a lock does not pickle (Ray ships task sources to workers)
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self.num_tasks

    def __getitem__(self, index: int) -> Task:
        if index < 0:
            index += self.num_tasks
        if not 0 <= index < self.num_tasks:
            raise IndexError(f"task index {index} out of range for {self.num_tasks} tasks")
        if index < len(self._tasks):
            return self._tasks[index]
        with self._lock:
            while len(self._tasks) <= index:
                self._tasks.append(self._next())
        return self._tasks[index]

    def __iter__(self):
        return (self[i] for i in range(self.num_tasks))

    def index_of(self, task_id: str) -> int:
        for i in range(self.num_tasks):
            task = self[i]
            self._by_id.setdefault(task.id, i)
            if task.id == task_id:
                return i
        raise KeyError(f"no task {task_id!r} in the first {self.num_tasks} tasks of {self.family}/{self.split}")

    def _next(self) -> Task:
        for _ in range(self._max_tries):
            rng = np.random.default_rng([_stable_int(self.family), self.seed, SPLITS.index(self.split), self._draws])
            self._draws += 1
            key, task = self._make(rng)
            if key in self._keys or (self._by_content_hash and split_of(f"{self.family}:{key}") != self.split):
                continue
            self._keys.add(key)
            return task
        raise ConfigError(
            f"{self.family}: could not draw a new {self.split} task after {self._max_tries} tries; "
            "the settings allow too few distinct tasks — raise the difficulty ranges or lower num_tasks"
        )


class FixedPoolTasks:
    """A task source over a finite pool (e.g. all Game-of-24 puzzles), split by content, shuffled by seed."""

    def __init__(
        self, family: str, split: str, pool: Sequence[tuple[str, Task]], seed: int = 0, num_tasks: int | None = None
    ):
        split = check_split(split)
        mine = [task for key, task in pool if split_of(f"{family}:{key}") == split]
        order = np.random.default_rng([_stable_int(family), int(seed)]).permutation(len(mine))
        tasks = [mine[i] for i in order]
        if num_tasks is not None:
            if num_tasks < 1:
                raise ConfigError(f"num_tasks must be positive, got {num_tasks}")
            tasks = tasks[:num_tasks]
        if not tasks:
            raise ConfigError(f"{family}/{split} has no tasks with these settings")
        self.family, self.split = family, split
        self._tasks = tasks
        self._index = {t.id: i for i, t in enumerate(tasks)}

    def __len__(self) -> int:
        return len(self._tasks)

    def __getitem__(self, index: int) -> Task:
        return self._tasks[index]

    def __iter__(self):
        return iter(self._tasks)

    def index_of(self, task_id: str) -> int:
        try:
            return self._index[task_id]
        except KeyError:
            raise KeyError(f"no task {task_id!r} in {self.family}/{self.split}") from None


@cache
def _stable_int(text: str) -> int:
    return int(hashlib.sha1(text.encode("utf-8")).hexdigest()[:8], 16)
