"""One env per answer grammar for the grammar tests: a one-task benchmark env, and an answer's reward in each of the
three action formats, through ``env.step``."""

from __future__ import annotations

import gymnasium as gym

from agentflow_env.types import ListTaskSource, Task
from benchmarks.specs import make_env
from tests.answer_styles import FORMATS, action

ALL, NONE = [1.0, 1.0, 1.0], [0.0, 0.0, 0.0]


def qa_env(answer: str, question: str, grammar: int, benchmark: str = "Bamboogle", family: str = "search") -> gym.Env:
    """``benchmark``'s env over one task (``question``, gold ``answer``), reading answers with ``grammar``."""
    tasks = ListTaskSource([Task("t", question, [answer], family=family)])
    return make_env(benchmark, tasks=tasks, grammar=grammar)


def rewards(env: gym.Env, answer: str) -> list[float]:
    """The reward of ``answer`` in each action format (text, JSON, tool call); each episode must end."""
    out = []
    for fmt in FORMATS:
        env.reset()
        _, reward, terminated, _, _ = env.step(action(answer, fmt))
        assert terminated
        out.append(reward)
    return out
