"""The scorer protocol: (prediction, task) -> a value in [0, 1]."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from agentflow_env.types import Task


@runtime_checkable
class Scorer(Protocol):
    """Maps the final answer and the task (gold answer plus metadata) to a score in [0, 1]."""

    def __call__(self, prediction: str, task: Task) -> float: ...
