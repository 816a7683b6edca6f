"""Both error rates of every registered env's reward, on answers generated from the gold answers.

``tests/reward_cases.py`` writes, per task, hedges that a careful human grader marks wrong (two or five
candidates in LaTeX with ``\\text{ ou }``/``\\mbox{ oder }``/``\\text{?}``, ``\\lor``, ``‖``, ``|``, a
Cyrillic "оr", lists, lines, sentences, several boxes/tags/answer lines, "maybe", ranges, ...) and
committed correct answers written naturally (an explanation after the answer, ``22 cm^2``, ``2 338 520``,
``2.33852 \\times 10^{6}``, quotes, "I believe it is ..", "204, not 205", multiple choice with an
explanation or naming the rejected options, Game of 24 in a sentence, ...). Every registered id is scored
on its own deterministic sample of tasks (the versions of one name take different tasks), by the env's own
scorer; a few answers per id also go through ``env.step``. Over all ids there are >= 10,000 of each.

Targets (issue 25): hedges that pay <= 0.1% and correct answers scored 0 <= 1%, per id.
``python perf/reward_quality.py`` measures both rates on more tasks and prints them per id.
"""

from __future__ import annotations

import math
from functools import cache

import gymnasium as gym
import pytest

import agentflow_env  # noqa: F401  (registers the ids)
from agentflow_env.registration import registered_ids
from tests.conftest import TESTSETS
from tests.reward_cases import golds_of, kind_of, spread, task_cases

IDS = registered_ids()
pytestmark = pytest.mark.filterwarnings("ignore:.*is out of date:DeprecationWarning", "ignore::UserWarning")
TASKS_PER_ID = 12
MIN_CASES = 10_000


def _is_paper(env_id: str) -> bool:
    from benchmarks.paper.catalog import BENCHMARKS

    return gym.spec(env_id).kwargs.get("benchmark") in BENCHMARKS


@cache
def _base(benchmark: str, paper: bool, version: int):
    """One env per benchmark name and grammar: v0-v2 build the same env, each later version reads with its own grammar
    (see registration.py)."""
    kwargs = {"data_dir": str(TESTSETS)} if paper else {}
    return gym.make(f"agentflow/{benchmark}-v{max(version, 2)}", **kwargs).unwrapped


def _sample(env_id: str, n_tasks: int) -> list[int]:
    """This id's tasks: spread over the task list, shifted by the version so versions see other tasks."""
    version = gym.spec(env_id).version or 0
    per_id = TASKS_PER_ID if TESTSETS.is_dir() else 3 * TASKS_PER_ID
    return sorted({(i + version * 7) % n_tasks for i in spread(n_tasks, per_id)})


def _cases(env_id: str):
    spec = gym.spec(env_id)
    base = _base(spec.kwargs["benchmark"], _is_paper(env_id), spec.version or 0)
    tasks = base.tasks
    pool = [g for i in spread(len(tasks), 60) for g in golds_of(tasks[i])]
    kind = kind_of(base.scorer)
    for index in _sample(env_id, len(tasks)):
        for case in task_cases(tasks[index], kind, pool):
            yield base, index, case


@pytest.mark.parametrize("env_id", IDS)
def test_hedges_do_not_pay_and_correct_answers_score_one(env_id, request):
    if _is_paper(env_id):
        request.getfixturevalue("testsets_dir")  # skips without AgentFlow's test sets
    hedges = correct = 0
    paid, zeroed = [], []
    for base, index, case in _cases(env_id):
        task = base.tasks[index]
        score = float(base.scorer(case.answer, task))
        if case.kind == "hedge":
            hedges += 1
            if score > 0:
                paid.append((case.template, golds_of(task)[:1], case.answer))
        else:
            correct += 1
            if score < 1:
                zeroed.append((case.template, golds_of(task)[:1], case.answer))
    assert hedges > 100 and correct > 100
    assert len(paid) <= math.floor(0.001 * hedges), f"{len(paid)}/{hedges} hedges paid:\n" + "\n".join(
        map(repr, paid[:20])
    )
    assert len(zeroed) <= math.floor(0.01 * correct), f"{len(zeroed)}/{correct} correct scored 0:\n" + "\n".join(
        map(repr, zeroed[:20])
    )


@pytest.mark.parametrize("env_id", IDS)
def test_the_env_pays_what_its_scorer_says(env_id, request):
    """The same answers through ``env.step``: a hedge and a correct answer of each template family."""
    kwargs = {}
    if _is_paper(env_id):
        kwargs["data_dir"] = str(request.getfixturevalue("testsets_dir"))
    env = gym.make(env_id, **kwargs)
    picked = {}
    for _base_env, index, case in _cases(env_id):
        if (
            case.template in ("text-ou", "five-text-ou", "bar", "lines", "rejects-others", "or")
            and case.kind == "hedge"
        ):
            picked.setdefault(("hedge", case.template), (index, case))
        if case.kind == "correct" and case.template in ("answer-explanation", "because", "rejects-others", "sentence"):
            picked.setdefault(("correct", case.template), (index, case))
    assert picked
    for (kind, _template), (index, case) in picked.items():
        env.reset(options={"index": index})
        _, reward, terminated, _, _ = env.step(f"Final Answer: {case.answer}")
        want = 0.0 if kind == "hedge" else 1.0
        assert terminated and reward == want, (env_id, case)
    env.close()


def test_the_suite_holds_ten_thousand_of_each():
    """The planned cases over all registered ids (generation only, no scoring): >= 10k hedges and >= 10k
    committed correct answers."""
    hedges = correct = 0
    for env_id in IDS:
        if _is_paper(env_id) and not TESTSETS.is_dir():
            continue
        for _base_env, _index, case in _cases(env_id):
            hedges += case.kind == "hedge"
            correct += case.kind == "correct"
    assert hedges >= MIN_CASES and correct >= MIN_CASES, (hedges, correct)
