"""Plain records shared by every part: tasks, tool results, memory steps and turns.

They are dataclasses with ``to_dict`` so trajectories serialise to JSON without custom encoders.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

FAMILIES = ("search", "agentic", "math", "science")


@dataclass(frozen=True)
class Task:
    """One question with its gold answer.

    ``family`` is the paper's category (search, agentic, math, science); ``metadata`` holds
    whatever the scorer or tools need (multiple-choice options, the Game-of-24 numbers, ...).
    """

    id: str
    question: str
    answer: Any
    family: str = "math"
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @staticmethod
    def content_id(*parts: Any) -> str:
        """A stable id from the task's content (pids repeat in some files, content does not)."""
        blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha1(blob.encode("utf-8")).hexdigest()[:16]


@runtime_checkable
class TaskSource(Protocol):
    """An indexable collection of tasks; generated families may be arbitrarily long."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: int) -> Task: ...


class ListTaskSource:
    """A task source over an in-memory list, with lookup by task id."""

    def __init__(self, tasks: Sequence[Task]):
        self._tasks = list(tasks)
        self._by_id: dict[str, int] | None = None

    def __len__(self) -> int:
        return len(self._tasks)

    def __getitem__(self, index: int) -> Task:
        return self._tasks[index]

    def __iter__(self) -> Iterator[Task]:
        return iter(self._tasks)

    def index_of(self, task_id: str) -> int:
        if self._by_id is None:
            self._by_id = {t.id: i for i, t in enumerate(self._tasks)}
        try:
            return self._by_id[task_id]
        except KeyError:
            raise KeyError(f"no task with id {task_id!r} in this source ({len(self)} tasks)") from None


def find_task_index(source: TaskSource, task_id: str) -> int:
    """Index of ``task_id`` in ``source``: uses ``source.index_of`` when it has one, else scans."""
    index_of = getattr(source, "index_of", None)
    if callable(index_of):
        return int(index_of(task_id))
    for i in range(len(source)):
        if source[i].id == task_id:
            return i
    raise KeyError(f"no task with id {task_id!r} in this source ({len(source)} tasks)")


@dataclass(slots=True)
class ToolResult:
    """What a tool returns: the text the planner sees, whether it worked, and how long it took."""

    text: str
    ok: bool = True
    error: str | None = None
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(slots=True)
class MemoryStep:
    """One executed planner turn as remembered by the env."""

    turn: int
    tool: str | None
    sub_goal: str
    command: str
    result: str
    ok: bool = True
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        # written out: dataclasses.asdict deep-copies and dominates the step time
        return {
            "turn": self.turn,
            "tool": self.tool,
            "sub_goal": self.sub_goal,
            "command": self.command,
            "result": self.result,
            "ok": self.ok,
            "error": self.error,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MemoryStep:
        return cls(**d)


@dataclass
class TurnRecord:
    """One planner turn inside the env's trajectory (JSON-serialisable)."""

    turn: int
    action: str
    parsed: dict[str, Any]
    tool: str | None
    command: str | None
    result: str | None
    seconds: float
    error: str | None = None
    verifier: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "turn": self.turn,
            "action": self.action,
            "parsed": self.parsed,
            "tool": self.tool,
            "command": self.command,
            "result": self.result,
            "seconds": self.seconds,
            "error": self.error,
            "verifier": self.verifier,
        }
