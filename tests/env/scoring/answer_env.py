"""One env per answer grammar for the grammar tests: a one-task benchmark env, and an answer's reward in each of the
three action formats, through ``env.step``."""

from __future__ import annotations

import gymnasium as gym
import pytest

from agentflow_env.types import ListTaskSource, Task
from benchmarks.specs import make_env
from tests.answer_styles import FORMATS, action

ALL, NONE = [1.0, 1.0, 1.0], [0.0, 0.0, 0.0]
# the grammar tests' number and name tasks: a gold, a rival of its type, and the question
GOLD, RIVAL = "508", "580"
QUESTION = "How many lattice points lie strictly inside the triangle?"
NAME, OTHER = "Marie Curie", "Lise Meitner"
WHO = "Who was the first woman to win a Nobel Prize?"


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


def grammar_fixtures(grammar: int) -> tuple:
    """Module fixtures for ``grammar``'s tests: the number task's env, the name task's env and a yes/no task's env
    (a test module assigns them to ``number_env, name_env, yes_env``)."""

    @pytest.fixture(scope="module")
    def number_env() -> gym.Env:
        return qa_env(GOLD, QUESTION, grammar)

    @pytest.fixture(scope="module")
    def name_env() -> gym.Env:
        return qa_env(NAME, WHO, grammar)

    @pytest.fixture(scope="module")
    def yes_env() -> gym.Env:
        return qa_env("yes", "Is the Danube longer than the Rhine?", grammar)

    return number_env, name_env, yes_env


def assert_committed(env: gym.Env, template: str, old: str, new: str) -> None:
    """``template`` with ``new`` committed after ``old`` scores 1 in every format, and its mirror (the values
    swapped) scores 0."""
    assert rewards(env, template.format(old=old, new=new)) == ALL, template
    assert rewards(env, template.format(old=new, new=old)) == NONE, template


def assert_hedge(env: gym.Env, template: str, old: str, new: str) -> None:
    """``template`` scores 0 in every format in both orders of the two values."""
    assert rewards(env, template.format(old=old, new=new)) == NONE, template
    assert rewards(env, template.format(old=new, new=old)) == NONE, template
