"""Helpers more than one test file uses (test files never import each other)."""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

from agentflow_env.paper_flow.toolbox import (
    GENERALIST,
    GOOGLE_SEARCH,
    PYTHON_CODER,
    WEB_RAG,
    WIKIPEDIA,
    GeneralistTool,
    PaperTool,
    SearchStandIn,
    WebPageStandIn,
)
from agentflow_env.tools.base import BaseTool
from agentflow_env.types import ToolResult

HANG_S = 60  # the guard: a step this long is a hang


@contextlib.contextmanager
def hang_guard(seconds: int) -> Iterator[None]:
    """Fail (rather than hang) if the block runs past ``seconds``; a no-op off the main thread."""
    if not hasattr(signal, "SIGALRM") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum: int, frame: object) -> None:
        raise TimeoutError(f"env.step ran for over {seconds} s: a hang")

    previous = signal.signal(signal.SIGALRM, _raise)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def repeat_to(unit: str, size: int) -> str:
    return (unit * (size // max(len(unit), 1) + 1))[:size]


def cpu_step_seconds(env: Any, action: str) -> float:
    """This process's CPU seconds for one step: unlike wall time, it does not grow while a busy machine
    (other tests, a training run) keeps the process waiting, so growth ratios measure the parser alone."""
    with hang_guard(HANG_S):
        start = time.process_time()
        env.step(action)
        return time.process_time() - start


class FakeSearch(BaseTool):
    """A search backend that answers from a dict and remembers its queries."""

    name = "fake_search"

    def __init__(self, answers: dict[str, str] | None = None):
        self.answers = answers or {}
        self.queries: list[str] = []

    def _run(self, command: str, timeout: float) -> ToolResult:
        self.queries.append(command)
        for key, text in self.answers.items():
            if key in command:
                return ToolResult(text=text)
        return ToolResult(text="no passage found")


def paper_toolbox(engine: Any, search: FakeSearch) -> dict[str, PaperTool]:
    from agentflow_env.engines.base import SamplingParams

    return {
        GENERALIST: GeneralistTool(engine, SamplingParams(max_tokens=2048), "sys"),
        GOOGLE_SEARCH: SearchStandIn(GOOGLE_SEARCH, search, ("query", "add_citations")),
        PYTHON_CODER: SearchStandIn(PYTHON_CODER, FakeSearch(), ("query",)),
        WEB_RAG: WebPageStandIn(search),
        WIKIPEDIA: SearchStandIn(WIKIPEDIA, search, ("query",)),
    }


def length_reward(trajectory) -> float:
    """A reward that differs between rollouts of a random model (so advantages are not all zero)."""
    return (len(trajectory.turns[0].action) % 5) / 4.0


class ConcurrentScripted:
    """The Game of 24 scripted planner, declared safe for concurrent ``act`` calls (its actions depend on the
    observation only), so rollouts with ``scheduler="auto"`` run each episode on its own."""

    concurrent_act = True

    def __init__(self) -> None:
        from agents.policies.baselines import ScriptedGameOf24Planner

        self.inner = ScriptedGameOf24Planner()

    def act(self, observations: Any) -> list[str]:
        return self.inner.act(observations)


def flat_groups(groups: Any) -> list[tuple[Any, ...]]:
    """Group rollouts as comparable tuples: task, group, sample, every turn, answer and score."""
    return [
        (t.task_id, t.group, t.sample, [(u.prompt, u.action, u.result, u.reward) for u in t.turns], t.answer, t.score)
        for g in groups
        for t in g
    ]
