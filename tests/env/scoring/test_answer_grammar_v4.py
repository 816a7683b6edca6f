"""Answer grammar 4 (the -v4 ids): sentences that restate the question are read by the gold's type, reasoning
is read at its conclusion, weaker rival cues after a gold-first statement are hedges, in every action format.
The older ids' pins: tests/env/scoring/test_pinned_grammars.py."""

from __future__ import annotations

import warnings

import gymnasium as gym
import pytest

import agentflow_env  # noqa: F401  (registers the ids)
from agentflow_env.scoring.grammar import read_answer
from agentflow_env.scoring.judge import JudgeScorer
from agentflow_env.scoring.sentence import gold_type, option_value, sentence_value
from agentflow_env.scoring.versioned import GrammarScorer
from agentflow_env.types import ListTaskSource, Task
from benchmarks.specs import make_env
from tests.answer_styles import FORMATS, action
from tests.helpers import RecordingJudge

pytestmark = pytest.mark.filterwarnings("ignore:.*is out of date:DeprecationWarning")


def _env(env_id: str) -> gym.Env:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return gym.make(env_id)


def _qa(answer: str, question: str, grammar: int = 4) -> gym.Env:
    tasks = ListTaskSource([Task("t", question, [answer], family="search")])
    return make_env("Bamboogle", tasks=tasks, grammar=grammar)


def _step(env: gym.Env, answer: str, fmt: str = "text") -> float:
    env.reset()
    _, reward, terminated, _, _ = env.step(action(answer, fmt))
    assert terminated
    return float(reward)


# ------------------------------------------------------------------ restatements, by the gold's type
RESTATED = [
    ("1879", "In what year was the founder of Embery Instruments born?",
     "The founder of Embery Instruments was born in 1879."),
    ("Danik Loreau", "Who is the mayor of Palgrad?", "Danik Loreau is the mayor of Palgrad."),
    ("Danik Loreau", "Who is the mayor of Palgrad?", "It turns out the current mayor of Palgrad is D. Loreau."),
    ("March 29, 2018", "When does the regular season start?", "The regular season started on 29 March 2018."),
    ("27", "How many miles from City A will they meet?", "**They meet 27 miles from City A.**"),
    ("3655", "Compute the sum of k for k from 1 to 85.", "The sum of k for k from 1 to 85 is 3,655."),
    ("India and Bangladesh", "Which two countries share the border?", "The two countries are India and Bangladesh."),
]  # fmt: skip


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("gold", "question", "answer"), RESTATED)
def test_a_restated_sentence_commits_to_its_one_value(gold, question, answer, fmt):
    assert _step(_qa(gold, question), answer, fmt) == 1.0
    assert _step(_qa(gold, question, grammar=3), answer, fmt) in (0.0, 1.0)  # v3 reads it as it always did


@pytest.mark.parametrize(
    ("gold", "question", "answer"),
    [
        ("1879", "In what year was the founder of Embery Instruments born?", "He was born in 1879, or in 1880."),
        ("1879", "In what year was the founder born?", "The founder was born in 1879 and died in 1880."),
        ("Danik Loreau", "Who is the mayor of Palgrad?", "Danik Loreau is the mayor, and Ilsa Varn is the deputy."),
        ("27", "How many miles from City A will they meet?", "They meet at least 27 miles from City A."),
    ],
)
def test_two_values_of_the_gold_type_in_a_sentence_are_a_rival(gold, question, answer):
    assert _step(_qa(gold, question), answer) == 0.0


def test_the_questions_own_quantities_are_not_rivals():
    golds, question = ["3655"], "Compute the sum of k for every whole number k from 1 to 85."
    assert sentence_value("The sum of k from 1 to 85 is 3655", golds, question).value == "3655"
    assert sentence_value("The sum of k from 1 to 86 is 3655", golds, question).hedge is not None
    assert sentence_value("The sum is 3655 or so", golds, question).hedge is not None
    assert gold_type(["27 km"]) == "number" and gold_type(["30 April 1789"]) == "date"
    assert gold_type(["4\\sqrt{5}"]) == "expression" and gold_type(["Danik Loreau"]) == "text"
    assert option_value("I am confident that C is the best fit.", ["a", "b", "c", "d"]).value == "C"
    assert option_value("A patient like this needs C, not D.", ["a", "b", "c", "d"]).hedge is not None


# ------------------------------------------------------------------ reasoning, then the conclusion
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(
    "answer",
    [
        "The first hop gives Ilsa Varn, the founder. Her birthplace is Palgrad. So the mayor is Danik Loreau.",
        "I searched the records twice and they agree on the office holder.\n\nTherefore, Danik Loreau.",
        "Ilsa Varn founded the town. Its mayor is listed in the registry.\n\nDanik Loreau",
        "I first thought Ilsa Varn, but after checking, it is Danik Loreau.",  # self-correction, every format
    ],
)
def test_reasoning_is_read_at_its_conclusion(answer, fmt):
    assert _step(_qa("Danik Loreau", "Who is the mayor of Palgrad?"), answer, fmt) == 1.0


@pytest.mark.parametrize(
    "answer",
    [
        "Danik Loreau is the mayor. So it might be Ilsa Varn.",  # a conclusion that hedges
        "Danik Loreau\n\nIlsa Varn",  # two bare values: no prose before the last one
        "The answer is Danik Loreau. It was checked twice by the team.\n\nIlsa Varn",  # a marked answer before
    ],
)
def test_a_conclusion_that_does_not_commit_is_not_read_alone(answer):
    assert _step(_qa("Ilsa Varn", "Who is the mayor of Palgrad?"), answer) == 0.0


# ------------------------------------------------------------------ rivals after a gold-first statement
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(
    "template",
    [
        "{a}. But I've also seen {b}.",
        "{a} (though {b} also appears in one source).",
        "{a}. One document lists {b} instead.",
        "{a}, with {b} as a close second.",
        "The mayor of Palgrad is {a}. {b} is also possible.",
    ],
)
def test_weaker_cues_with_a_new_candidate_are_hedges_in_either_order(template, fmt):
    env = _qa("Danik Loreau", "Who is the mayor of Palgrad?")
    for a, b in (("Danik Loreau", "Ilsa Varn"), ("Ilsa Varn", "Danik Loreau")):
        assert _step(env, template.format(a=a, b=b), fmt) == 0.0


@pytest.mark.parametrize(
    "answer",
    [
        "Danik Loreau. He is also the city's oldest mayor.",  # "also" without a new candidate
        "Danik Loreau is the mayor of Palgrad. Palgrad also has a deputy mayor.",  # the question's own name
    ],
)
def test_weaker_cues_without_a_rival_keep_the_answer(answer):
    assert _step(_qa("Danik Loreau", "Who is the mayor of Palgrad?"), answer) == 1.0


def test_an_alias_is_no_rival():
    reading = read_answer("Danik Loreau, also known as Dan Loreau.", ["Danik Loreau"], "text", 4, "Who?")
    assert reading.hedge is None


def test_the_judge_never_sees_a_sentence_that_names_two_candidates():
    engine = RecordingJudge()
    judge = GrammarScorer(JudgeScorer(engine), grammar=4)
    task = Task("t", "Who is the mayor of Palgrad?", ["Danik Loreau"], family="search")
    assert judge("Danik Loreau is the mayor, and Ilsa Varn is the deputy.", task) == 0.0
    assert judge("Danik Loreau. But I've also seen Ilsa Varn.", task) == 0.0
    assert engine.candidates == []  # hedges score 0 without a call
    assert judge("Some reasoning about the town. So the mayor of Palgrad is Danik Loreau.", task) == 1.0
    assert engine.candidates == ["the mayor of Palgrad is Danik Loreau"]  # the conclusion, as rule scorers read it
