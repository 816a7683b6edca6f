"""Hand-checked (prediction, gold, expected) tables for the QA, math and multiple-choice scorers (the
judge's are in test_judge.py), plus math-verify inside threads and a subprocess, and its time bound."""

from __future__ import annotations

import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from agentflow_env.error import ConfigError
from agentflow_env.scoring import math as math_scoring
from agentflow_env.scoring.choice import ChoiceScorer, extract_choice
from agentflow_env.scoring.math import MathScorer
from agentflow_env.scoring.qa import QAScorer, exact_match, gaia_match, normalize_answer, token_f1, unwrap_answer
from agentflow_env.types import Task

# ------------------------------------------------------------------ QA
NORMALIZE = [
    ("The Eiffel Tower!", "eiffel tower"),
    ("  A  cat, an apple & the dog. ", "cat apple dog"),
    ("U.S.A.", "usa"),
    ("Theater", "theater"),  # "the" inside a word stays
    ("James   MADISON", "james madison"),
]


@pytest.mark.parametrize(("text", "expected"), NORMALIZE)
def test_hotpotqa_normalisation(text, expected):
    assert normalize_answer(text) == expected


# (prediction, gold, em, f1) — F1 values computed by hand from token overlaps
QA_TABLE = [
    ("James Madison", ["james madison"], 1.0, 1.0),
    ("the Prussian", ["Prussian"], 1.0, 1.0),
    ("Madison", ["James Madison"], 0.0, 2 / 3),  # p=1, r=1/2
    ("President James Madison", ["James Madison"], 0.0, 0.8),  # p=2/3, r=1
    ("yes", ["no"], 0.0, 0.0),
    ("yes it is", ["yes"], 0.0, 0.0),  # yes/no must match exactly, no partial credit
    ("March 29, 2018", ["March 29, 2018"], 1.0, 1.0),
    ("29 March 2018", ["March 29, 2018"], 0.0, 1.0),  # same bag of tokens
    ("<answer>Let's Make Money</answer>", ["Let'S Make Money"], 1.0, 1.0),
    ("Final Answer: Colorectal cancer", ["colorectal cancer"], 1.0, 1.0),
    ("London", ["Paris", "London"], 1.0, 1.0),  # best over aliases
    ("", ["Paris"], 0.0, 0.0),
    ("An apple a day", ["apple day"], 1.0, 1.0),  # articles drop out
]


@pytest.mark.parametrize(("pred", "gold", "em", "f1"), QA_TABLE)
def test_qa_table(pred, gold, em, f1):
    task = Task("t", "q?", gold, family="search")
    assert QAScorer("em")(pred, task) == pytest.approx(em)
    assert QAScorer("f1")(pred, task) == pytest.approx(f1)
    assert QAScorer().details(pred, task)["f1"] == pytest.approx(f1)


def test_qa_primitives_and_bad_metric():
    assert exact_match("An Apple", "apple") == 1.0
    assert token_f1("w x y z", "y z u v") == pytest.approx(0.5)
    assert token_f1("a b c d", "c d e f") == pytest.approx(4 / 7)  # "a" is an article: p=2/3, r=1/2
    assert QAScorer("cover")("it was James Madison, I think", Task("t", "q", "james madison")) == 1.0
    assert QAScorer("cover")("Madisonville", Task("t", "q", "madison")) == 0.0
    with pytest.raises(ConfigError, match="metric"):
        QAScorer("bleu")


GAIA_TABLE = [
    ("34689", "34689", 1.0),
    ("34,689", "34689", 1.0),
    ("$41", "41", 1.0),
    ("17%", "17", 1.0),
    ("17.0", "17", 1.0),
    ("18", "17", 0.0),
    ("egalitarian", "egalitarian", 1.0),
    ("Egalitarian.", "egalitarian", 1.0),
    ("Indonesia,Myanmar", "Indonesia, Myanmar", 1.0),
    ("Myanmar, Indonesia", "Indonesia, Myanmar", 0.0),  # lists are ordered
    ("Indonesia", "Indonesia, Myanmar", 0.0),
    ("3.1.3.1; 1.11.1.7", "3.1.3.1; 1.11.1.7", 1.0),
    ("So we had to let it die", "So we had to let it die.", 1.0),
    ("seventeen", "17", 0.0),
]


@pytest.mark.parametrize(("pred", "gold", "expected"), GAIA_TABLE)
def test_gaia_quasi_exact_match(pred, gold, expected):
    assert gaia_match(pred, gold) == expected


def test_unwrap_answer():
    assert unwrap_answer("reasoning... <answer> 42 </answer>") == "42"
    assert unwrap_answer("so \\boxed{\\frac{1}{2}} done") == "\\frac{1}{2}"
    assert unwrap_answer("**Final Answer:** Paris") == "Paris"
    assert unwrap_answer(None) == ""


# ------------------------------------------------------------------ math
MATH_TABLE = [
    ("33", 33, 1.0),
    ("\\boxed{33}", "33", 1.0),
    ("34", 33, 0.0),
    ("The answer is \\boxed{\\frac{1}{2}}", "0.5", 1.0),
    ("3/4", "\\frac{3}{4}", 1.0),
    ("\\sqrt{8}", "2\\sqrt{2}", 1.0),
    ("x+1", "1+x", 1.0),
    ("10\\%", "0.1", 1.0),
    ("<answer>1,000</answer>", "1000", 1.0),
    ("\\pi", "3.14159", 0.0),
    ("(1,2)", "(1, 2)", 1.0),
    ("-1", -1, 1.0),
    ("no idea", "5", 0.0),
]


@pytest.fixture(scope="module")
def math_scorer():
    return MathScorer(timeout_s=20.0)


@pytest.mark.parametrize(("pred", "gold", "expected"), MATH_TABLE)
def test_math_table(math_scorer, pred, gold, expected):
    assert math_scorer(pred, Task("m", "q", gold)) == expected


def test_math_in_threads_both_isolations():
    cases = [(p, g, e) for p, g, e in MATH_TABLE if not isinstance(g, int)][:8]
    for isolation in ("process", "thread"):
        scorer = MathScorer(timeout_s=20.0, isolation=isolation)
        with ThreadPoolExecutor(max_workers=4) as pool:
            got = list(pool.map(lambda c, s=scorer: s(c[0], Task("m", "q", c[1])), cases))
        assert got == [e for _, _, e in cases], isolation


def test_math_in_subprocess():
    code = (
        "from agentflow_env.scoring.math import MathScorer\n"
        "from agentflow_env.types import Task\n"
        "from concurrent.futures import ThreadPoolExecutor\n"
        "s = MathScorer(timeout_s=20)\n"
        "print(s('\\\\sqrt{8}', Task('a', 'q', '2\\\\sqrt{2}')), s('\\\\frac{1}{3}', Task('b', 'q', '0.5')))\n"
        "with ThreadPoolExecutor(2) as p:\n"
        "    print(list(p.map(lambda g: s('x+1', Task('c', 'q', g)), ['1+x', 'x+2'])))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["1.0 0.0", "[1.0, 0.0]"]


def test_math_time_bound_thread(monkeypatch):
    def slow(prediction, golds):
        time.sleep(3)
        return True

    monkeypatch.setattr(math_scoring, "math_equal", slow)
    scorer = MathScorer(timeout_s=0.2, isolation="thread")
    start = time.perf_counter()
    assert scorer("\\sqrt{8}", Task("m", "q", "2\\sqrt{2}")) == 0.0
    assert time.perf_counter() - start < 2.0
    assert scorer.overruns == 1


def test_math_time_bound_process_kills_and_recovers():
    # far below the helper's start-up time: the request overruns, the helper is killed
    fast_fail = MathScorer(timeout_s=0.001, isolation="process")
    assert fast_fail("\\sqrt{8}", Task("m", "q", "2\\sqrt{2}")) == 0.0
    assert fast_fail.overruns == 1
    # the next scorer gets a fresh helper
    assert MathScorer(timeout_s=30, isolation="process")("\\sqrt{8}", Task("m", "q", "2\\sqrt{2}")) == 1.0


def test_math_bad_options():
    with pytest.raises(ConfigError):
        MathScorer(isolation="fork")
    with pytest.raises(ConfigError):
        MathScorer(timeout_s=0)


# ------------------------------------------------------------------ multiple choice
OPTIONS = ["0.9", "0.7", "0.1", "0.3"]
CHOICE_TABLE = [
    ("B", "B"),
    ("(B)", "B"),
    ("b", "B"),
    ("Answer: B", "B"),
    ("B. 0.7", "B"),
    ("**B**", "B"),
    ("\\boxed{B}", "B"),
    ("<answer>D</answer>", "D"),
    ("The correct answer is (C).", "C"),
    ("I think the answer is option D because of the redshift.", "D"),
    ("0.7", "B"),  # the option's own text
    ("The answer is 0.3", "D"),
    ("C)", "C"),
    ("A or B", None),  # hedging picks nothing
    ("The answer is a large ratio", None),  # 'a' here is an article, not option A
    ("E", None),  # not one of the four options
    ("", None),
]


@pytest.mark.parametrize(("pred", "letter"), CHOICE_TABLE)
def test_choice_extraction_table(pred, letter):
    assert extract_choice(pred, OPTIONS) == letter


def test_choice_by_option_text_medqa():
    options = ["Hemolytic uremic syndrome", "Oral ulcers", "Colorectal cancer", "Pancreatic cancer"]
    task = Task("m", "q", "C", family="science", metadata={"options": options})
    scorer = ChoiceScorer()
    assert scorer("Colorectal cancer", task) == 1.0
    assert scorer("The patient is at greatest risk of colorectal cancer.", task) == 1.0
    assert scorer("cancer", task) == 0.0  # two options contain it
    assert scorer("D", task) == 0.0
    # verbatim text tells apart options that normalise alike
    signed = Task("s", "q", "A", metadata={"options": ["-12*hbar/25", "12*hbar/25", "25*hbar/2", "-25*hbar/2"]})
    assert scorer("-12*hbar/25", signed) == 1.0
